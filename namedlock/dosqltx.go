package namedlock

import (
	"context"
	"database/sql"
)

// DoSQLTx is [Locker.DoTx] for database/sql: it runs fn in a transaction on
// db, the application's primary pool (never the lock pool), under the lock
// named by key, and commits it before the lock is released (or, at
// SERIALIZABLE, hands the lock to the next such DoSQLTx or DoTx on db as
// soon as fn returns) — with the same guarantees, the same handling of
// errors, panics and lost locks, and the same fencing (db must then be the *sql.DB given to [WithFencing]). The two
// share one implementation; only the transaction's type differs.
func (l *Locker) DoSQLTx(ctx context.Context, key string, db *sql.DB, opts *sql.TxOptions, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if db == nil {
		return fail("", "", "invalid argument: DoSQLTx: nil *sql.DB", ErrInvalidArgument)
	}
	if err := l.txArgs("DoSQLTx", db, fn == nil); err != nil {
		return err
	}
	return doTx(l, ctx, "DoSQLTx", key, db, opts, func(ctx context.Context) (*sql.Tx, error) { return db.BeginTx(ctx, l.txOptions(opts)) }, fn)
}
