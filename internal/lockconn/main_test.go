package lockconn_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/lockconn"
	"github.com/namedlock/mysql/internal/testdb"
)

// TestMain finds the test server once and stops whatever it had to start.
func TestMain(m *testing.M) {
	testdb.Main(m)
}

// testLease is the lease the tests' Connectors report.
const testLease = 7 * time.Second

// config returns the test server's DSN as a driver Config, with
// interpolateParams=true as pool.Open sets, and a logger that drops the
// driver's complaints about the connections the tests break on purpose.
func config(t *testing.T) *mysql.Config {
	t.Helper()
	cfg, err := mysql.ParseDSN(testdb.Get(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	cfg.Logger = log.New(io.Discard, "", 0)
	return cfg
}

// openDB opens a pool on a Connector around the driver's connector for cfg:
// with dial, cfg dials through lockconn.Dial. It is closed at the end of
// the test.
func openDB(t *testing.T, cfg *mysql.Config, dial bool) (*sql.DB, *lockconn.Connector) {
	t.Helper()
	if dial {
		cfg.DialFunc = lockconn.Dial
	}
	mc, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := lockconn.NewConnector(mc, testLease, dial, nil, "")
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	return db, c
}

// timeout is a ctx for one test's statements.
func timeout(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pin takes a connection of db for the rest of the test.
func pin(t *testing.T, ctx context.Context, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// raw runs f on c's *lockconn.Conn inside Raw and returns Raw's error.
func raw(c *sql.Conn, f func(*lockconn.Conn) error) error {
	return c.Raw(func(dc any) error {
		lc, ok := dc.(*lockconn.Conn)
		if !ok {
			return errors.New("the driver connection is not a *lockconn.Conn")
		}
		return f(lc)
	})
}

// sessionID returns c's CONNECTION_ID().
func sessionID(t *testing.T, ctx context.Context, c interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) int64 {
	t.Helper()
	var id int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatalf("CONNECTION_ID(): %v", err)
	}
	return id
}

// kill ends session id from a connection of its own and waits until the
// server no longer lists it, and a little longer for its socket to close.
func kill(t *testing.T, ctx context.Context, id int64) {
	t.Helper()
	ctrl := testdb.OpenDB(t, testdb.Get(t).DSN)
	if _, err := ctrl.ExecContext(ctx, "KILL CONNECTION ?", id); err != nil {
		t.Fatalf("KILL %d: %v", id, err)
	}
	for {
		var n int
		if err := ctrl.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n); err != nil {
			t.Fatalf("processlist: %v", err)
		}
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
}
