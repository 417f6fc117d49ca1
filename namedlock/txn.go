package namedlock

// txn is what DoTx needs of a transaction: *sqlx.Tx (DoTx) and *sql.Tx
// (DoSQLTx) share one implementation over it.
type txn interface {
	execer
	Commit() error
	Rollback() error
}
