package lockconn

import (
	"context"
	"database/sql/driver"
	"errors"
)

// The optional interfaces of database/sql/driver that database/sql looks
// for on a connection, all implemented by go-sql-driver/mysql's connection
// (the deprecated driver.Execer and driver.Queryer only matter without
// ExecerContext and QueryerContext, which Conn has). Each method forwards
// to the wrapped connection when it implements the interface, and
// otherwise does what database/sql does when a connection lacks it.
var (
	_ driver.Conn               = (*Conn)(nil)
	_ driver.ConnBeginTx        = (*Conn)(nil)
	_ driver.ConnPrepareContext = (*Conn)(nil)
	_ driver.ExecerContext      = (*Conn)(nil)
	_ driver.QueryerContext     = (*Conn)(nil)
	_ driver.Pinger             = (*Conn)(nil)
	_ driver.SessionResetter    = (*Conn)(nil)
	_ driver.Validator          = (*Conn)(nil)
	_ driver.NamedValueChecker  = (*Conn)(nil)
)

// BeginTx implements [driver.ConnBeginTx]. Without it, the wrapped
// connection's Begin is used as database/sql would: a non-default isolation
// level or a read-only transaction is an error, and a transaction begun
// after ctx ended is rolled back.
func (c *Conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	if opts.Isolation != 0 { // sql.LevelDefault
		return nil, errors.New("sql: driver does not support non-default isolation level")
	}
	if opts.ReadOnly {
		return nil, errors.New("sql: driver does not support read-only transactions")
	}
	//lint:ignore SA1019 the fallback database/sql itself uses
	tx, err := c.inner.Begin()
	if err == nil && ctx.Err() != nil {
		_ = tx.Rollback()
		return nil, ctx.Err()
	}
	return tx, err
}

// PrepareContext implements [driver.ConnPrepareContext]. Without it, the
// wrapped connection's Prepare is used as database/sql would: a statement
// prepared after ctx ended is closed.
func (c *Conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	s, err := c.inner.Prepare(query)
	if err == nil && ctx.Err() != nil {
		_ = s.Close()
		return nil, ctx.Err()
	}
	return s, err
}

// ExecContext implements [driver.ExecerContext]. Without it, the wrapped
// connection's deprecated Exec is used as database/sql would, and without
// that it returns [driver.ErrSkip]: database/sql then prepares the
// statement.
func (c *Conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := c.inner.(driver.ExecerContext); ok {
		return e.ExecContext(ctx, query, args)
	}
	//lint:ignore SA1019 the fallback database/sql itself uses
	e, ok := c.inner.(driver.Execer)
	if !ok {
		return nil, driver.ErrSkip
	}
	dargs, err := namedValueToValue(args)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.Exec(query, dargs)
}

// QueryContext implements [driver.QueryerContext]. Without it, the wrapped
// connection's deprecated Query is used as database/sql would, and without
// that it returns [driver.ErrSkip]: database/sql then prepares the
// statement.
func (c *Conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := c.inner.(driver.QueryerContext); ok {
		return q.QueryContext(ctx, query, args)
	}
	//lint:ignore SA1019 the fallback database/sql itself uses
	q, ok := c.inner.(driver.Queryer)
	if !ok {
		return nil, driver.ErrSkip
	}
	dargs, err := namedValueToValue(args)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return q.Query(query, dargs)
}

// Ping implements [driver.Pinger]. Without it, it returns nil, as
// database/sql's ping does.
func (c *Conn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// ResetSession implements [driver.SessionResetter]. Without it, it returns
// nil, as database/sql does. go-sql-driver/mysql checks there that an idle
// connection was not closed by the server (checkConnLiveness).
func (c *Conn) ResetSession(ctx context.Context) error {
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid implements [driver.Validator]. Without it, it returns true, as
// database/sql does. go-sql-driver/mysql reports false once the connection
// is closed, for example after a statement failed on a deadline of
// [Conn.Socket]: database/sql then discards it.
func (c *Conn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// CheckNamedValue implements [driver.NamedValueChecker]. Without it, it
// returns [driver.ErrSkip]: database/sql then converts the argument as it
// would for the wrapped connection (its statement's converter, or the
// default one). go-sql-driver/mysql's accepts more than the default, e.g.
// uint64 values above math.MaxInt64.
func (c *Conn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.inner.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// namedValueToValue is database/sql's conversion for the deprecated
// Execer and Queryer, which take no names.
func namedValueToValue(named []driver.NamedValue) ([]driver.Value, error) {
	dargs := make([]driver.Value, len(named))
	for n, param := range named {
		if len(param.Name) > 0 {
			return nil, errors.New("sql: driver does not support the use of Named Parameters")
		}
		dargs[n] = param.Value
	}
	return dargs, nil
}
