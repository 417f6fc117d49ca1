package namedlock

import (
	"context"
	"database/sql"
)

// txn is what DoTx needs of a transaction: *sqlx.Tx (DoTx) and *sql.Tx
// (DoSQLTx) share one implementation over it.
type txn interface {
	execer
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	Commit() error
	Rollback() error
}

// commitBeside commits tx while finish, the rest of an early handoff's
// release (its proof), runs in a goroutine of the caller's, and returns
// both results once both are done.
func commitBeside(tx txn, finish func() error) (commitErr, finishErr error) {
	proved := make(chan struct{})
	go func() {
		defer close(proved)
		finishErr = finish()
	}()
	commitErr = tx.Commit()
	<-proved
	return commitErr, finishErr
}
