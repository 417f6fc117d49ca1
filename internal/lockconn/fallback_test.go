package lockconn_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/lockconn"
)

// TestFallbacksMatchDatabaseSQL: over driver connections that lack the
// optional interfaces (one with only driver.Conn, one with the deprecated
// Execer and Queryer too), database/sql does the same through a Connector
// as on the bare connections: the same driver calls, in the same order,
// and the same errors.
//
// With one known difference: a Conn always has ExecContext and
// QueryContext, so database/sql converts a statement's arguments before
// trying them, where for a connection with neither it prepares the
// statement first and converts the arguments for it. An argument that
// fails the conversion then fails without the Prepare.
func TestFallbacksMatchDatabaseSQL(t *testing.T) {
	t.Parallel()
	scenarios := []struct {
		name string
		run  func(context.Context, *sql.DB) error
	}{
		{"exec", func(ctx context.Context, db *sql.DB) error {
			_, err := db.ExecContext(ctx, "E", 1)
			return err
		}},
		{"exec named", func(ctx context.Context, db *sql.DB) error {
			_, err := db.ExecContext(ctx, "E", sql.Named("a", 1))
			return err
		}},
		{"exec uint64", func(ctx context.Context, db *sql.DB) error {
			_, err := db.ExecContext(ctx, "E", uint64(math.MaxUint64))
			return err
		}},
		{"query", func(ctx context.Context, db *sql.DB) error {
			rows, err := db.QueryContext(ctx, "Q", 2)
			if err != nil {
				return err
			}
			return rows.Close()
		}},
		{"prepare", func(ctx context.Context, db *sql.DB) error {
			s, err := db.PrepareContext(ctx, "P")
			if err != nil {
				return err
			}
			if _, err := s.ExecContext(ctx, 3); err != nil {
				return err
			}
			return s.Close()
		}},
		{"begin", func(ctx context.Context, db *sql.DB) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			return tx.Commit()
		}},
		{"begin, ctx that cannot end", func(_ context.Context, db *sql.DB) error {
			tx, err := db.BeginTx(context.Background(), nil)
			if err != nil {
				return err
			}
			return tx.Rollback()
		}},
		{"begin serializable", func(ctx context.Context, db *sql.DB) error {
			_, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
			return err
		}},
		{"begin read-only", func(ctx context.Context, db *sql.DB) error {
			_, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			return err
		}},
		{"ping", func(ctx context.Context, db *sql.DB) error { return db.PingContext(ctx) }},
		{"reuse", func(ctx context.Context, db *sql.DB) error {
			for range 2 { // the second Exec resets and validates the connection
				if _, err := db.ExecContext(ctx, "E"); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	// The calls through a Connector over a connection with only
	// driver.Conn, where they differ (see above).
	differ := map[string][]string{"exec uint64": {"Connect"}}
	for _, kind := range []string{"bare", "execer"} {
		for _, sc := range scenarios {
			run := func(wrap bool) ([]string, string) {
				log := new(callLog)
				var c driver.Connector = &fakeConnector{kind: kind, log: log}
				if wrap {
					c = lockconn.NewConnector(c, testLease, false, nil, "")
				}
				db := sql.OpenDB(c)
				defer db.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				err := sc.run(ctx, db)
				msg := "<nil>"
				if err != nil {
					msg = err.Error()
				}
				return log.get(), msg
			}
			bareCalls, bareErr := run(false)
			calls, err := run(true)
			want := bareCalls
			if w, ok := differ[sc.name]; ok && kind == "bare" {
				want = w
			}
			if !slices.Equal(calls, want) || err != bareErr {
				t.Errorf("%s, %s:\n bare:    %q, error %s\n wrapped: %q, error %s", kind, sc.name, bareCalls, bareErr, calls, err)
			}
			if len(bareCalls) == 0 && bareErr == "<nil>" {
				t.Errorf("%s, %s: nothing happened: the scenario tests nothing", kind, sc.name)
			}
		}
	}
}

// callLog records the driver calls of a fake connection.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(format string, args ...any) {
	l.mu.Lock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// fakeConnector makes fakeConns ("bare") or execConns ("execer").
type fakeConnector struct {
	kind string
	log  *callLog
}

func (c *fakeConnector) Connect(context.Context) (driver.Conn, error) {
	c.log.add("Connect")
	if c.kind == "execer" {
		return &execConn{fakeConn{c.log}}, nil
	}
	return &fakeConn{c.log}, nil
}

func (c *fakeConnector) Driver() driver.Driver { return fakeDriver{} }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) { return nil, errors.New("fakeDriver.Open") }

// fakeConn implements driver.Conn only.
type fakeConn struct{ log *callLog }

func (c *fakeConn) Prepare(q string) (driver.Stmt, error) {
	c.log.add("Prepare %s", q)
	return &fakeStmt{c.log}, nil
}

func (c *fakeConn) Close() error { return nil } // when is up to database/sql

func (c *fakeConn) Begin() (driver.Tx, error) {
	c.log.add("Begin")
	return fakeTx{c.log}, nil
}

// execConn adds the deprecated Execer and Queryer.
type execConn struct{ fakeConn }

func (c *execConn) Exec(q string, args []driver.Value) (driver.Result, error) {
	c.log.add("Exec %s %v", q, args)
	return driver.RowsAffected(1), nil
}

func (c *execConn) Query(q string, args []driver.Value) (driver.Rows, error) {
	c.log.add("Query %s %v", q, args)
	return fakeRows{}, nil
}

type fakeStmt struct{ log *callLog }

func (s *fakeStmt) Close() error {
	s.log.add("Stmt.Close")
	return nil
}

func (s *fakeStmt) NumInput() int { return -1 }

func (s *fakeStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.log.add("Stmt.Exec %v", args)
	return driver.RowsAffected(1), nil
}

func (s *fakeStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.log.add("Stmt.Query %v", args)
	return fakeRows{}, nil
}

type fakeTx struct{ log *callLog }

func (tx fakeTx) Commit() error {
	tx.log.add("Commit")
	return nil
}

func (tx fakeTx) Rollback() error {
	tx.log.add("Rollback")
	return nil
}

type fakeRows struct{}

func (fakeRows) Columns() []string         { return []string{"x"} }
func (fakeRows) Close() error              { return nil }
func (fakeRows) Next([]driver.Value) error { return io.EOF }
