package namedlock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// The result of DoTx means one thing in every mode: nil exactly when the
// transaction committed, an error matching ErrCommitUnknown when its COMMIT
// was sent and no answer came back, any other error only when nothing was
// committed (a caller that retries on such an error never applies a
// transaction twice).

// txMode is one way DoTx hands its lock on.
type txMode struct {
	name string
	opts func(t *testing.T, app *sql.DB) []namedlock.Option // the Locker's options for the mode
}

var txModes = []txMode{
	{"plain", func(*testing.T, *sql.DB) []namedlock.Option { return nil }},
	{"fenced", func(t *testing.T, app *sql.DB) []namedlock.Option {
		return []namedlock.Option{namedlock.WithFencing(app, fenceTable(t, app))}
	}},
	{"serializable-handoff", func(*testing.T, *sql.DB) []namedlock.Option {
		return []namedlock.Option{namedlock.WithSerializableHandoff()}
	}},
}

// skipUnsupportedMode skips t where mode cannot run on srv: the
// serializable handoff needs serializable reads that lock.
func skipUnsupportedMode(t *testing.T, srv *testdb.Server, mode txMode) {
	t.Helper()
	if mode.name == "serializable-handoff" && !serialLocksReads(t, srv) {
		t.Skipf("%s: serializable reads do not lock there; DoTx refuses WithSerializableHandoff", srv.Name)
	}
}

// checkResult fails t unless DoTx's err and whether its row is in the
// history table agree: nil ⇔ committed, an error other than
// ErrCommitUnknown ⇒ not committed.
func checkResult(t testing.TB, what string, err error, committed bool) {
	t.Helper()
	switch {
	case err == nil && !committed:
		t.Errorf("%s: DoTx returned nil, but its row is not in the history table", what)
	case err != nil && committed && !errors.Is(err, namedlock.ErrCommitUnknown):
		t.Errorf("%s: DoTx returned %v, but its row is in the history table: a caller retrying on this error applies the transaction twice", what, err)
	}
}

// historyTable creates a table of committed calls on db, dropped at the
// end of the test, and returns its name.
func historyTable(t testing.TB, db *sql.DB) string {
	t.Helper()
	name := tableName(t) + "_h"
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+name+" (id BIGINT AUTO_INCREMENT PRIMARY KEY, sec VARCHAR(64) NOT NULL UNIQUE, token BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB"); err != nil {
		t.Fatalf("create history table: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name)
	})
	return name
}

// inHistory reports whether sec's row is in table, read on db.
func inHistory(t testing.TB, db *sql.DB, table, sec string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE sec = ?", sec).Scan(&n); err != nil {
		t.Fatalf("read the history table: %v", err)
	}
	return n == 1
}

// commitHook stands in for a transaction's COMMIT on a hookConn: commit
// sends the real one.
type commitHook func(c *hookConn, commit func() error) error

// hookDB opens a pool on dsn whose transactions' Commit runs the hook in
// *hook when one is set (and the real COMMIT otherwise).
func hookDB(t testing.TB, dsn string) (*sql.DB, *atomic.Pointer[commitHook]) {
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
	hc := &hookConnector{Connector: inner}
	db := sql.OpenDB(hc)
	t.Cleanup(func() { _ = db.Close() })
	return db, &hc.hook
}

type hookConnector struct {
	driver.Connector
	hook atomic.Pointer[commitHook]
}

func (h *hookConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := h.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &hookConn{Conn: c, h: h}, nil
}

// hookConn forwards what database/sql uses to the driver's connection; its
// transactions' Commit runs the connector's hook. Once broken (breakConn)
// database/sql discards it.
type hookConn struct {
	driver.Conn
	h      *hookConnector
	broken atomic.Bool
}

func (c *hookConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &hookTx{Tx: tx, c: c}, nil
}

func (c *hookConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *hookConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *hookConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (c *hookConn) ResetSession(ctx context.Context) error {
	if c.broken.Load() {
		return driver.ErrBadConn
	}
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *hookConn) IsValid() bool {
	return !c.broken.Load() && c.Conn.(driver.Validator).IsValid()
}

// breakConn closes the connection under database/sql, as a network
// failure would: the server ends the session, rolling back what it has not
// committed.
func (c *hookConn) breakConn() {
	c.broken.Store(true)
	_ = c.Conn.Close()
}

// sessionID returns the connection's server session id.
func (c *hookConn) sessionID() (int64, error) {
	rows, err := c.Conn.(driver.QueryerContext).QueryContext(context.Background(), "SELECT CONNECTION_ID()", nil)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	if err := rows.Next(dest); err != nil {
		return 0, err
	}
	switch v := dest[0].(type) {
	case int64:
		return v, nil
	case []byte:
		return strconv.ParseInt(string(v), 10, 64)
	}
	return 0, fmt.Errorf("CONNECTION_ID() = %T", dest[0])
}

type hookTx struct {
	driver.Tx
	c *hookConn
}

func (t *hookTx) Commit() error {
	if h := t.c.h.hook.Load(); h != nil {
		return (*h)(t.c, t.Tx.Commit)
	}
	return t.Tx.Commit()
}

// txFault is a fault injected into one DoTx.
type txFault struct {
	name string
	// fn, if set, runs in DoTx's fn after its INSERT, on fn's ctx; f is the
	// case's fixture.
	fn func(ctx context.Context, f *txFixture) error
	// commit, if set, stands in for the COMMIT.
	commit commitHook
	// want: nil, or a sentinel DoTx's error must match, per mode (absent:
	// any result, as long as it agrees with the history table).
	want map[string]error
	// lostCommit: the loss is found after a COMMIT that succeeded
	// (Stats.LostCommits counts it).
	lostCommit bool
}

// txFixture is what a fault reaches: the server, the lock's name, the
// other instance that takes the lock over.
type txFixture struct {
	t     *testing.T
	adm   *sql.DB
	name  string // the lock's server name
	key   string
	other *namedlock.Locker
	// otherGot is closed once other holds the key (zombie case), with its
	// error in otherErr; release lets it go.
	otherGot chan struct{}
	otherErr error
	release  chan struct{}
	wg       sync.WaitGroup
}

// killHolder KILLs the session holding the lock at the server and waits
// until the server has let the lock go.
func (f *txFixture) killHolder() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := faultHolder(ctx, f.adm, f.name)
	if err != nil || id == 0 {
		return fmt.Errorf("the lock has no holder at the server (%d, %v)", id, err)
	}
	if err := faultKill(ctx, f.adm, id); err != nil {
		return err
	}
	for {
		if h, err := faultHolder(ctx, f.adm, f.name); err != nil || h != id {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("session %d still holds the lock 10 s after its KILL", id)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitLossSeen waits until fn's ctx is cancelled: the Locker found the
// loss.
func waitLossSeen(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("fn's ctx not cancelled 10 s after the lock's KILL")
	}
}

// txFaults are the faults of TestDoTxResultMeansCommitted.
var txFaults = []txFault{
	{name: "none", want: map[string]error{"plain": nil, "fenced": nil, "serializable-handoff": nil}},
	{
		// The loss is found before the COMMIT: rolled back, unless the
		// fence keeps the transaction safe.
		name: "lock killed before commit",
		fn: func(ctx context.Context, f *txFixture) error {
			if err := f.killHolder(); err != nil {
				return err
			}
			return waitLossSeen(ctx)
		},
		want: map[string]error{"plain": namedlock.ErrLockLost, "fenced": nil, "serializable-handoff": namedlock.ErrLockLost},
	},
	{
		// The lock's session is KILLed while the COMMIT is on its way
		// (held back until the server freed the lock).
		name: "lock killed during commit",
		commit: func(c *hookConn, commit func() error) error {
			if err := c.h.fixture().killHolder(); err != nil {
				return err
			}
			return commit()
		},
		want:       map[string]error{"plain": nil, "fenced": nil, "serializable-handoff": nil},
		lostCommit: true,
	},
	{
		name: "lock killed after commit",
		commit: func(c *hookConn, commit func() error) error {
			err := commit()
			if kerr := c.h.fixture().killHolder(); kerr != nil {
				return errors.Join(err, kerr)
			}
			return err
		},
		want:       map[string]error{"plain": nil, "fenced": nil, "serializable-handoff": nil},
		lostCommit: true,
	},
	{
		// The COMMIT is applied, and its answer never comes back.
		name: "commit reply lost",
		commit: func(c *hookConn, commit func() error) error {
			if err := commit(); err != nil {
				return err
			}
			c.breakConn()
			return mysql.ErrInvalidConn
		},
		want: map[string]error{"plain": namedlock.ErrCommitUnknown, "fenced": namedlock.ErrCommitUnknown, "serializable-handoff": namedlock.ErrCommitUnknown},
	},
	{
		// The connection breaks as the COMMIT is written: the server
		// rolls back, and the client cannot tell.
		name: "commit lost on the way",
		commit: func(c *hookConn, _ func() error) error {
			c.breakConn()
			return mysql.ErrInvalidConn
		},
		want: map[string]error{"plain": namedlock.ErrCommitUnknown, "fenced": namedlock.ErrCommitUnknown, "serializable-handoff": namedlock.ErrCommitUnknown},
	},
	{
		// The application's session is KILLed as its COMMIT is sent:
		// the result is whatever the driver saw, as long as it agrees
		// with the history table.
		name: "app session killed at commit",
		commit: func(c *hookConn, commit func() error) error {
			id, err := c.sessionID()
			if err != nil {
				return err
			}
			f := c.h.fixture()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := faultKill(ctx, f.adm, id); err != nil {
				return err
			}
			return commit()
		},
	},
	{
		// A zombie: the lock is lost and taken by another instance
		// while fn runs; fn goes on, ignoring its ctx. The fence keeps
		// the transaction safe; without it, the transaction commits
		// (nil) unless the loss was found before the COMMIT.
		name: "zombie holder",
		fn: func(ctx context.Context, f *txFixture) error {
			if err := f.killHolder(); err != nil {
				return err
			}
			f.wg.Go(func() {
				k, err := f.other.Acquire(context.Background(), f.key)
				f.otherErr = err
				close(f.otherGot)
				if err == nil {
					<-f.release
					_ = k.Release(context.Background())
				}
			})
			// The other instance holds the lock at the server (with
			// fencing, its mint then waits for this transaction).
			deadline := time.Now().Add(10 * time.Second)
			for {
				id, err := faultHolder(context.Background(), f.adm, f.name)
				if err != nil {
					return err
				}
				if id != 0 {
					return nil
				}
				if time.Now().After(deadline) {
					return errors.New("the other instance did not take the lock within 10 s")
				}
				time.Sleep(5 * time.Millisecond)
			}
		},
		want: map[string]error{"fenced": nil},
	},
}

// fixture returns the fixture of the case running on h's pool.
func (h *hookConnector) fixture() *txFixture { return currentFixture.Load() }

// currentFixture is the fixture of the running case of
// TestDoTxResultMeansCommitted (its subtests run one at a time).
var currentFixture atomic.Pointer[txFixture]

// TestDoTxResultMeansCommitted: for every DoTx mode (plain, fenced,
// serializable handoff) × fault (none; the lock's session KILLed before,
// during and after the COMMIT; the COMMIT's answer lost, the COMMIT lost on
// its way, the application's session KILLed at the COMMIT; a zombie holder
// whose lock was lost and taken by another instance while fn ran), one
// DoTx inserts its row into a history table: DoTx returns nil exactly when
// the row is there, and an error other than ErrCommitUnknown only when it
// is not. Each fault's expected result per mode is checked too: a loss
// found before the COMMIT rolls back (unless fenced), one found during or
// after a COMMIT that succeeded returns nil and counts in
// Stats.LostCommits (and the observer hears of it), a COMMIT without an
// answer returns ErrCommitUnknown.
func TestDoTxResultMeansCommitted(t *testing.T) {
	srv := testdb.RequireReal(t)
	requireKillEndsWaits(t)
	for _, mode := range txModes {
		t.Run(mode.name, func(t *testing.T) {
			skipUnsupportedMode(t, srv, mode)
			for _, fault := range txFaults {
				t.Run(fault.name, func(t *testing.T) {
					leakCheck(t)
					runTxFault(t, srv, mode, fault)
				})
			}
		})
	}
}

// runTxFault runs one case of TestDoTxResultMeansCommitted.
func runTxFault(t *testing.T, srv *testdb.Server, mode txMode, fault txFault) {
	app, hook := hookDB(t, srv.DSN)
	adm := faultAdmin(t, srv.DSN)
	hist := historyTable(t, adm)
	modeOpts := mode.opts(t, app)
	var lostEvents atomic.Int64
	opts := append([]namedlock.Option{
		namedlock.WithKeepAlive(100 * time.Millisecond), namedlock.WithCheckTimeout(time.Second),
		namedlock.WithObserver(func(e namedlock.Event) {
			if (e.Outcome == namedlock.Lost || e.Outcome == namedlock.Released) && errors.Is(e.Err, namedlock.ErrLockLost) {
				lostEvents.Add(1)
			}
		}),
	}, modeOpts...)
	l := newInstance(t, srv.DSN, opts...).locker
	otherOpts := modeOpts
	if mode.name == "serializable-handoff" {
		otherOpts = nil
	}
	f := &txFixture{t: t, adm: adm, other: newInstance(t, srv.DSN, otherOpts...).locker, otherGot: make(chan struct{}), release: make(chan struct{})}
	f.key = uniqueKey(t, "tx")
	f.name = keyfmt.Portable(f.key)
	currentFixture.Store(f)
	defer currentFixture.Store(nil)
	if fault.commit != nil {
		h := fault.commit
		hook.Store(&h)
	}
	ctx := testCtx(t, time.Minute)
	sec := mode.name + "/" + fault.name
	err := l.DoTx(ctx, f.key, app, nil, func(fctx context.Context, tx *sql.Tx) error {
		tok, _ := namedlock.TokenFromContext(fctx, f.key)
		// The zombie's statements ignore fn's ctx.
		if _, err := tx.ExecContext(context.WithoutCancel(fctx), "INSERT INTO "+hist+" (sec, token) VALUES (?, ?)", sec, tok); err != nil {
			return err
		}
		if fault.fn != nil {
			if err := fault.fn(fctx, f); err != nil {
				return fmt.Errorf("the fault: %w", err)
			}
		}
		return nil
	})
	hook.Store(nil)
	committed := inHistory(t, adm, hist, sec)
	t.Logf("%s: DoTx = %v; committed: %v", srv.Name, err, committed)
	checkResult(t, sec, err, committed)
	if want, ok := fault.want[mode.name]; ok {
		switch {
		case want == nil && err != nil:
			t.Errorf("DoTx = %v, want nil", err)
		case want != nil && !errors.Is(err, want):
			t.Errorf("DoTx = %v, want an error matching %v", err, want)
		}
	}
	if fault.name == "zombie holder" {
		select {
		case <-f.otherGot:
			if f.otherErr != nil {
				t.Errorf("the other instance's Acquire: %v", f.otherErr)
			}
		// contract: the zombie's lock is free for another instance once DoTx
		// has returned; 10 s only ends a wait that never does.
		case <-time.After(10 * time.Second):
			t.Error("the other instance did not get the lock within 10 s of DoTx's return")
		}
		close(f.release)
		f.wg.Wait()
	}
	st := l.Stats()
	if fault.lostCommit {
		if st.LostCommits != 1 {
			t.Errorf("Stats.LostCommits = %d, want 1: the transaction committed and its lock was found lost", st.LostCommits)
		}
		if lostEvents.Load() == 0 {
			t.Error("the observer was not told of the loss")
		}
	} else if err != nil && st.LostCommits != 0 {
		t.Errorf("Stats.LostCommits = %d after a DoTx that did not commit", st.LostCommits)
	}
	if st.Held != 0 || st.Waiting != 0 {
		t.Errorf("Stats = %+v, want nothing held or waiting", st)
	}
}
