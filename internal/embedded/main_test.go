package embedded

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: Close must stop
// everything a Server started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start starts a server that is closed, and checked to close cleanly, when the
// test ends.
func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// openDB opens a pool on s the way the library does: interpolated parameters.
func openDB(t *testing.T, s *Server) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(s.DSN())
	if err != nil {
		t.Fatalf("ParseDSN(%q): %v", s.DSN(), err)
	}
	cfg.InterpolateParams = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// conn pins one connection of db, closed when the test ends.
func conn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatalf("Conn: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scalar runs a one-value query; NULL comes back as Valid == false.
func scalar(t *testing.T, q querier, query string, args ...any) sql.NullString {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var v sql.NullString
	if err := q.QueryRowContext(ctx, query, args...).Scan(&v); err != nil {
		t.Fatalf("%s %v: %v", query, args, err)
	}
	return v
}

// want fails the test unless v is the non-NULL value s, or NULL for s == "NULL".
func want(t *testing.T, what string, v sql.NullString, s string) {
	t.Helper()
	got := "NULL"
	if v.Valid {
		got = v.String
	}
	if got != s {
		t.Fatalf("%s = %s, want %s", what, got, s)
	}
}

var errBadConn = driver.ErrBadConn
