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
	// MaxLease is the longest lease WithLease accepts: the largest
	// wait_timeout MySQL allows on Linux (365 days).
	MaxLease = 31536000 * time.Second
	// DefaultConnectTimeout bounds the ping and the named-lock probe in [Open].
	DefaultConnectTimeout = 10 * time.Second
)

// Option configures [Open], [OpenContext] and [OpenConfig]. An option out
// of range makes them fail with an error that matches [ErrInvalidOption]
// and names it.
type Option func(*options) error

type options struct {
	maxConns       int
	lease          time.Duration
	connectTimeout time.Duration
	fromConfig     bool // opened by OpenConfig: messages speak of the configuration, not a DSN
}

func defaultOptions() options {
	return options{maxConns: DefaultMaxConns, lease: DefaultLease, connectTimeout: DefaultConnectTimeout}
}

// WithMaxConns bounds the pool to n connections: the number of locks this
// process may hold or wait for at once (goroutines waiting for the same key
// share one connection, see namedlock). All n are kept idle for reuse.
// n must be at least 1. The Lockers on the pool read its limit from
// sql.DB.Stats (MaxOpenConnections) as they go, so a later
// sql.DB.SetMaxOpenConns is followed: a raised limit lets waiting callers
// on, and one lowered below what a DoMulti needs makes it fail rather than
// wait for a connection the pool will not open (see namedlock's DoMulti).
func WithMaxConns(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: WithMaxConns(%d): must be at least 1", ErrInvalidOption, n)
		}
		o.maxConns = n
		return nil
	}
}

// WithLease sets the lease: the session wait_timeout of lock connections, in
// whole seconds (rounded up), so that a holder whose host vanished loses its
// locks this long after its last statement. It is the one place the lease
// is set: a namedlock.Locker on the pool reads it, and refuses a keep-alive
// interval plus check timeout that is not shorter. It must be at least 2 s
// and at most [MaxLease].
func WithLease(d time.Duration) Option {
	return func(o *options) error {
		if d < 2*time.Second {
			return fmt.Errorf("%w: WithLease(%v): must be at least 2s", ErrInvalidOption, d)
		}
		if d > MaxLease {
			return fmt.Errorf("%w: WithLease(%v): must be at most pool.MaxLease (%v, the largest wait_timeout, %d s)",
				ErrInvalidOption, d, MaxLease, int64(MaxLease/time.Second))
		}
		o.lease = d
		return nil
	}
}

// WithConnectTimeout bounds the ping and probe that [Open] runs. It must be
// positive.
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithConnectTimeout(%v): must be positive", ErrInvalidOption, d)
		}
		o.connectTimeout = d
		return nil
	}
}
