package pool

import (
	"fmt"
	"time"
)

// Defaults used by [Open] when no option overrides them.
const (
	// DefaultMaxConns is how many locks one process may hold or wait for at
	// once through one pool, unless [WithMaxConns] says otherwise.
	DefaultMaxConns = 32
	// DefaultLease is the session wait_timeout given to lock connections: a
	// host that vanishes without closing its sockets loses its locks this
	// long after its last statement. namedlock's keep-alive keeps live
	// holders' sessions from idling that long.
	DefaultLease = 30 * time.Second
	// DefaultConnectTimeout bounds the ping and the named-lock probe in [Open].
	DefaultConnectTimeout = 10 * time.Second
)

// Option configures [Open].
type Option func(*options)

type options struct {
	maxConns       int
	lease          time.Duration
	connectTimeout time.Duration
	err            error
}

func defaultOptions() options {
	return options{maxConns: DefaultMaxConns, lease: DefaultLease, connectTimeout: DefaultConnectTimeout}
}

// WithMaxConns bounds the pool to n connections: the number of locks this
// process may hold or wait for at once (goroutines waiting for the same key
// share one connection, see namedlock). All n are kept idle for reuse.
// n must be at least 1.
func WithMaxConns(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.setErr(fmt.Errorf("pool: WithMaxConns(%d): must be at least 1", n))
			return
		}
		o.maxConns = n
	}
}

// WithLease sets the session wait_timeout of lock connections, in whole
// seconds (rounded up). It must be at least 2 s, and it must be longer than
// the keep-alive interval plus check timeout of the lockers using the pool
// (namedlock validates that and sets its own lease on connections that
// differ).
func WithLease(d time.Duration) Option {
	return func(o *options) {
		if d < 2*time.Second {
			o.setErr(fmt.Errorf("pool: WithLease(%v): must be at least 2s", d))
			return
		}
		o.lease = d
	}
}

// WithConnectTimeout bounds the ping and probe that [Open] runs. It must be
// positive.
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.setErr(fmt.Errorf("pool: WithConnectTimeout(%v): must be positive", d))
			return
		}
		o.connectTimeout = d
	}
}

func (o *options) setErr(err error) {
	if o.err == nil {
		o.err = err
	}
}
