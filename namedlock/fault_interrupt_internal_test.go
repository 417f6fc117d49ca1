package namedlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
)

// TestFaultKilledWaitAnswers: what MySQL, TiDB and MariaDB answer to a
// GET_LOCK wait that the server itself ends — MySQL error 1317 for an
// operator's KILL QUERY, 3024 for max_execution_time (MySQL, TiDB), MariaDB
// 1969 for max_statement_time, or NULL — comes back from the Locker's
// server door as ErrNotAcquired with the reason, keeping the server's
// error. Before the wait, a lock connection of a plain pool switches its
// session's statement time limit off with the kind's own variable. No
// MySQL or TiDB runs here: a fake driver gives their answers (MariaDB's
// NULL is also seen for real in TestFaultKillQueryOnWait).
func TestFaultKilledWaitAnswers(t *testing.T) {
	mysql84 := []driver.Value{"8.4.3", "MySQL Community Server - GPL"}
	mariadb := []driver.Value{"10.11.19-MariaDB-0+deb12u1", "Debian 12"}
	tidb := []driver.Value{"8.0.11-TiDB-v7.5.0", "TiDB Server (Apache License 2.0)"}
	gms := []driver.Value{"8.0.31", "Dolt"}
	killed := func(num uint16, msg string) error { return &mysql.MySQLError{Number: num, Message: msg} }
	for _, tc := range []struct {
		name    string
		version []driver.Value
		wait    error // GET_LOCK(name, timeout) fails with it; nil: answers NULL
		setVar  string
		setErr  error // the SET SESSION fails with it
	}{
		{"MySQL KILL QUERY", mysql84, killed(1317, "Query execution was interrupted"), "max_execution_time", nil},
		{"MySQL max_execution_time", mysql84, killed(3024, "Query execution was interrupted, maximum statement execution time exceeded"), "max_execution_time", nil},
		{"TiDB max_execution_time", tidb, killed(3024, "Query execution was interrupted, maximum statement execution time exceeded"), "max_execution_time", nil},
		{"MariaDB max_statement_time error", mariadb, killed(1969, "Query execution was interrupted (max_statement_time exceeded)"), "max_statement_time", nil},
		{"MariaDB NULL", mariadb, nil, "max_statement_time", nil},
		{"go-mysql-server NULL", gms, nil, "", nil},
		// A server without the variable (MariaDB 10.0) has no limit to
		// switch off: error 1193 is no failure.
		{"MariaDB 10.0 NULL", []driver.Value{"10.0.38-MariaDB", ""}, nil, "max_statement_time", killed(1193, "Unknown system variable 'max_statement_time'")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSQL{answer: func(q string, args []driver.NamedValue) ([]string, []driver.Value, error) {
				switch q {
				case sqlTryLock:
					return []string{"g", "wt", "id", "pg", "ph", "pr"}, []driver.Value{int64(0), int64(30), int64(42), int64(1), int64(42), int64(1)}, nil
				case flavor.VersionQuery:
					return []string{"v", "c"}, tc.version, nil
				case sqlWaitLock:
					return []string{"g"}, []driver.Value{nil}, tc.wait
				case flavor.MaxTxnTTLQuery:
					return []string{"ttl"}, []driver.Value{float64(3600000)}, nil
				}
				return nil, nil, tc.setErr
			}}
			s := newServer(sql.OpenDB(f))
			defer s.close()
			defer s.db.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := s.take(ctx, ctx, "job:1", "job:1", false)
			t.Logf("%s: %v; statements %q", tc.name, err, f.statements())
			if !errors.Is(err, ErrNotAcquired) || ctx.Err() != nil || errors.Is(err, ErrDeadlock) {
				t.Errorf("take = %v, want ErrNotAcquired (no ctx error, no deadlock)", err)
			}
			if err != nil && !strings.Contains(err.Error(), waitKilled) {
				t.Errorf("take = %q, want the reason %q", err, waitKilled)
			}
			var me *mysql.MySQLError
			if tc.wait != nil && (!errors.As(err, &me) || me != tc.wait) {
				t.Errorf("take = %v, want the server's error kept", err)
			}
			// The kind is learned before the first GET_LOCK (and, on TiDB,
			// how long a lock may live).
			want := []string{flavor.VersionQuery, sqlTryLock, sqlWaitLock}
			if tc.setVar != "" {
				want = slices.Insert(want, 2, "SET SESSION "+tc.setVar+" = 0")
			}
			if tc.version[0] == tidb[0] {
				want = slices.Insert(want, 1, flavor.MaxTxnTTLQuery)
			}
			if got := f.statements(); !slices.Equal(got, want) {
				t.Errorf("statements %q, want %q", got, want)
			}
			if n := s.db.Stats().OpenConnections; n != 0 {
				t.Errorf("%d connections open after the killed wait, want 0 (discarded)", n)
			}
		})
	}

	// A deadlock reported during a wait bounded by a deadline is a
	// deadlock, not a cancelled wait (the wait's own context, ended once the
	// statement returned, once hid it).
	f := &fakeSQL{answer: func(q string, _ []driver.NamedValue) ([]string, []driver.Value, error) {
		switch q {
		case sqlTryLock:
			return []string{"g", "wt", "id", "pg", "ph", "pr"}, []driver.Value{int64(0), int64(30), int64(42), int64(1), int64(42), int64(1)}, nil
		case flavor.VersionQuery:
			return []string{"v", "c"}, mariadb, nil
		case sqlWaitLock:
			return nil, nil, &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}
		}
		return nil, nil, nil
	}}
	s := newServer(sql.OpenDB(f))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := s.take(ctx, ctx, "job:4", "job:4", false)
	cancel()
	s.close()
	_ = s.db.Close()
	t.Logf("MariaDB deadlock during a wait: %v; statements %q", err, f.statements())
	if !errors.Is(err, ErrDeadlock) || !errors.Is(err, ErrNotAcquired) || slices.Contains(f.statements(), "KILL CONNECTION 42") {
		t.Errorf("take = %v (statements %q), want ErrDeadlock and no KILL", err, f.statements())
	}

	// Through a Locker, and a name the server refuses (MySQL 8.4's 4163 for
	// an over-long one, older ones' 3057) is said to be one.
	for _, num := range []uint16{3057, 4163} {
		f := &fakeSQL{answer: func(q string, _ []driver.NamedValue) ([]string, []driver.Value, error) {
			return nil, nil, &mysql.MySQLError{Number: num, Message: "bad name"}
		}}
		db := sql.OpenDB(f)
		l, err := New(db)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Acquire(context.Background(), "job:2")
		_ = l.Close()
		_ = db.Close()
		t.Logf("GET_LOCK failing with %d: %v", num, err)
		var me *mysql.MySQLError
		if errors.Is(err, ErrNotAcquired) || !errors.As(err, &me) || me.Number != num || !strings.Contains(err.Error(), "refused the lock name") {
			t.Errorf("GET_LOCK failing with %d: Acquire = %v", num, err)
		}
	}
}

// TestFaultKilledWaitThroughLocker: the Locker returns what its server door
// says, for MySQL's KILL QUERY answer (1317).
func TestFaultKilledWaitThroughLocker(t *testing.T) {
	f := &fakeSQL{answer: func(q string, _ []driver.NamedValue) ([]string, []driver.Value, error) {
		switch q {
		case sqlTryLock:
			return []string{"g", "wt", "id", "pg", "ph", "pr"}, []driver.Value{int64(0), int64(30), int64(42), int64(1), int64(42), int64(1)}, nil
		case flavor.VersionQuery:
			return []string{"v", "c"}, []driver.Value{"8.4.3", "MySQL Community Server - GPL"}, nil
		case sqlWaitLock:
			return nil, nil, &mysql.MySQLError{Number: 1317, Message: "Query execution was interrupted"}
		}
		return nil, nil, nil
	}}
	db := sql.OpenDB(f)
	defer db.Close()
	l, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = l.Acquire(ctx, "job:3")
	t.Logf("MySQL KILL QUERY through a Locker: %v", err)
	if !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), waitKilled) {
		t.Errorf("Acquire = %v, want ErrNotAcquired: %s", err, waitKilled)
	}
	if st := l.Stats(); st.Held != 0 {
		t.Errorf("Stats = %+v after a killed wait", st)
	}
}

// fakeSQL is a database/sql connector whose connections answer each
// statement with answer (columns and one row, or an error; no columns: an
// empty result) and record it.
type fakeSQL struct {
	answer func(query string, args []driver.NamedValue) ([]string, []driver.Value, error)

	mu    sync.Mutex
	stmts []string
}

func (f *fakeSQL) statements() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.stmts)
}

func (f *fakeSQL) record(q string) {
	f.mu.Lock()
	f.stmts = append(f.stmts, q)
	f.mu.Unlock()
}

func (f *fakeSQL) Connect(context.Context) (driver.Conn, error) { return &fakeSQLConn{f}, nil }
func (f *fakeSQL) Driver() driver.Driver                        { return nil }

type fakeSQLConn struct{ f *fakeSQL }

func (c *fakeSQLConn) Prepare(q string) (driver.Stmt, error) {
	return nil, fmt.Errorf("fake: no prepared statements (%q)", q)
}
func (c *fakeSQLConn) Close() error              { return nil }
func (c *fakeSQLConn) Begin() (driver.Tx, error) { return nil, errors.New("fake: no transactions") }

func (c *fakeSQLConn) QueryContext(_ context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.f.record(q)
	cols, row, err := c.f.answer(q, args)
	if err != nil {
		return nil, err
	}
	return &fakeSQLRows{cols: cols, row: row}, nil
}

func (c *fakeSQLConn) ExecContext(_ context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.f.record(q)
	if _, _, err := c.f.answer(q, args); err != nil {
		return nil, err
	}
	return driver.RowsAffected(0), nil
}

type fakeSQLRows struct {
	cols []string
	row  []driver.Value
	done bool
}

func (r *fakeSQLRows) Columns() []string { return r.cols }
func (r *fakeSQLRows) Close() error      { return nil }
func (r *fakeSQLRows) Next(dest []driver.Value) error {
	if r.done || r.row == nil {
		return io.EOF
	}
	r.done = true
	copy(dest, r.row)
	return nil
}
