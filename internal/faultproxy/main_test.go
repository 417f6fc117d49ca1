package faultproxy

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/testdb"
)

// TestMain stops the test server and checks that no goroutine outlives the
// tests: the proxies' links and toxics must all end with their proxies.
func TestMain(m *testing.M) { testdb.Main(m) }

// upstream returns the test server and its address.
func upstream(t *testing.T) (*testdb.Server, string) {
	t.Helper()
	s := testdb.Get(t)
	cfg, err := mysql.ParseDSN(s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	return s, cfg.Addr
}

// pin returns one connection of db, closed at the end of the test.
func pin(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("Conn: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

type querier interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// query runs a one-value query under a deadline.
func query(q querier, d time.Duration, query string, args ...any) (sql.NullString, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var v sql.NullString
	err := q.QueryRowContext(ctx, query, args...).Scan(&v)
	return v, err
}

// must is query that fails the test on error.
func must(t *testing.T, q querier, text string, args ...any) sql.NullString {
	t.Helper()
	v, err := query(q, 10*time.Second, text, args...)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return v
}

// eventually polls cond every 20 ms for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	// contract: the caller's; d is a generous bound on something that
	// must happen (each call says what), and only ends a wait for what
	// never comes.
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lock takes the named lock name on c without waiting, failing t otherwise.
func lock(t *testing.T, c *sql.Conn, name string) {
	t.Helper()
	if v := must(t, c, "SELECT GET_LOCK(?, 0)", name); v.String != "1" {
		t.Fatalf("GET_LOCK = %v", v)
	}
}
