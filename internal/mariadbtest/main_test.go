package mariadbtest

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
)

// TestMain removes the datadir template and checks that no goroutine (the
// process reapers in particular) outlives the tests.
func TestMain(m *testing.M) { testdb.Main(m, RemoveTemplate) }

// open opens a pool on dsn, closed when the test ends.
func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn+"?interpolateParams=true&timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// scalar runs a one-value query with a deadline.
func scalar(t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, query string, args ...any) sql.NullString {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var v sql.NullString
	if err := q.QueryRowContext(ctx, query, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}

// outcomeTB records how a helper ended the test instead of ending it.
type outcomeTB struct {
	testing.TB
	how string // "fatal", "skip" or ""
	msg string
}

func (o *outcomeTB) Helper() {}

func (o *outcomeTB) Fatalf(format string, args ...any) {
	o.how, o.msg = "fatal", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (o *outcomeTB) Skipf(format string, args ...any) {
	o.how, o.msg = "skip", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with an outcomeTB on t in its own goroutine and reports how it
// ended.
func run(t *testing.T, f func(tb testing.TB)) *outcomeTB {
	o := &outcomeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(o)
	}()
	<-done
	return o
}
