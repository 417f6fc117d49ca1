package namedlock

import (
	"context"
	"database/sql"
	"errors"
)

// A DoTx with the serializable handoff (WithSerializableHandoff) on MySQL or MariaDB: there every
// read of the transaction locks what it reads (InnoDB turns a plain SELECT
// into a locking read when autocommit is off), so the server itself orders
// two such transactions that touch the same rows: the later one's reads of
// what the earlier wrote, and its writes of what the earlier read, wait for
// the earlier one's COMMIT. The lock can then go to the next such DoTx as
// soon as fn has returned, before the COMMIT, and that DoTx's first read
// waits inside the server, as a SELECT … FOR UPDATE waits for a row lock;
// it is on its way at once when its transaction was begun before the lock
// came (see serialTx).

// serialTx is a DoTx with the serializable handoff on db, whose reads lock:
// acquire (beginning once first in line), fn, then — when the next local
// waiter is such a DoTx on the same db — hand it the lock and COMMIT beside
// the handoff's proof; otherwise COMMIT, then release as any DoTx does.
// A lock this DoTx got by such a handoff is let go of, by every path but
// the next early handoff (release after the COMMIT, a failed begin or fn, a
// panic, a grant given back), only once the COMMITs it was handed ahead of
// have returned (Lock.release waits for them).
//
// The caller first in line for the key begins its transaction while it
// waits (behind the local holder, or at the server), not after: its first
// statement is then on its way as soon as the lock comes, and waits inside
// the server for the previous holder's COMMIT only where their rows meet.
// The others begin when they are first in line, so waiting callers hold at
// most one connection of db per key (the transaction would be as safe
// begun after the lock came — its reads lock whenever it began — only
// slower: BEGIN at another level is two statements).
//
// Errors are those of a plain DoTx: fn's error, the loss of the lock found
// before the COMMIT (rolled back), the COMMIT's error (commitFailed). A
// loss found by the release or the handoff's proof after a COMMIT that
// succeeded is counted (Locker.committed): the transaction committed.
func serialTx[T txn](l *Locker, ctx context.Context, key string, db *sql.DB, begin func(context.Context) (T, error), fn func(ctx context.Context, tx T) error) (err error) {
	var tx T
	begun, done := false, false // done: committed, or rolled back
	beginNow := func() error {
		if begun {
			return nil
		}
		t, err := begin(ctx)
		if err != nil {
			return err
		}
		tx, begun = t, true
		return nil
	}
	defer func() {
		if begun && !done {
			_ = tx.Rollback()
		}
	}()
	e := early{kind: earlySerialTx, db: db}
	// First in line, it begins (a failure there is tried again below).
	k, err := l.acquire(ctx, key, false, false, e, func() { _ = beginNow() })
	if err != nil {
		return err
	}
	if err := beginNow(); err != nil {
		_ = l.releaseAll([]*Lock{k})
		if ctx.Err() != nil {
			return notAcquired(ctx, key, nil)
		}
		return fail(key, "", "DoTx: begin: "+err.Error(), err)
	}
	locks := []*Lock{k}
	fctx, cancel := l.sectionContext(ctx, locks)
	defer cancel(context.Canceled)
	finished := false
	defer func() {
		if !finished { // fn panicked or called runtime.Goexit
			_ = tx.Rollback()
			done = true
			_ = l.releaseAll(locks)
		}
	}()
	ferr := fn(fctx, tx)
	finished = true
	if ferr == nil {
		ferr = k.Err()
	}
	if ferr != nil {
		ferr = rolledBack(ctx, key, tx, ferr)
		done = true
		if rerr := l.releaseAll(locks); rerr != nil {
			return joinErrors(rerr, ferr)
		}
		return ferr
	}
	var rerr error
	finish, ended := k.handOffEarly(e)
	if finish != nil {
		err, rerr = commitBeside(tx, finish, ended)
	} else {
		ended, herr := k.beginCommit() // Close waits for the COMMIT
		if herr != nil {
			_ = tx.Rollback()
			done = true
			return joinErrors(l.releaseAll(locks), herr)
		}
		err = tx.Commit()
		ended()
		rerr = l.releaseAll(locks)
	}
	done = true
	if err != nil {
		if err = commitFailed(ctx, k, err); errors.Is(err, ErrCommitUnknown) {
			return err // alone: a loss found by the release must not read as "not committed"
		}
		return joinErrors(rerr, err)
	}
	if finish != nil {
		l.earlyCommitted(ctx, k) // a loss found by the proof or since: reported, not an error
	} else {
		l.committed(k) // a loss found by the release: reported, not an error
	}
	return nil
}
