package namedlock_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"go.uber.org/goleak"

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
// given), both closed at the end of the test (the Locker first).
func newInstance(t testing.TB, dsn string, opts ...namedlock.Option) *instance {
	t.Helper()
	if dsn == "" {
		dsn = testdb.Get(t).DSN
	}
	db := openPool(t, dsn)
	l, err := namedlock.NewLocker(db, opts...)
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &instance{db: db, locker: l}
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
	var id sql.NullInt64
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil {
		t.Fatalf("IS_USED_LOCK(%q): %v", name, err)
	}
	return id.Int64
}
