package namedlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
)

// The commit and result handling that the three DoTx protocols share: the
// plain one (dotx.go), the fenced one (fencedtx.go) and the serializable
// handoff (serialtx.go). Each DoTx returns nil exactly when its transaction
// committed, an error matching ErrCommitUnknown when its outcome cannot be
// known, and any other error when nothing of it was committed.

// txn is what a DoTx's commit path needs of its transaction: a *sql.Tx;
// the ordering tests run serialTx on a fake one.
type txn interface {
	Commit() error
	Rollback() error
}

// commitHeld commits tx, the transaction of k's holder, a DoTx that did not
// hand k on early: the COMMIT is counted on k's session while it is in
// flight, so that Close gives k back only once it has returned
// (Lock.beginCommit). When k is no longer held (lost, or taken by Close),
// tx is rolled back instead and notHeld is k's error.
func commitHeld(k *Lock, tx txn) (commitErr, notHeld error) {
	ended, err := k.beginCommit()
	if err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	commitErr = tx.Commit()
	ended()
	return commitErr, nil
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

// commitResult returns the result of a DoTx, called with ctx, whose COMMIT
// returned commitErr and whose lock k was then let go of (releaseErr: the
// release's error, or the early handoff's proof's, nil if not reported),
// handedEarly saying whether k went to the next holder before the COMMIT.
// A COMMIT that succeeded returns nil, a loss of k found at or after it
// being counted (earlyCommitted, committed); one that failed returns
// commitFailed's error: alone when the outcome is unknown (a loss found by
// the release must not read as "not committed"), joined with releaseErr
// otherwise.
func (l *Locker) commitResult(ctx context.Context, k *Lock, commitErr, releaseErr error, handedEarly bool) error {
	if commitErr != nil {
		err := commitFailed(ctx, k, commitErr)
		if releaseErr == nil || errors.Is(err, ErrCommitUnknown) {
			return err
		}
		return joinErrors(releaseErr, err)
	}
	if handedEarly {
		l.earlyCommitted(ctx, k) // a loss found by the proof or since: reported, not an error
	} else {
		l.committed(k) // a loss found by the release: reported, not an error
	}
	return nil
}

// committed counts, once DoTx's transaction committed and its lock was let
// go of, a loss of k found at or after the COMMIT (Stats.LostCommits); the
// observer was told of it by the loss or the release.
func (l *Locker) committed(k *Lock) {
	if isLost(k.Err()) {
		l.stats.lostCommits.Add(1)
	}
}

// commitFailed returns DoTx's error for a COMMIT of k's transaction, begun
// on ctx, that returned err: one matching ErrCommitUnknown unless err shows
// that the COMMIT was not applied (commitRefused). sql.ErrTxDone while ctx
// is live means fn ended the transaction itself (committed or rolled back,
// database/sql does not say which); with ctx done, database/sql rolled it
// back.
func commitFailed(ctx context.Context, k *Lock, err error) error {
	if errors.Is(err, sql.ErrTxDone) && ctx.Err() == nil {
		return fnEndedTx(k.key, err)
	}
	if !commitRefused(err) {
		return fail(k.key, "", "DoTx: commit: the transaction may have committed; its outcome is unknown: "+err.Error(), ErrCommitUnknown, err)
	}
	if flavor.IsWriteConflict(err) {
		return fail(k.key, "", "DoTx: commit: "+err.Error(), ErrWriteConflict, err)
	}
	if lost := k.Err(); isLost(lost) {
		return alsoMatching(lost, err)
	}
	return fail(k.key, "", "DoTx: commit: "+err.Error(), err)
}

// fnEndedTx returns DoTx's error for a transaction that fn ended itself
// (DoTx's Commit or Rollback found it done while its ctx was live), err
// being fn's error or the Commit's.
func fnEndedTx(key string, err error) error {
	return fail(key, "", "DoTx: fn ended the transaction itself (tx.Commit or tx.Rollback): it may have committed; its outcome is unknown: "+err.Error(), ErrCommitUnknown, err)
}

// rolledBack rolls tx, begun on ctx, back after fn returned ferr, and
// returns DoTx's error: ferr, or, when the Rollback shows that fn ended
// the transaction itself, an error matching ErrCommitUnknown and ferr.
func rolledBack(ctx context.Context, key string, tx txn, ferr error) error {
	if err := tx.Rollback(); errors.Is(err, sql.ErrTxDone) && ctx.Err() == nil {
		return fnEndedTx(key, ferr)
	}
	return ferr
}

// commitRefused reports whether err, returned by a transaction's Commit,
// shows that the COMMIT was not applied: the server answered with an error
// (other than one that ends the session or the statement from outside,
// after which it may have committed), database/sql did not send it (the
// transaction had ended: its ctx was done), or the driver found the
// connection broken before writing it (driver.ErrBadConn, which a driver
// must not return when the server may have run the statement). MySQL's
// error 4031 is such an answer: the server ended the session for sitting
// idle, waiting for its next command, before the COMMIT came. Any other
// error — the connection broke after the COMMIT was written — leaves the
// outcome unknown.
func commitRefused(err error) bool {
	var me *mysql.MySQLError
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrTxDone),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &me):
		switch me.Number {
		case 1053, // ER_SERVER_SHUTDOWN
			1317, // ER_QUERY_INTERRUPTED (KILL QUERY)
			1927, // ER_CONNECTION_KILLED (MariaDB)
			3169: // ER_SESSION_WAS_KILLED (MySQL)
			return false
		}
		return true
	}
	return false
}
