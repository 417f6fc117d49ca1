package namedlock_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"go.uber.org/goleak"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// instance is one simulated application instance: its own lock pool and
// Locker, as a separate process would have.
type instance struct {
	db     *sql.DB
	locker *namedlock.Locker
}

// leakCheck fails t if goroutines started during the test outlive it. Use
// it only in tests that do not call t.Parallel.
func leakCheck(t *testing.T) {
	t.Helper()
	opts := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opts) })
}

// openPool opens a dedicated lock pool on dsn, closed at the end of the test.
func openPool(t testing.TB, dsn string, opts ...pool.Option) *sql.DB {
	t.Helper()
	db, err := pool.Open(dsn, opts...)
	if err != nil {
		t.Fatalf("pool.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newInstance opens a lock pool and a Locker on the test server (or dsn if
// given), both closed at the end of the test (the Locker first). The
// Locker records its holders for holderOf (namedlock.RecordHolders), as
// every Locker the helpers make does.
func newInstance(t testing.TB, dsn string, opts ...namedlock.Option) *instance {
	t.Helper()
	if dsn == "" {
		dsn = testdb.Get(t).DSN
	}
	db := openPool(t, dsn)
	l, err := namedlock.New(db, namedlock.RecordHolders(t, opts...)...)
	if err != nil {
		t.Fatalf("namedlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &instance{db: db, locker: l}
}

// mustNew returns namedlock.New(db, opts...), recording its holders for
// holderOf (namedlock.RecordHolders), failing the test on an error. The
// caller closes the Locker.
func mustNew(t testing.TB, db *sql.DB, opts ...namedlock.Option) *namedlock.Locker {
	t.Helper()
	l, err := namedlock.New(db, namedlock.RecordHolders(t, opts...)...)
	if err != nil {
		t.Fatalf("namedlock.New: %v", err)
	}
	return l
}

// primary opens the application's primary pool (sqlx), closed at the end of
// the test.
func primary(t testing.TB) *sqlx.DB {
	t.Helper()
	db := sqlx.NewDb(testdb.OpenDB(t, testdb.Get(t).DSN), "mysql")
	return db
}

// holderOf returns the connection id holding name on the server, or 0.
func holderOf(t testing.TB, db *sql.DB, name string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, err := testdb.HolderOf(ctx, db, name)
	if err != nil {
		t.Fatalf("IS_USED_LOCK(%q): %v", name, err)
	}
	return id
}

// noHolderWithin reports the session holding name on db after waiting up
// to d for none to: the server ends a KILLed session, and frees its locks,
// a moment after the KILL returns. 0 means free.
func noHolderWithin(t testing.TB, db *sql.DB, name string, d time.Duration) int64 {
	t.Helper()
	// contract: the caller's; d only ends a wait for a lock never freed.
	deadline := time.Now().Add(d)
	for {
		id := holderOf(t, db, name)
		if id == 0 || time.Now().After(deadline) {
			return id
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newInstanceWithPool is newInstance with options for the lock pool.
func newInstanceWithPool(t testing.TB, poolOpts []pool.Option, opts ...namedlock.Option) *instance {
	t.Helper()
	db := openPool(t, testdb.Get(t).DSN, poolOpts...)
	l, err := namedlock.New(db, namedlock.RecordHolders(t, opts...)...)
	if err != nil {
		t.Fatalf("namedlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &instance{db: db, locker: l}
}

// uniqueKey returns a lock key that no other test (or test process) uses.
func uniqueKey(t testing.TB, suffix string) string {
	t.Helper()
	return testdb.UniqueName(t) + ":" + suffix
}

// admin opens a plain pool on the test server for inspecting it (IS_USED_LOCK,
// the process list, KILL), closed at the end of the test.
func admin(t testing.TB) *sql.DB {
	t.Helper()
	return testdb.OpenDB(t, testdb.Get(t).DSN)
}

// testCtx returns a context bounded by d, cancelled at the end of the test.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustAcquire acquires key on l within 10 s and fails the test otherwise.
// The lock is released at the end of the test if still held.
func mustAcquire(t testing.TB, l *namedlock.Locker, key string) *namedlock.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	t.Cleanup(func() { _ = k.Release(context.Background()) })
	return k
}

// eventually polls cond every 10 ms until it is true or d has passed, and
// fails the test with what in the latter case.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	// contract: the caller's (what); d is a generous bound on something
	// that must happen, and only ends a wait for what never comes.
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitingAtServer reports whether some server session is waiting in
// GET_LOCK for name (flavor.IsLockWait: MariaDB's and MySQL's state "User
// lock", TiDB a running GET_LOCK statement).
func waitingAtServer(t testing.TB, db *sql.DB, name string) bool {
	t.Helper()
	for _, s := range sessions(t, db) {
		if flavor.IsLockWait(s.state, s.info) && strings.Contains(s.info, name) {
			return true
		}
	}
	return false
}

// sessions returns the server's process list, failing t on error.
func sessions(t testing.TB, db *sql.DB) []serverSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := processList(ctx, db)
	if err != nil {
		t.Fatalf("SHOW FULL PROCESSLIST: %v", err)
	}
	return list
}

// serverSession is one row of the server's process list.
type serverSession struct {
	id      int64
	command string // COMMAND: "Query", or "Execute" for a prepared statement
	state   string
	info    string
	idle    int64 // TIME: seconds in the current state
}

// processList reads the process list with SHOW FULL PROCESSLIST, which
// the server answers from its thread list directly. (A SELECT on
// information_schema.PROCESSLIST materialises a temporary Aria table for its
// LONGTEXT INFO column; the shared MariaDB 10.11.19 crashed once here in
// ha_maria::drop_table freeing one, while sessions were being killed.)
func processList(ctx context.Context, db *sql.DB) ([]serverSession, error) {
	rows, err := db.QueryContext(ctx, "SHOW FULL PROCESSLIST")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	idx := map[string]int{}
	for i, c := range cols {
		idx[strings.ToLower(c)] = i
	}
	for _, c := range []string{"id", "command", "state", "info", "time"} {
		if _, ok := idx[c]; !ok {
			return nil, fmt.Errorf("SHOW FULL PROCESSLIST has no column %q (columns %v)", c, cols)
		}
	}
	var out []serverSession
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		id, err := strconv.ParseInt(string(vals[idx["id"]]), 10, 64)
		if err != nil {
			return nil, err
		}
		idle, _ := strconv.ParseInt(string(vals[idx["time"]]), 10, 64)
		out = append(out, serverSession{id: id, command: string(vals[idx["command"]]), state: string(vals[idx["state"]]), info: string(vals[idx["info"]]), idle: idle})
	}
	return out, rows.Err()
}

// killSession kills server session id (KILL CONNECTION).
func killSession(t testing.TB, db *sql.DB, id int64) {
	t.Helper()
	if _, err := db.Exec(fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
		t.Fatalf("KILL CONNECTION %d: %v", id, err)
	}
}

// wantInUse fails the test unless db has exactly n connections in use.
func wantInUse(t testing.TB, db *sql.DB, n int) {
	t.Helper()
	if got := db.Stats().InUse; got != n {
		t.Errorf("lock pool: %d connections in use, want %d", got, n)
	}
}

// returnsWithin runs fn and fails the test if it has not returned within d
// (fn then keeps running in the background).
func returnsWithin(t testing.TB, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	// contract: the caller's (what); d is a generous bound on a call that
	// must return, and only ends a wait for one that hangs.
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// tableName returns a table name unique to the test, usable unquoted.
func tableName(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("nl_")
	for _, r := range strings.ToLower(testdb.UniqueName(t)) {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 64 {
		sum := sha256.Sum256([]byte(name))
		name = name[:40] + "_" + hex.EncodeToString(sum[:])[:20]
	}
	return name
}

// counterTable creates a table (id INT PRIMARY KEY, v INT) on db with rows
// ids, all v = 0, dropped at the end of the test. It returns its name.
func counterTable(t testing.TB, db *sqlx.DB, ids ...int) string {
	t.Helper()
	name := tableName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+name+" (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name)
	})
	for _, id := range ids {
		if _, err := db.ExecContext(ctx, "INSERT INTO "+name+" (id, v) VALUES (?, 0)", id); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
	return name
}

// requireKillEndsWaits skips t, saying why, on a server where a KILL cannot
// end a waiting GET_LOCK (TiDB, the embedded server): there a cancelled
// wait ends with its 1 s slice (TestCancelledWaitLeavesNoWaiter).
func requireKillEndsWaits(t testing.TB) {
	t.Helper()
	if srv := testdb.Get(t); srv.Flavor.WaitsIgnoreCancel() {
		t.Skipf("%s: a KILL cannot end a waiting GET_LOCK there, and this test counts on it ending at once (cancelled waits end with their 1 s slice: TestCancelledWaitLeavesNoWaiter)", srv.Name)
	}
}

// requireDeadlockDetection skips t, saying why, on a server that detects
// no deadlock between named-lock waits (TiDB, the embedded server).
func requireDeadlockDetection(t testing.TB) {
	t.Helper()
	if srv := testdb.Get(t); !srv.Flavor.DetectsDeadlocks() {
		t.Skipf("%s detects no deadlock between GET_LOCK waits: crossed waits both wait until their timeouts (TestCrossedWaitsEndByContext)", srv.Name)
	}
}

// slice is how long a cancelled wait may linger at the test server: its
// 1 s slice where a KILL cannot end it, nothing elsewhere.
func slice(t testing.TB) time.Duration {
	if testdb.Get(t).Flavor.WaitsIgnoreCancel() {
		return time.Second
	}
	return 0
}
