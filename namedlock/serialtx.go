package namedlock

import (
	"context"
	"database/sql"
	"strings"
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
// before the COMMIT (rolled back), the COMMIT's error. A loss found by the
// release or the handoff's proof after a COMMIT that succeeded is counted
// (commitResult): the transaction committed.
func serialTx[T txn](l *Locker, ctx context.Context, key string, db *sql.DB, begin func(context.Context) (T, error), fn func(ctx context.Context, tx T) error) error {
	t := &serialRun[T]{begin: begin}
	defer t.rollBackUnended()
	e := early{kind: earlySerialTx, db: db}
	// First in line, it begins (a failure there is tried again below).
	k, err := l.acquire(ctx, key, false, false, e, func() { _ = t.beginOnce(ctx) })
	if err != nil {
		return err
	}
	if err := t.beginOnce(ctx); err != nil {
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
			t.rollBack()
			_ = l.releaseAll(locks)
		}
	}()
	ferr := fn(fctx, t.tx)
	finished = true
	if ferr == nil {
		ferr = k.Err()
	}
	if ferr != nil {
		ferr = rolledBack(ctx, key, t.tx, ferr)
		t.done = true
		if rerr := l.releaseAll(locks); rerr != nil {
			return joinErrors(rerr, ferr)
		}
		return ferr
	}
	return t.commit(l, ctx, k, e)
}

// serialRun is the transaction of one serialTx: begun once its caller is
// first in line for the key, or else once it holds the lock.
type serialRun[T txn] struct {
	begin func(context.Context) (T, error)
	tx    T
	begun bool
	done  bool // committed, or rolled back
}

// beginOnce begins the transaction on ctx, unless it was begun.
func (t *serialRun[T]) beginOnce(ctx context.Context) error {
	if t.begun {
		return nil
	}
	tx, err := t.begin(ctx)
	if err != nil {
		return err
	}
	t.tx, t.begun = tx, true
	return nil
}

// rollBack rolls the transaction back.
func (t *serialRun[T]) rollBack() {
	_ = t.tx.Rollback()
	t.done = true
}

// rollBackUnended rolls the transaction back if it was begun and has
// neither committed nor been rolled back: serialTx's last word, whichever
// way it returns.
func (t *serialRun[T]) rollBackUnended() {
	if t.begun && !t.done {
		_ = t.tx.Rollback()
	}
}

// commit commits the transaction of k's holder, fn having returned nil,
// and returns DoTx's result (commitResult). When the next local waiter is
// a DoTx that may take k early as e says, k goes to it first and the
// COMMIT runs beside the handoff's proof; otherwise the COMMIT is counted
// on k's session (commitHeld), and k is released once it has returned,
// as a plain DoTx does.
func (t *serialRun[T]) commit(l *Locker, ctx context.Context, k *Lock, e early) error {
	var cerr, rerr error
	finish, ended := k.handOffEarly(e)
	if finish != nil {
		cerr, rerr = commitBeside(t.tx, finish, ended)
	} else {
		var notHeld error
		if cerr, notHeld = commitHeld(k, t.tx); notHeld != nil {
			t.done = true // commitHeld rolled it back
			return joinErrors(l.releaseAll([]*Lock{k}), notHeld)
		}
		rerr = l.releaseAll([]*Lock{k})
	}
	t.done = true
	return l.commitResult(ctx, k, cerr, rerr, finish != nil)
}

// serialOptions returns the options of a DoTx with WithSerializableHandoff
// asked for opts on db: SERIALIZABLE, or an error when opts asks for
// another level or db's server does not lock serializable reads.
func (l *Locker) serialOptions(ctx context.Context, key string, db *sql.DB, opts *sql.TxOptions) (*sql.TxOptions, error) {
	o := sql.TxOptions{Isolation: sql.LevelSerializable}
	if opts != nil {
		if opts.Isolation != sql.LevelDefault && opts.Isolation != sql.LevelSerializable {
			return nil, fail(key, "", "invalid argument: DoTx at "+strings.ToUpper(opts.Isolation.String())+" on a Locker with WithSerializableHandoff, whose transactions run at SERIALIZABLE: ask for the default level or SERIALIZABLE, or use a Locker without that option", ErrInvalidArgument)
		}
		o.ReadOnly = opts.ReadOnly
	}
	ok, err := l.serial.locksReads(ctx, db)
	if err != nil {
		if ctx.Err() != nil {
			return nil, notAcquired(ctx, key, nil)
		}
		return nil, fail(key, "", "DoTx: learn the kind of server of db: "+err.Error(), err)
	}
	if !ok {
		return nil, fail(key, "", "invalid argument: DoTx with WithSerializableHandoff on a server whose serializable transactions do not lock what they read (TiDB, the embedded server): the server would not order them, so the lock cannot go before the COMMIT; use a Locker without that option", ErrInvalidArgument)
	}
	return &o, nil
}
