package pool

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
)

// noStatementLimit makes every session of the pool switch the server's
// statement time limit off for itself: a server-wide max_statement_time
// (MariaDB) or max_execution_time (MySQL, TiDB) would otherwise end every
// GET_LOCK wait that outlasts it, whatever its caller allowed.
//
// The variable's name depends on the kind of server (each refuses the
// other's, so a DSN cannot name it for both), so it first learns the kind on
// a connection of its own (flavor.Detect) and tries the kind's statement
// there (flavor.NoStatementLimit). When the server takes it, the variable
// joins cfg's session parameters, which the driver sets in the one SET
// statement it already runs on each new connection (for wait_timeout): no
// round trip more per connection, and the control connections of the pool
// (lockconn.Connector.Control) get it as well. A server without the
// variable (error 1193: MariaDB before 10.1, go-mysql-server) has no such
// limit: nothing is added.
//
// The kind is learned once: a pool whose address later leads to another
// kind of server fails to open connections there, with error 1193.
func noStatementLimit(ctx context.Context, cfg *mysql.Config) error {
	probeCfg := cfg.Clone()
	mc, err := mysql.NewConnector(probeCfg)
	if err != nil { // normalize again: interpolateParams with an unsafe collation
		return invalidDSN(whatIsWrong(err, "", ""), err)
	}
	db := sql.OpenDB(mc)
	defer db.Close()
	db.SetMaxOpenConns(1)
	f, _, err := flavor.Detect(ctx, db)
	if err != nil {
		return &connectError{err}
	}
	name := f.StatementTimeVar()
	if name == "" {
		return nil
	}
	if _, err := db.ExecContext(ctx, f.NoStatementLimit()); err != nil {
		if flavor.IsUnknownVariable(err) {
			return nil
		}
		return fmt.Errorf("switch the statement time limit off (%s, %s server): %w", f.NoStatementLimit(), f, err)
	}
	cfg.Params[name] = "0"
	return nil
}
