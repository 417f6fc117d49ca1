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
// both results once both are done. ended, if not nil, is called as soon as
// the COMMIT has returned (see Lock.handOffEarly).
func commitBeside(tx txn, finish func() error, ended func()) (commitErr, finishErr error) {
	proved := make(chan struct{})
	go func() {
		defer close(proved)
		finishErr = finish()
	}()
	func() {
		if ended != nil {
			defer ended()
		}
		commitErr = tx.Commit()
	}()
	<-proved
	return commitErr, finishErr
}
