package namedlock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// serialLocksReads reports whether srv's serializable transactions lock
// what they read (MySQL, MariaDB): where a DoTx at SERIALIZABLE hands its
// lock on before its COMMIT.
func serialLocksReads(t testing.TB, srv *testdb.Server) bool {
	t.Helper()
	return srv.Flavor == flavor.MySQL || srv.Flavor == flavor.MariaDB
}

// requireSerialLocks returns the real test server, skipping the test where
// serializable reads do not lock (see serialLocksReads).
func requireSerialLocks(t *testing.T) *testdb.Server {
	t.Helper()
	srv := testdb.RequireReal(t)
	if !serialLocksReads(t, srv) {
		t.Skipf("%s: serializable reads do not lock there (TiDB refuses SERIALIZABLE: error 8048), so no DoTx hands its lock on before its COMMIT", srv.Name)
	}
	return srv
}

// serialCounter is what the tests of DoTx at SERIALIZABLE on one counter
// share: the application's pool, a counter table with one row (v = 0), a
// Locker, the row's key and the transaction options.
type serialCounter struct {
	ctx   context.Context
	app   *sql.DB
	table string
	l     *namedlock.Locker
	key   string
	opts  *sql.TxOptions
}

// newSerialCounter sets up a serialCounter, with a ctx that ends after
// timeout, or skips the test (requireSerialLocks).
func newSerialCounter(t *testing.T, timeout time.Duration) *serialCounter {
	t.Helper()
	srv := requireSerialLocks(t)
	app := testdb.OpenDB(t, srv.DSN)
	table := counterTable(t, sqlx.NewDb(app, "mysql"), 1)
	return &serialCounter{
		ctx:   testCtx(t, timeout),
		app:   app,
		table: table,
		l:     newInstance(t, srv.DSN, namedlock.WithSerializableHandoff()).locker,
		key:   keyfmt.Key(table, 1),
		opts:  &sql.TxOptions{Isolation: sql.LevelSerializable},
	}
}

// gatedDB opens a pool on dsn whose COMMITs wait, while the gate is
// closed, before they are sent: the real server sees them late. close(gate)
// lets them go; commits counts the COMMITs sent.
func gatedDB(t testing.TB, dsn string) (db *sql.DB, gate chan struct{}, commits *atomic.Int64) {
	t.Helper()
	db, g := gatedDBArmed(t, dsn, nil)
	return db, g.gate, g.commits
}

// gatedDBArmed is gatedDB whose gate, when armed is not nil, holds back
// only the first COMMIT, sent while armed is true, of a transaction that
// ran an Exec (which disarms it): an empty transaction's COMMIT, which
// may be sent first, goes at once.
func gatedDBArmed(t testing.TB, dsn string, armed *atomic.Bool) (*sql.DB, *gatedConnector) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedConnector{Connector: inner, gate: make(chan struct{}), commits: new(atomic.Int64), armed: armed}
	db := sql.OpenDB(g)
	t.Cleanup(func() { _ = db.Close() })
	return db, g
}

type gatedConnector struct {
	driver.Connector
	gate    chan struct{}
	commits *atomic.Int64
	armed   *atomic.Bool // nil: every COMMIT waits for gate
	ended   atomic.Int64 // COMMITs that returned
}

func (g *gatedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := g.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, g: g}, nil
}

// gatedConn forwards everything database/sql uses to the driver's
// connection; only its transactions' Commit waits for the gate.
type gatedConn struct {
	driver.Conn
	g     *gatedConnector
	wrote bool // its transaction ran an Exec; database/sql uses a conn in one goroutine at a time
}

func (c *gatedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.wrote = false
	return &gatedTx{Tx: tx, c: c}, nil
}

func (c *gatedConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.wrote = true
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *gatedConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *gatedConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (c *gatedConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *gatedConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

type gatedTx struct {
	driver.Tx
	c *gatedConn
}

func (t *gatedTx) Commit() error {
	g := t.c.g
	if g.armed == nil || t.c.wrote && g.armed.CompareAndSwap(true, false) {
		<-g.gate
	}
	g.commits.Add(1)
	defer g.ended.Add(1)
	return t.Tx.Commit()
}

// TestSerializableHandsOnBeforeCommit: a DoTx of a Locker with
// WithSerializableHandoff (at SERIALIZABLE, or at the default level, which
// it runs at SERIALIZABLE) whose COMMIT is held back hands the lock to the
// next DoTx of its Locker on the same database as soon as its fn returns.
// That one's fn starts before the first COMMIT is sent; its read of the row
// the first wrote waits inside the server and, once the COMMIT is let go,
// returns the committed value. Without the option, at any level
// SERIALIZABLE included, the next fn does not start until the COMMIT is
// sent. Fails on a DoTx that releases only after its COMMIT (B never starts
// while the gate is closed), on an early handoff that lets B read before
// A's COMMIT (B reads 0), and on an isolation level that switches the
// handoff on by itself.
func TestSerializableHandsOnBeforeCommit(t *testing.T) {
	leakCheck(t)
	srv := requireSerialLocks(t)
	for _, tc := range []struct {
		name      string
		handoff   bool // WithSerializableHandoff
		isolation sql.IsolationLevel
		early     bool
	}{
		{"handoff/serializable", true, sql.LevelSerializable, true},
		{"handoff/default", true, sql.LevelDefault, true},
		{"plain/serializable", false, sql.LevelSerializable, false},
		{"plain/repeatable-read", false, sql.LevelRepeatableRead, false},
		{"plain/default", false, sql.LevelDefault, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, gate, commits := gatedDB(t, srv.DSN)
			dbx := sqlx.NewDb(db, "mysql")
			ctx := testCtx(t, time.Minute)
			table := counterTable(t, sqlx.NewDb(testdb.OpenDB(t, srv.DSN), "mysql"), 1)
			// A turn long enough for the held-back COMMIT: the lock is
			// handed on, early or after the COMMIT, not given back.
			opts := []namedlock.Option{namedlock.WithHandoff(namedlock.DefaultMaxHandoffs, time.Minute)}
			if tc.handoff {
				opts = append(opts, namedlock.WithSerializableHandoff())
			}
			l := newInstance(t, srv.DSN, opts...).locker
			key := keyfmt.Key(table, 1)
			txOpts := &sql.TxOptions{Isolation: tc.isolation}

			aWrote := make(chan struct{})
			bStarted := make(chan struct{})
			var bRead atomic.Int64
			bRead.Store(-1)
			var wg sync.WaitGroup
			var aErr, bErr error
			wg.Go(func() {
				aErr = l.DoTx(ctx, key, db, txOpts, func(ctx context.Context, tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1"); err != nil {
						return err
					}
					close(aWrote)
					waitQueued(t, l, 1) // B waits for the lock before A's fn returns
					return nil
				})
			})
			<-aWrote
			wg.Go(func() {
				bErr = l.DoTx(ctx, key, dbx.DB, txOpts, func(ctx context.Context, tx *sql.Tx) error {
					close(bStarted)
					var v int64
					if err := tx.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil {
						return err
					}
					bRead.Store(v)
					return nil
				})
			})
			started := false
			select {
			case <-bStarted:
				started = true
			case <-time.After(2 * time.Second):
			}
			if started != tc.early {
				t.Errorf("the next DoTx's fn started before the first COMMIT was sent: %v, want %v", started, tc.early)
			}
			if tc.early {
				// B's read waits inside the server for A's row lock.
				time.Sleep(200 * time.Millisecond)
				if v := bRead.Load(); v != -1 {
					t.Errorf("the next DoTx read %d before the first COMMIT was sent", v)
				}
			}
			if n := commits.Load(); n != 0 {
				t.Errorf("%d COMMITs sent with the gate closed", n)
			}
			close(gate)
			wg.Wait()
			if aErr != nil || bErr != nil {
				t.Fatalf("DoTx: first %v, next %v", aErr, bErr)
			}
			if v := bRead.Load(); v != 1 {
				t.Errorf("the next DoTx read %d, want 1: the first one's committed write", v)
			}
			if s := l.Stats(); s.Handoffs != 1 {
				t.Errorf("Stats.Handoffs = %d, want 1", s.Handoffs)
			}
		})
	}
}

// waitQueued waits until n callers of l wait for a lock.
func waitQueued(t testing.TB, l *namedlock.Locker, n int) {
	t.Helper()
	// contract: the callers the test started queue; the 10 s only ends a
	// wait for callers that never do.
	deadline := time.Now().Add(10 * time.Second)
	for l.Stats().Waiting < n {
		if time.Now().After(deadline) {
			t.Errorf("%d callers waiting after 10 s, want %d", l.Stats().Waiting, n)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSerializableLostUpdates: 16 goroutines of one Locker increment one
// counter through DoTx at SERIALIZABLE, reading it with a plain SELECT and
// writing it back plus one: the counter ends at the number of DoTx that
// returned nil, and most locks were handed on without the server.
func TestSerializableLostUpdates(t *testing.T) {
	leakCheck(t)
	c := newSerialCounter(t, 2*time.Minute)
	ctx, app, table, l, key, opts := c.ctx, c.app, c.table, c.l, c.key, c.opts
	appx := sqlx.NewDb(app, "mysql")
	const workers, each = 16, 25
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				err := l.DoTx(ctx, key, appx.DB, opts, func(ctx context.Context, tx *sql.Tx) error {
					var v int64
					if err := tx.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = ? WHERE id = 1", v+1)
					return err
				})
				if err != nil {
					t.Errorf("DoTx: %v", err)
					return
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	var v int64
	if err := app.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	s := l.Stats()
	t.Logf("%d DoTx returned nil, counter %d, %d handoffs, %d server acquisitions", ok.Load(), v, s.Handoffs, s.ServerAcquisitions)
	if v != ok.Load() || v != workers*each {
		t.Errorf("counter %d, %d DoTx returned nil, want both %d: lost updates", v, ok.Load(), workers*each)
	}
	if s.Handoffs == 0 {
		t.Error("no handoff: the lock went back to the server every time")
	}
}

// TestSerializableMisuse: a DoTx of a Locker with WithSerializableHandoff
// with an empty key, a nil fn, the lock pool as db, or an isolation level
// other than the default and SERIALIZABLE is refused before anything is
// begun; WithSerializableHandoff with WithFencing is refused by New.
func TestSerializableMisuse(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	ctx := testCtx(t, 30*time.Second)
	db, _, commits := gatedDB(t, srv.DSN)
	in := newInstance(t, srv.DSN, namedlock.WithSerializableHandoff())
	opts := &sql.TxOptions{Isolation: sql.LevelSerializable}
	fn := func(context.Context, *sql.Tx) error { return nil }
	for name, err := range map[string]error{
		"empty key":        in.locker.DoTx(ctx, "", db, opts, fn),
		"nil fn":           in.locker.DoTx(ctx, "k", db, opts, nil),
		"lock pool":        in.locker.DoTx(ctx, "k", in.db, opts, fn),
		"read committed":   in.locker.DoTx(ctx, "k", db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, fn),
		"repeatable read":  in.locker.DoTx(ctx, "k", db, &sql.TxOptions{Isolation: sql.LevelRepeatableRead}, fn),
		"read uncommitted": in.locker.DoTx(ctx, "k", db, &sql.TxOptions{Isolation: sql.LevelReadUncommitted}, fn),
	} {
		if !errors.Is(err, namedlock.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if s := db.Stats(); s.OpenConnections != 0 || commits.Load() != 0 {
		t.Errorf("the business pool was used: %d connections open", s.OpenConnections)
	}
	if s := in.locker.Stats(); s.Acquired != 0 || s.NotAcquired != 0 {
		t.Errorf("Stats moved: %+v", s)
	}
	for _, opts := range [][]namedlock.Option{
		{namedlock.WithSerializableHandoff(), namedlock.WithFencing(db, "fence")},
		{namedlock.WithFencing(db, "fence"), namedlock.WithSerializableHandoff()},
	} {
		if l, err := namedlock.New(in.db, opts...); !errors.Is(err, namedlock.ErrInvalidOption) {
			if l != nil {
				_ = l.Close()
			}
			t.Errorf("New(WithFencing, WithSerializableHandoff) = %v, want ErrInvalidOption", err)
		}
	}
}

// TestSerializablePanicsAndCancels: a DoTx at SERIALIZABLE whose fn panics
// rolls back, releases and lets the panic go on; one whose ctx is already
// cancelled (before it could begin, or while it waits behind a holder)
// returns ErrNotAcquired with ctx.Err() and leaves no transaction or
// connection behind.
func TestSerializablePanicsAndCancels(t *testing.T) {
	leakCheck(t)
	c := newSerialCounter(t, time.Minute)
	ctx, app, table, l, key, opts := c.ctx, c.app, c.table, c.l, c.key, c.opts

	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the panic of fn", r)
			}
		}()
		_ = l.DoTx(ctx, key, app, opts, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = 7 WHERE id = 1"); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	var v int64
	if err := app.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil || v != 0 {
		t.Errorf("after the panic: v = %d (%v), want 0: rolled back", v, err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	err := l.DoTx(cancelled, key, app, opts, func(context.Context, *sql.Tx) error { return nil })
	if !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before: %v, want ErrNotAcquired and context.Canceled", err)
	}

	// A holder at another level keeps the lock; a serializable DoTx waits
	// behind it, its transaction begun, until its ctx ends.
	held, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer wcancel()
	err = l.DoTx(wctx, key, app, opts, func(context.Context, *sql.Tx) error { return nil })
	if !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled while waiting: %v, want ErrNotAcquired and context.DeadlineExceeded", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// database/sql rolls back a transaction whose ctx ended in a goroutine of
	// its own and gives the connection back when that ROLLBACK has returned:
	// a moment after DoTx returned, not before.
	if _, ok := faultPoll(5*time.Second, func() bool { return app.Stats().InUse == 0 }); !ok {
		t.Errorf("%d connections of the business pool still in use 5 s later", app.Stats().InUse)
	}
	if err := l.DoTx(ctx, key, app, opts, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
		return err
	}); err != nil {
		t.Errorf("after all that: %v", err)
	}
}

// TestSerializableWaitersHoldOneConnection: behind a holder, 8 DoTx at
// SERIALIZABLE wait for one key; only the first in line has begun its
// transaction, so the business pool has one connection in use. Once the
// holder lets go, all 8 commit.
func TestSerializableWaitersHoldOneConnection(t *testing.T) {
	leakCheck(t)
	c := newSerialCounter(t, time.Minute)
	ctx, app, table, l, key, opts := c.ctx, c.app, c.table, c.l, c.key, c.opts
	held, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 8
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for range waiters {
		wg.Go(func() {
			errs <- l.DoTx(ctx, key, app, opts, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
				return err
			})
		})
	}
	waitQueued(t, l, waiters)
	// The first in line begins as it becomes first: give it a moment.
	deadline := time.Now().Add(5 * time.Second)
	for app.Stats().InUse < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // time for others to begin, if they would
	if n := app.Stats().InUse; n != 1 {
		t.Errorf("%d connections of the business pool in use with %d DoTx waiting, want 1 (the first in line's)", n, waiters)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("DoTx: %v", err)
		}
	}
	var v int64
	if err := app.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil || v != waiters {
		t.Errorf("v = %d (%v), want %d", v, err, waiters)
	}
}
