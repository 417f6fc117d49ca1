package pool

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
)

// TestCheckRefusesGalera: check wraps the refusal of a node with
// wsrep_on=ON in ErrUnsupportedServer, and a failure to read wsrep_on is no
// refusal. No Galera node runs here: a fake driver answers SHOW VARIABLES.
func TestCheckRefusesGalera(t *testing.T) {
	t.Parallel()
	const want = "pool: named locks cannot be trusted on this server: wsrep_on=ON (Galera / Percona XtraDB Cluster): named locks are node-local and some releases refuse them"
	db := sql.OpenDB(wsrepConnector("ON"))
	defer db.Close()
	err := check(context.Background(), db)
	if !errors.Is(err, ErrUnsupportedServer) || !errors.Is(err, flavor.ErrNodeLocal) || err.Error() != want {
		t.Errorf("check = %v, want %q", err, want)
	}

	db = sql.OpenDB(wsrepConnector("fail"))
	defer db.Close()
	err = check(context.Background(), db)
	if err == nil || errors.Is(err, ErrUnsupportedServer) || !errors.Is(err, errWsrepFake) {
		t.Errorf("check with a failing SHOW VARIABLES = %v", err)
	}
}

var errWsrepFake = errors.New("fake query failure")

// wsrepConnector is a fake connector whose every query answers one row
// ("wsrep_on", value), or fails with errWsrepFake when value is "fail".
type wsrepConnector string

func (c wsrepConnector) Connect(context.Context) (driver.Conn, error) { return wsrepConn(c), nil }
func (c wsrepConnector) Driver() driver.Driver                        { return nil }

type wsrepConn string

func (c wsrepConn) Prepare(string) (driver.Stmt, error) { return wsrepStmt(c), nil }
func (wsrepConn) Close() error                          { return nil }
func (wsrepConn) Begin() (driver.Tx, error)             { return nil, errors.New("no transactions") }

type wsrepStmt string

func (wsrepStmt) Close() error                               { return nil }
func (wsrepStmt) NumInput() int                              { return -1 }
func (wsrepStmt) Exec([]driver.Value) (driver.Result, error) { return nil, errors.New("no exec") }
func (s wsrepStmt) Query([]driver.Value) (driver.Rows, error) {
	if s == "fail" {
		return nil, errWsrepFake
	}
	return &wsrepRows{row: []driver.Value{"wsrep_on", string(s)}}, nil
}

type wsrepRows struct{ row []driver.Value }

func (*wsrepRows) Columns() []string { return []string{"Variable_name", "Value"} }
func (*wsrepRows) Close() error      { return nil }
func (r *wsrepRows) Next(dest []driver.Value) error {
	if r.row == nil {
		return io.EOF
	}
	copy(dest, r.row)
	r.row = nil
	return nil
}

// TestCheckRefusesBrokenNamedLocks: check refuses, with ErrUnsupportedServer
// and an error naming the server's version and the reason, a server whose
// named locks do not work as the library needs them, and accepts the
// others. No such TiDB runs here (the one of scripts/tidb.sh passes, in
// TestOpenSupportedServer): a fake driver gives the answers of TiDB v7.1,
// which has no IS_USED_LOCK, of a no-op IS_USED_LOCK, of a session whose
// CONNECTION_ID() is not the id IS_USED_LOCK gives it (pseudo_thread_id:
// for real in namedlock's TestReviewDSNPseudoThreadIDKillsAnotherInstance),
// and of a TiDB without mysql.advisory_locks, whose GET_LOCK (under
// tidb_enable_noop_functions) answers 1 and locks nothing.
func TestCheckRefusesBrokenNamedLocks(t *testing.T) {
	t.Parallel()
	const tidb71, tidb80 = "8.0.11-TiDB-v7.1.0", "8.0.11-TiDB-v8.1.0"
	works := []driver.Value{int64(1), int64(1), int64(42), int64(42), int64(1), nil}
	serverErr := func(num uint16, msg string) error { return &mysql.MySQLError{Number: num, Message: msg} }
	for _, tc := range []struct {
		name     string
		version  string
		probe    []driver.Value // NamedLockProbe's answer
		probeErr error
		tableErr error // AdvisoryLocksProbe's error
		want     []string
	}{
		{name: "TiDB v7.1: no IS_USED_LOCK", version: tidb71, probeErr: serverErr(1305, "FUNCTION IS_USED_LOCK does not exist"),
			want: []string{tidb71, "IS_USED_LOCK", "v6.1 to v7.1", "Error 1305"}},
		{name: "no-op IS_USED_LOCK", version: tidb71, probe: []driver.Value{int64(1), nil, nil, int64(42), int64(1), nil},
			want: []string{tidb71, "IS_USED_LOCK(name) = CONNECTION_ID() answered NULL"}},
		{name: "IS_USED_LOCK held after the release", version: tidb71, probe: []driver.Value{int64(1), int64(1), int64(42), int64(42), int64(1), int64(42)},
			want: []string{tidb71, "after the release"}},
		{name: "no mysql.advisory_locks", version: "5.7.25-TiDB-v5.3.0", probe: works, tableErr: serverErr(1146, "Table 'mysql.advisory_locks' doesn't exist"),
			want: []string{"5.7.25-TiDB-v5.3.0", "no mysql.advisory_locks", "no-op"}},
		{name: "GET_LOCK refused", version: "8.0.36", probe: []driver.Value{int64(0), nil, nil, int64(42), int64(0), nil},
			want: []string{`MySQL "8.0.36"`, "GET_LOCK(name, 0) of a free name answered 0"}},
		{name: "pseudo_thread_id", version: "8.0.36", probe: []driver.Value{int64(1), int64(0), int64(42), int64(7), int64(1), nil},
			want: []string{`MySQL "8.0.36"`, "CONNECTION_ID() answered 7", "names session 42", "pseudo_thread_id"}},
		{name: "TiDB v8.1", version: tidb80, probe: works},
		{name: "TiDB without the privilege on mysql.advisory_locks", version: tidb80, probe: works, tableErr: serverErr(1142, "SELECT command denied to user 'app'@'%' for table 'advisory_locks'")},
		{name: "MySQL", version: "8.0.36", probe: works, tableErr: errors.New("not asked")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := sql.OpenDB(answerConnector(func(q string) ([]string, []driver.Value, error) {
				switch q {
				case flavor.VersionQuery:
					return []string{"v", "c"}, []driver.Value{tc.version, ""}, nil
				case flavor.NamedLockProbe:
					return []string{"g", "o", "h", "c", "r", "a"}, tc.probe, tc.probeErr
				case flavor.AdvisoryLocksProbe:
					return []string{"n"}, []driver.Value{int64(0)}, tc.tableErr
				}
				return []string{"Variable_name", "Value"}, nil, nil // SHOW VARIABLES: none
			}))
			defer db.Close()
			err := check(context.Background(), db)
			t.Logf("%s: %v", tc.version, err)
			if tc.want == nil {
				if err != nil {
					t.Errorf("check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrUnsupportedServer) || !errors.Is(err, flavor.ErrNoNamedLocks) {
				t.Fatalf("check = %v, want ErrUnsupportedServer and flavor.ErrNoNamedLocks", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("check = %q, want it to say %q", err, w)
				}
			}
		})
	}
}

// answerConnector is a fake connector whose every query answers one row
// (none when the row is nil) or fails, as the function says for its text.
type answerConnector func(q string) ([]string, []driver.Value, error)

func (c answerConnector) Connect(context.Context) (driver.Conn, error) { return answerConn{c}, nil }
func (c answerConnector) Driver() driver.Driver                        { return nil }

type answerConn struct{ answer answerConnector }

func (c answerConn) Prepare(q string) (driver.Stmt, error) { return answerStmt{c.answer, q}, nil }
func (answerConn) Close() error                            { return nil }
func (answerConn) Begin() (driver.Tx, error)               { return nil, errors.New("no transactions") }

type answerStmt struct {
	answer answerConnector
	q      string
}

func (answerStmt) Close() error                               { return nil }
func (answerStmt) NumInput() int                              { return -1 }
func (answerStmt) Exec([]driver.Value) (driver.Result, error) { return nil, errors.New("no exec") }
func (s answerStmt) Query([]driver.Value) (driver.Rows, error) {
	cols, row, err := s.answer(s.q)
	if err != nil {
		return nil, err
	}
	return &answerRows{cols: cols, row: row}, nil
}

type answerRows struct {
	cols []string
	row  []driver.Value
}

func (r *answerRows) Columns() []string { return r.cols }
func (*answerRows) Close() error        { return nil }
func (r *answerRows) Next(dest []driver.Value) error {
	if r.row == nil {
		return io.EOF
	}
	copy(dest, r.row)
	r.row = nil
	return nil
}
