package schedlock

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/testdb"
)

// TestMain stops the test server and checks for leaked goroutines.
func TestMain(m *testing.M) { testdb.Main(m) }

var servers sync.Map // test name -> *testdb.Server, so each test logs its server once

// openDB opens a pool on the test server (a real MySQL or MariaDB: the
// tests skip on the embedded one) with extra DSN parameters, e.g.
// "time_zone='+05:00'"; testdb.OpenDB closes it in t.Cleanup.
func openDB(tb testing.TB, params ...string) *sql.DB {
	tb.Helper()
	var srv *testdb.Server
	if s, ok := servers.Load(tb.Name()); ok {
		srv = s.(*testdb.Server)
	} else {
		srv = testdb.RequireReal(tb) // logs "server: ..."
		servers.Store(tb.Name(), srv)
	}
	cfg, err := mysql.ParseDSN(srv.DSN)
	if err != nil {
		tb.Fatalf("parse DSN: %v", err)
	}
	cfg.ParseTime = true
	for _, kv := range params {
		k, v, _ := strings.Cut(kv, "=")
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[k] = v
	}
	db := testdb.OpenDB(tb, cfg.FormatDSN())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		tb.Fatalf("%s: %v", srv.Name, err)
	}
	return db
}

// uniqueName returns a name unique to this test binary and call, usable as
// a table name (letters, digits, underscores; at most 60 characters).
func uniqueName(tb testing.TB) string {
	return strings.ReplaceAll(testdb.UniqueName(tb), "-", "_")
}

// mustNew returns New(db, opts...), failing the test on an error.
func mustNew(tb testing.TB, db *sql.DB, opts ...Option) *Provider {
	tb.Helper()
	p, err := New(db, opts...)
	if err != nil {
		tb.Fatalf("schedlock.New: %v", err)
	}
	return p
}

// newTable creates a fresh ShedLock table and drops it in t.Cleanup.
func newTable(tb testing.TB, db *sql.DB) string {
	tb.Helper()
	table := uniqueName(tb)
	p := mustNew(tb, db, WithTable(table))
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
