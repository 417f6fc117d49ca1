package pool

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"testing"

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
