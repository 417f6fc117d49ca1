package pool

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/lockconn"
)

// Open opens the dedicated lock pool described by dsn (the go-sql-driver
// format, e.g. "user:pass@tcp(127.0.0.1:3306)/app"). It is [OpenContext]
// bounded by [DefaultConnectTimeout] (or [WithConnectTimeout]).
func Open(dsn string, opts ...Option) (*sql.DB, error) {
	return OpenContext(context.Background(), dsn, opts...)
}

// OpenContext opens the dedicated lock pool described by dsn. It parses dsn
// with [mysql.ParseDSN] and enforces, whatever the DSN says:
//
//   - interpolateParams=true: one round trip per statement, no server-side
//     prepared statements;
//   - readTimeout=0: a read timeout would cut a GET_LOCK wait short and lose
//     the connection; waits are bounded by contexts instead;
//   - the session wait_timeout set to the lease ([WithLease]);
//   - the server's statement time limit switched off in every session
//     (MariaDB max_statement_time, MySQL and TiDB max_execution_time, each
//     set to 0 on the server that has it, as learned on a first connection):
//     a server-wide limit would otherwise end every GET_LOCK wait that
//     outlasts it, whatever ctx allows;
//   - those two session settings by a SET of the pool's own that every new
//     connection runs after the DSN's parameters (which the driver sends as
//     one SET of their text, in no fixed order): a parameter that names one
//     of them, in any spelling the server accepts (WAIT_TIMEOUT,
//     @@session.wait_timeout, SESSION wait_timeout …), or whose value
//     assigns more than one variable, is overridden on every connection
//     rather than matched (matching would have to parse SQL, and a value
//     can hold any of it). It costs a round trip per new connection only
//     when the DSN has parameters of its own;
//   - at most [WithMaxConns] connections, all kept idle for reuse, with no
//     maximum lifetime (a held lock's connection is never recycled under
//     it); a connection left idle in the pool is closed after a third of
//     the lease, before the server would end its session (the lease is its
//     wait_timeout) and the driver would log the broken connection at its
//     next use;
//   - the driver's log lines (a connection that broke under a statement,
//     before it returns the error) go to the pool's own log, never to the
//     process's stderr nor to the logger of [mysql.SetLogger], which are
//     the application's.
//
// The pool's connections are made by a connector of the library's own
// (internal/lockconn), which keeps, with each connection, what namedlock
// learns about it, and which namedlock finds from the *sql.DB. Connections
// over tcp (tcp4, tcp6) or unix are dialed by the pool itself, with a
// [net.Dialer] as the driver does, so that each one knows its socket
// (unless the DSN sets writeTimeout, under which the driver sets deadlines
// of its own). A dial function registered with [mysql.RegisterDialContext]
// under a network name of its own is still used (the socket is then
// unknown), but one registered for "tcp" or "unix" themselves is not.
//
// It then pings the server, verifies that GET_LOCK, IS_USED_LOCK and
// RELEASE_LOCK work (a lock taken is seen held by its session, the one
// CONNECTION_ID() names, and free once released: a DSN that sets
// pseudo_thread_id, which makes CONNECTION_ID() name another session, TiDB
// v6.1 to v7.1, which have no IS_USED_LOCK, and a TiDB without
// mysql.advisory_locks, whose GET_LOCK is a no-op at most, are refused
// with an error naming the version and the reason) and that named
// locks are not node-local there: neither a Galera node with
// wsrep_on=ON nor a member of a Group Replication group in multi-primary
// mode with more than one ONLINE member. ctx bounds those checks together
// with [WithConnectTimeout]. Nil options are ignored.
//
// On any failure the pool is closed and the error, one line, matches one
// of [ErrInvalidOption], [ErrInvalidDSN] (nothing dialed; a URL such as
// mysql://… is refused with the format expected), [ErrUnreachable],
// [ErrRefused] (the server answered: wrong password, unknown database; the
// *mysql.MySQLError is in the chain) or [ErrUnsupportedServer], or wraps
// ctx's error when ctx ended first (or, should a query of the checks fail,
// that query's error). It names the address and user, and the
// database where that is the problem, never the password: no message
// quotes the DSN.
func OpenContext(ctx context.Context, dsn string, opts ...Option) (*sql.DB, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return open(ctx, cfg, o)
}

// OpenConfig is [OpenContext] for a *mysql.Config (from [mysql.NewConfig]
// or [mysql.ParseDSN]), for what a DSN cannot carry: a *tls.Config of
// cfg.TLS, a dial function of cfg.DialFunc (a proxy, an SSH tunnel), a
// [mysql.BeforeConnect] callback that sets a fresh password on each new
// connection (an IAM auth token). It enforces, probes and reports exactly
// as OpenContext does, on a copy of cfg ([mysql.Config.Clone]): cfg itself
// is never changed. On the copy, InterpolateParams, ReadTimeout and the
// session settings are the pool's, whatever cfg says, as they are whatever
// a DSN says; Logger is the pool's own (cfg.Logger is not used); an empty
// Net is "tcp", as the driver has it; and, for tcp or unix without a
// DialFunc or WriteTimeout, the pool dials itself. A BeforeConnect
// callback runs before each connection is made and may change the
// credentials it is given; changing InterpolateParams or ReadTimeout there
// would undo the pool's settings for that connection. Errors never quote
// cfg.Passwd; a nil cfg returns an error matching [ErrInvalidDSN].
func OpenConfig(ctx context.Context, cfg *mysql.Config, opts ...Option) (*sql.DB, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, newOpenError([]error{ErrInvalidDSN}, "pool: invalid configuration: nil *mysql.Config")
	}
	own := cfg.Clone()
	if own.Net == "" {
		own.Net = "tcp"
	}
	o.fromConfig = true
	return open(ctx, own, o)
}

// newOptions applies opts to the defaults; nil options are ignored.
func newOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return options{}, err
		}
	}
	return o, nil
}

// open opens the lock pool on cfg, which it owns and changes, with o: the
// enforcement, probes and errors of OpenContext.
func open(ctx context.Context, cfg *mysql.Config, o options) (*sql.DB, error) {
	cfg.InterpolateParams = true
	cfg.ReadTimeout = 0

	// The driver's log lines (a broken connection, before it returns an
	// error that namedlock reports or database/sql retries) stay out of the
	// application's stderr: this pool's driver logs to its own DriverLog.
	// Never mysql.SetLogger: the global logger is the application's.
	dlog := new(lockconn.DriverLog)
	cfg.Logger = dlog

	checkCtx, cancel := context.WithTimeout(ctx, o.connectTimeout)
	defer cancel()
	limitVar, err := statementLimitVar(checkCtx, cfg)
	if err != nil {
		return nil, openFailed(ctx, cfg, o, err)
	}
	tracked := tracksNetConns(cfg)
	if tracked {
		cfg.DialFunc = lockconn.Dial
	}
	mc, err := mysql.NewConnector(cfg)
	if err != nil { // normalize again: interpolateParams with an unsafe collation
		return nil, o.reword(refusedDSN(err))
	}
	c := lockconn.NewConnector(mc, o.lease, tracked, dlog, sessionStatement(o.lease, limitVar))
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(o.maxConns)
	db.SetMaxIdleConns(o.maxConns)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(c.IdleTimeout())

	if err := check(checkCtx, db); err != nil {
		_ = db.Close()
		return nil, openFailed(ctx, cfg, o, err)
	}
	return db, nil
}

// openFailed is the error of an Open whose checks (or the probe of the
// server's kind) failed with err; ctx is the caller's.
func openFailed(ctx context.Context, cfg *mysql.Config, o options, err error) error {
	if ce, ok := err.(*connectError); ok {
		return explainConnect(ctx, cfg, o, ce.err)
	}
	if errors.Is(err, ErrInvalidDSN) { // says it all, with no DSN text
		return o.reword(err)
	}
	// ErrUnsupportedServer, or a failed query: no DSN text in either.
	return newOpenError([]error{err}, "pool: %s: %s", describe(cfg), strings.TrimPrefix(err.Error(), "pool: "))
}

// reword makes an ErrInvalidDSN error of OpenConfig speak of the
// configuration: there is no DSN.
func (o options) reword(err error) error {
	if oe, ok := err.(*openError); ok && o.fromConfig {
		oe.msg = strings.Replace(oe.msg, "pool: invalid DSN:", "pool: invalid configuration:", 1)
		oe.msg = strings.ReplaceAll(oe.msg, "the DSN", "the configuration")
	}
	return err
}

// tracksNetConns reports whether Open dials cfg's connections itself (with
// lockconn.Dial): only for the networks the driver dials with a plain
// net.Dialer, when no dial function is set, and when the DSN sets no
// writeTimeout (the driver then sets write deadlines on the connection
// itself, which would override a caller's deadline).
func tracksNetConns(cfg *mysql.Config) bool {
	if cfg.DialFunc != nil || cfg.WriteTimeout > 0 {
		return false
	}
	switch cfg.Net {
	case "tcp", "tcp4", "tcp6", "unix":
		return true
	}
	return false
}

// sessionStatement is the SET that every connection of the pool runs once
// it is made, after the DSN's parameters: the lease as its wait_timeout,
// and the statement time limit limitVar (if not "") switched off.
func sessionStatement(lease time.Duration, limitVar string) string {
	stmt := "SET @@SESSION.wait_timeout = " + strconv.FormatInt(leaseSeconds(lease), 10)
	if limitVar != "" {
		stmt += ", @@SESSION." + limitVar + " = 0"
	}
	return stmt
}

// leaseSeconds is the session wait_timeout, in whole seconds, that a lease
// of d becomes (rounded up, at least 1).
func leaseSeconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}

// describe names the server for error messages: address and user only.
func describe(cfg *mysql.Config) string {
	return fmt.Sprintf("%s %s as %q", cfg.Net, cfg.Addr, cfg.User)
}

// check pings the server, refuses Galera with wsrep_on=ON and Group
// Replication in multi-primary mode, and proves that a named lock can be
// taken, seen held by its session, released and seen free
// (flavor.CheckNamedLocks, which also refuses a TiDB without
// mysql.advisory_locks).
func check(ctx context.Context, db *sql.DB) error {
	if err := db.PingContext(ctx); err != nil {
		return &connectError{err}
	}
	if err := flavor.CheckTopology(ctx, db); err != nil {
		if errors.Is(err, flavor.ErrNodeLocal) {
			return fmt.Errorf("%w: %w", ErrUnsupportedServer, err)
		}
		return err // wsrep_on could not be read: not a refusal
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	probe := "namedlock:probe:" + hex.EncodeToString(b[:])
	conn, err := db.Conn(ctx)
	if err != nil {
		return &connectError{err}
	}
	defer conn.Close()
	if err := flavor.CheckNamedLocks(ctx, conn, probe); err != nil {
		if errors.Is(err, flavor.ErrNoNamedLocks) {
			return fmt.Errorf("%w: %w", ErrUnsupportedServer, err)
		}
		return fmt.Errorf("%w: named-lock probe failed: %w", ErrUnsupportedServer, err)
	}
	return nil
}
