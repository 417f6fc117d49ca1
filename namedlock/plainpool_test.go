package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// TestPlainPool: a Locker also works on a *sql.DB that did not come from
// pool.Open (no control connector: cancelled waits are killed through the
// pool itself; the lease is set on the connection).
func TestPlainPool(t *testing.T) {
	testdb.RequireReal(t)
	leakCheck(t)
	db, err := sql.Open("mysql", testdb.Get(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(4)
	l, err := namedlock.New(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	srv := testdb.Get(t)
	if srv.Flavor.NeedsInterpolation() {
		testPlainPoolRefused(t, l, srv)
		return
	}
	other := newInstance(t, "")
	adm := admin(t)
	key := uniqueKey(t, "k")
	ctx := testCtx(t, 20*time.Second)

	if err := l.Do(ctx, key, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do: %v", err)
	}
	var lease int
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRowContext(ctx, "SELECT @@session.wait_timeout").Scan(&lease); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if want := int(pool.DefaultLease / time.Second); lease != want {
		t.Errorf("lock connection wait_timeout = %d, want pool.DefaultLease, %d", lease, want)
	}

	held := mustAcquire(t, other.locker, key)
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan struct{})
	go func() {
		// Cancelled whatever happens, so that a wait never seen fails the
		// test here instead of running to ctx's end.
		defer close(waited)
		defer cancel()
		eventually(t, 5*time.Second, "never waited at the server", func() bool { return preparedWaits(t, adm, srv, held.Name()) > 0 })
		time.Sleep(50 * time.Millisecond)
	}()
	if _, err := l.Acquire(wctx, key); !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Acquire = %v", err)
	}
	<-waited
	if st := l.Stats(); st.CancelledWaits != 1 {
		t.Errorf("Stats = %+v, want 1 cancelled wait", st)
	}
	// The wait is killed (through the pool itself) at once; left alone, the
	// server would notice the closed socket only at its next 1 s poll.
	eventually(t, 600*time.Millisecond, "the cancelled wait is still at the server", func() bool {
		return preparedWaits(t, adm, srv, held.Name()) == 0
	})
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if id := holderOf(t, adm, held.Name()); id != 0 {
		t.Errorf("released lock granted to session %d: the cancelled wait was not ended", id)
	}
	wantInUse(t, db, 0)
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// testPlainPoolRefused: on a server where prepared GET_LOCK statements
// miscount the lock's references (TiDB), a plain pool l without
// interpolateParams is refused at its first acquisition, before any
// GET_LOCK, with ErrNeedsInterpolation (and ErrNotAcquired); the same pool
// with interpolateParams=true in its DSN takes and releases locks.
func testPlainPoolRefused(t *testing.T, l *namedlock.Locker, srv *testdb.Server) {
	ctx := testCtx(t, 20*time.Second)
	key := uniqueKey(t, "k")
	err := l.Do(ctx, key, func(context.Context) error { t.Error("fn ran"); return nil })
	t.Logf("%s, plain pool without interpolateParams: %v", srv.Name, err)
	if !errors.Is(err, namedlock.ErrNeedsInterpolation) || !errors.Is(err, namedlock.ErrNotAcquired) {
		t.Fatalf("Do = %v, want ErrNeedsInterpolation and ErrNotAcquired", err)
	}
	if id := holderOf(t, admin(t), key); id != 0 {
		t.Errorf("IS_USED_LOCK = %d after the refusal, want 0 or NULL: a GET_LOCK was sent", id)
	}
	cfg, err := mysql.ParseDSN(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	li, err := namedlock.New(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = li.Close() })
	for i := range 3 {
		if err := li.Do(ctx, key, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Do #%d on the interpolating plain pool: %v", i+1, err)
		}
	}
}

// preparedWaits counts server sessions waiting for the lock name in a
// GET_LOCK sent as a server-side prepared statement (a pool without
// interpolateParams; only such pools send it). Both servers list such a
// session with the command "Execute"; its statement (INFO) differs:
// MariaDB shows the statement as prepared, "SELECT GET_LOCK(?, ?)", and
// MySQL with the arguments in it, "SELECT GET_LOCK('name', 31536000)".
func preparedWaits(t testing.TB, db *sql.DB, srv *testdb.Server, name string) int {
	t.Helper()
	n := 0
	for _, s := range sessions(t, db) {
		if s.command != "Execute" || !flavor.IsLockWait(s.state, s.info) {
			continue
		}
		switch {
		case srv.Flavor == flavor.MariaDB && s.info == "SELECT GET_LOCK(?, ?)":
			n++
		case srv.Flavor == flavor.MySQL && strings.HasPrefix(s.info, "SELECT GET_LOCK('"+name+"', "):
			n++
		}
	}
	return n
}
