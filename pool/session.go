package pool

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
)

// statementLimitVar returns the name of the server's statement time limit
// that every session of the pool switches off for itself (sessionStatement):
// a server-wide max_statement_time (MariaDB) or max_execution_time (MySQL,
// TiDB) would otherwise end every GET_LOCK wait that outlasts it, whatever
// its caller allowed.
//
// The variable's name depends on the kind of server (each refuses the
// other's, so a DSN cannot name it for both), so it first learns the kind on
// a connection of its own (flavor.Detect) and tries the kind's statement
// there (flavor.NoStatementLimit). A server without the variable (error
// 1193: MariaDB before 10.1, go-mysql-server) has no such limit: "" is
// returned.
//
// The kind is learned once: a pool whose address later leads to another
// kind of server fails to open connections there, with error 1193.
func statementLimitVar(ctx context.Context, cfg *mysql.Config) (string, error) {
	probeCfg := cfg.Clone()
	mc, err := mysql.NewConnector(probeCfg)
	if err != nil { // normalize again: interpolateParams with an unsafe collation
		return "", refusedDSN(err)
	}
	db := sql.OpenDB(mc)
	defer db.Close()
	db.SetMaxOpenConns(1)
	f, _, err := flavor.Detect(ctx, db)
	if err != nil {
		return "", &connectError{err}
	}
	name := f.StatementTimeVar()
	if name == "" {
		return "", nil
	}
	if _, err := db.ExecContext(ctx, f.NoStatementLimit()); err != nil {
		if flavor.IsUnknownVariable(err) {
			return "", nil
		}
		return "", fmt.Errorf("switch the statement time limit off (%s, %s server): %w", f.NoStatementLimit(), f, err)
	}
	return name, nil
}
