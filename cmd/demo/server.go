package main

import (
	"context"
	"fmt"
	"io"
	"time"

	dsnparse "github.com/namedlock/mysql/internal/dsn"
	"github.com/namedlock/mysql/pool"
)

// embeddedServer is the embedded go-mysql-server the demo starts when no
// -dsn is given (see startEmbeddedServer).
type embeddedServer interface {
	DSN() string  // how to reach it
	Addr() string // its host:port
	Close() error // stops it
}

// connectTimeout bounds the first contact with the server.
const connectTimeout = 5 * time.Second

// target is the server the demo runs against.
type target struct {
	dsn      string
	addr     string
	version  string
	embedded embeddedServer // nil for a server given by -dsn
}

// connect returns the server to run against: dsn, or an embedded server
// started here when dsn is empty (said on out). It proves that the server
// answers and that named locks work there. Errors are pool.Open's: they name
// the address, never the password (they never quote the DSN).
func connect(ctx context.Context, dsn string, out io.Writer) (*target, error) {
	t := &target{dsn: dsn}
	if dsn == "" {
		s, err := startEmbeddedServer()
		if err != nil {
			return nil, fmt.Errorf("start the embedded server: %w", err)
		}
		t.embedded, t.dsn = s, s.DSN()
		fmt.Fprintf(out, "no -dsn given: started an embedded MySQL-compatible server (go-mysql-server) on %s\n", s.Addr())
	}
	// pool.Open parses the DSN; its errors never quote it.
	probe, err := pool.OpenContext(ctx, t.dsn, pool.WithConnectTimeout(connectTimeout))
	if err != nil {
		return nil, t.fail(err)
	}
	defer probe.Close()
	cfg, err := dsnparse.Parse(t.dsn)
	if err != nil { // pool.Open accepted it: cannot happen
		return nil, t.fail(fmt.Errorf("parse the DSN: %w", err))
	}
	t.addr = cfg.Addr
	if err := probe.QueryRowContext(ctx, "SELECT VERSION()").Scan(&t.version); err != nil {
		return nil, t.fail(fmt.Errorf("server at %s: read its version: %w", t.addr, err))
	}
	if t.embedded != nil {
		t.version = "go-mysql-server, reporting " + t.version
	}
	return t, nil
}

func (t *target) fail(err error) error {
	if cerr := t.close(); cerr != nil {
		return fmt.Errorf("%w (and stopping the embedded server: %v)", err, cerr)
	}
	return err
}

// closeGrace is how long close lets the embedded server notice that the
// demo's connections have closed before it stops the server. Otherwise the
// server finds some of them still open, cuts them, and logs an error for
// each ("use of closed network connection") on stderr.
const closeGrace = 100 * time.Millisecond

// close stops the embedded server, if any. The demo's pools must be closed.
func (t *target) close() error {
	if t.embedded == nil {
		return nil
	}
	time.Sleep(closeGrace)
	return t.embedded.Close()
}
