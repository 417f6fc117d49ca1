package pool_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/embedded"
	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/lockconn"
	"github.com/namedlock/mysql/internal/testdb"
)

// TestOpenNoStatementLimit: whatever statement time limit the DSN (or the
// server) gives a session, every session of the pool, and of its control
// connector, has it switched off: its variable reads 0 and a statement of
// 1.5 s runs to its end. A plain pool on the same DSN, whose sessions keep
// the 1 s limit, has that statement cut (the check can fail). No global
// setting of the shared server is touched: the DSN sets the limit.
func TestOpenNoStatementLimit(t *testing.T) {
	t.Parallel()
	srv := testdb.RequireReal(t)
	name := srv.Flavor.StatementTimeVar()
	if name == "" {
		t.Skipf("%s has no statement time limit", srv.Name)
	}
	limit := "1" // max_statement_time: seconds
	if name == "max_execution_time" {
		limit = "1000" // milliseconds
	}
	dsn := withParams(t, srv.DSN, map[string]string{name: limit}, nil)
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const long = "SELECT SLEEP(1.5)"

	db := open(t, dsn)
	c1, err1 := db.Conn(ctx)
	c2, err2 := db.Conn(ctx)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	defer c1.Close()
	defer c2.Close()
	for i, c := range []*sql.Conn{c1, c2} {
		var v float64
		if err := c.QueryRowContext(ctx, "SELECT @@session."+name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: pool connection %d: @@session.%s = %v (the DSN says %s)", srv.Name, i+1, name, v, limit)
		if v != 0 {
			t.Errorf("pool connection %d: @@session.%s = %v, want 0", i+1, name, v)
		}
	}
	start := time.Now()
	var slept int
	if err := c1.QueryRowContext(ctx, long).Scan(&slept); err != nil {
		t.Errorf("pool connection: %s failed after %v: %v", long, time.Since(start), err)
	}

	// The control connector (namedlock's KILLs) makes sessions like them.
	ctrl := sql.OpenDB(lockconn.Of(db).Control())
	defer ctrl.Close()
	var v float64
	if err := ctrl.QueryRowContext(ctx, "SELECT @@session."+name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("control connection: @@session.%s = %v", name, v)
	if v != 0 {
		t.Errorf("control connection: @@session.%s = %v, want 0", name, v)
	}

	plain := testdb.OpenDB(t, dsn)
	start = time.Now()
	err = plain.QueryRowContext(ctx, long).Scan(&slept)
	t.Logf("control: a plain pool on the same DSN: %s = %v, %v after %v", long, slept, err, time.Since(start).Round(time.Millisecond))
	if err == nil && slept == 0 {
		t.Error("control: a plain pool on the same DSN ran the statement to its end: the check cannot fail")
	}
}

// TestOpenEmbeddedNoStatementLimit: go-mysql-server enforces no statement
// time limit (flavor.Embedded names no variable): pool.Open adds none and
// opens as before.
func TestOpenEmbeddedNoStatementLimit(t *testing.T) {
	t.Parallel()
	e, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	t.Logf("server: go-mysql-server at %s", e.Addr())
	db := open(t, e.DSN())
	f, version, err := flavor.Detect(context.Background(), db)
	if err != nil || f != flavor.Embedded {
		t.Fatalf("Detect = %v, %q, %v", f, version, err)
	}
}
