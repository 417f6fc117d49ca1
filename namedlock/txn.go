package namedlock

// txn is what a DoTx's commit path needs of its transaction: a *sql.Tx;
// the ordering tests run serialTx on a fake one.
type txn interface {
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
