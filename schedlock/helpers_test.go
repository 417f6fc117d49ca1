package schedlock

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"
)

// TODO: switch to internal/testdb once it is committed.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const defaultTestDSN = "root@tcp(127.0.0.1:3306)/test?interpolateParams=true&parseTime=true"

func testDSN() string {
	if dsn := os.Getenv("MYSQL_TEST_DSN"); dsn != "" {
		return dsn
	}
	return defaultTestDSN
}

var logServerOnce sync.Map // test name -> logged

// openDB opens a pool on the test server (with extra DSN parameters, e.g.
// "timestamp=1700000000"), logs which server it is, and closes it in
// t.Cleanup.
func openDB(tb testing.TB, params ...string) *sql.DB {
	tb.Helper()
	cfg, err := mysql.ParseDSN(testDSN())
	if err != nil {
		tb.Fatalf("parse DSN: %v", err)
	}
	for _, kv := range params {
		k, v, _ := strings.Cut(kv, "=")
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[k] = v
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		tb.Fatalf("test server %s@%s/%s unreachable (set MYSQL_TEST_DSN): %v", cfg.User, cfg.Addr, cfg.DBName, err)
	}
	if _, dup := logServerOnce.LoadOrStore(tb.Name(), true); !dup {
		tb.Logf("server: %s at %s, database %q, user %q", version, cfg.Addr, cfg.DBName, cfg.User)
	}
	return db
}

var seq atomic.Int64

// uniqueName returns a short name unique to this test process and call.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), seq.Add(1))
}

// newTable creates a fresh ShedLock table and drops it in t.Cleanup.
func newTable(tb testing.TB, db *sql.DB) string {
	tb.Helper()
	table := uniqueName("schedlock_t")
	p := New(db, WithTable(table))
	if err := p.CreateTable(context.Background()); err != nil {
		tb.Fatalf("CreateTable: %v", err)
	}
	dropLater(tb, db, table)
	return table
}

func dropLater(tb testing.TB, db *sql.DB, table string) {
	tb.Cleanup(func() {
		if _, err := db.Exec("DROP TABLE IF EXISTS `" + table + "`"); err != nil {
			tb.Errorf("drop %s: %v", table, err)
		}
	})
}

// row is one lock row as the server renders it in the session's zone.
type row struct {
	LockUntil, LockedAt, LockedBy string
}

func readRow(tb testing.TB, db *sql.DB, table, name string) row {
	tb.Helper()
	var r row
	err := db.QueryRow("SELECT CAST(lock_until AS CHAR), CAST(locked_at AS CHAR), locked_by FROM `"+table+
		"` WHERE name = ?", name).Scan(&r.LockUntil, &r.LockedAt, &r.LockedBy)
	if err != nil {
		tb.Fatalf("read row %q: %v", name, err)
	}
	return r
}

// singleConn returns a pool of exactly one connection, so session settings
// (SET timestamp, SET time_zone) apply to every statement on it.
func singleConn(tb testing.TB) *sql.DB {
	db := openDB(tb)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db
}

// setDBTime freezes the session clock of a singleConn pool at unix seconds.
func setDBTime(tb testing.TB, db *sql.DB, unix float64) {
	tb.Helper()
	if _, err := db.Exec(fmt.Sprintf("SET timestamp = %.6f", unix)); err != nil {
		tb.Fatalf("SET timestamp: %v", err)
	}
}

var bg = context.Background()
