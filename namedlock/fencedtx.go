package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/namedlock/mysql/internal/flavor"
)

// fencedDoTx is DoTx with fencing: acquire, begin, mint inside the
// transaction, fn, COMMIT. When the next local waiter is itself a fenced
// DoTx, the lock is handed to it as soon as this transaction's mint holds
// the fence row (Lock.handOffEarly), and the proof of that handoff runs
// while fn runs or beside the COMMIT (a goroutine of this call, awaited
// before it returns); any other next holder gets the lock after the
// COMMIT. The transaction lives on ctx, the caller's: a loss of the named
// lock cancels fn's ctx, not the transaction, which the fence keeps safe
// from the mint on. A loss before the mint fails the mint (fn's ctx is
// done) and nothing is written.
//
// The transaction is begun after the lock is taken, not while the caller
// waits (as a DoTx with the serializable handoff does when first in line):
// a handoff comes right after the previous holder's mint, so this BEGIN is
// sent while that holder still runs fn, off the path that holders of the
// key take one after another, and a waiting caller holds no connection of
// the application's pool.
func fencedDoTx(l *Locker, ctx context.Context, key string, opts *sql.TxOptions, begin func(context.Context) (*sql.Tx, error), fn func(ctx context.Context, tx *sql.Tx) error) error {
	f := l.cfg.fence
	if err := f.verify(ctx); err != nil {
		return err
	}
	level := sql.LevelDefault
	if opts != nil {
		level = opts.Isolation
	}
	if err := f.refuseLevel(key, level); err != nil {
		return err
	}
	k, err := l.acquire(ctx, key, false, false, early{kind: earlyFencedTx}, nil)
	if err != nil {
		return err
	}
	tx, err := begin(ctx)
	if err != nil {
		_ = l.releaseAll([]*Lock{k})
		return fail(key, "", "DoTx: begin: "+err.Error(), err)
	}
	t := &fencedTx{l: l, ctx: ctx, key: key, k: k, locks: []*Lock{k}, tx: tx}
	fctx, cancel := l.sectionContext(ctx, t.locks)
	defer cancel(context.Canceled)
	finished := false
	defer func() {
		if !finished { // fn panicked or called runtime.Goexit
			_ = tx.Rollback()
			l.fencedTxEnded(ctx, key, t.fenceWait, errFnDidNotReturn)
			_ = t.release()
		}
	}()
	err = t.run(fctx, fn)
	finished = true
	if err != nil {
		return t.rollBack(err)
	}
	return t.commit()
}

// fencedTx is the transaction of one fenced DoTx, begun under its lock.
type fencedTx struct {
	l     *Locker
	ctx   context.Context // the caller's, which the transaction lives on
	key   string
	k     *Lock
	locks []*Lock // k
	tx    *sql.Tx
	// finish is the rest of a release begun by an early handoff (its
	// proof), nil while k was not handed on.
	finish    func() error
	fenceWait time.Duration // how long the mint took
}

// release lets the lock go: the rest of an early handoff, or a release.
func (t *fencedTx) release() error {
	if t.finish != nil {
		return t.finish()
	}
	return t.l.releaseAll(t.locks)
}

// run mints the holder's token inside the transaction, on fctx (fn's ctx,
// which a loss of the lock, ctx or Close ends), hands the lock to a fenced
// DoTx waiting for the key once the mint holds the fence row, and runs fn:
// it returns fn's error, matching ErrWriteConflict if it is one, or the
// mint's, with the loss, ctx or Close that made the mint fail.
func (t *fencedTx) run(fctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	l, k := t.l, t.k
	// The session's block of tokens (mintFor) ends here: this mint moves
	// the counter past it, so the next holder mints anew.
	l.mu.Lock()
	k.sess.tokenNext = 0
	l.mu.Unlock()
	minting := time.Now()
	tok, err := l.cfg.fence.mintInTx(fctx, t.tx, t.key, k.q.name)
	t.fenceWait = time.Since(minting)
	if err != nil {
		return mintFailed(fctx, err)
	}
	k.token.Store(tok)
	// The fence row is this transaction's until it ends: a fenced DoTx
	// waiting here may start now and wait at its own mint.
	t.finish, _ = k.handOffEarly(early{kind: earlyFencedTx}) // the mint orders every later holder
	err = fn(fctx, t.tx)
	if err != nil && flavor.IsWriteConflict(err) {
		err = alsoMatching(err, ErrWriteConflict) // rolled back below: it can run again
	}
	return err
}

// mintFailed returns the error of a mint on fctx that failed with err:
// when fctx ended (the loss, ctx, or Close made the mint fail), err and
// the cause, said once.
func mintFailed(fctx context.Context, err error) error {
	cause := context.Cause(fctx)
	switch {
	case fctx.Err() == nil || cause == nil:
		return err
	case isLost(cause):
		return alsoMatching(cause, err)
	}
	return alsoMatching(err, cause)
}

// rollBack rolls the transaction back after run returned err, reports its
// end, lets the lock go, and returns DoTx's error.
func (t *fencedTx) rollBack(err error) error {
	err = rolledBack(t.ctx, t.key, t.tx, err)
	t.l.fencedTxEnded(t.ctx, t.key, t.fenceWait, err)
	if rerr := t.release(); rerr != nil {
		return joinErrors(rerr, err)
	}
	return err
}

// commit commits the transaction, fn having returned nil, reports its end
// and returns DoTx's result (commitResult). When a fenced DoTx came to
// wait while fn ran, the lock goes to it first, and the COMMIT runs beside
// the handoff's proof; anyone else (a Do, another instance) must see the
// COMMIT done before it gets the lock, which is released after it. A loss
// found by the release or the proof is in Stats and the observer, not in
// the result: the transaction committed.
func (t *fencedTx) commit() error {
	if t.finish == nil {
		t.finish, _ = t.k.handOffEarly(early{kind: earlyFencedTx}) // one may have come while fn ran
	}
	var err error
	if t.finish == nil {
		err = t.tx.Commit()
		_ = t.l.releaseAll(t.locks)
	} else {
		err, _ = commitBeside(t.tx, t.finish, nil)
	}
	err = t.l.commitResult(t.ctx, t.k, err, nil, t.finish != nil)
	t.l.fencedTxEnded(t.ctx, t.key, t.fenceWait, err)
	return err
}

// errFnDidNotReturn is the Err of the FencedTx event of a DoTx whose fn
// panicked or called runtime.Goexit.
var errFnDidNotReturn = errors.New("namedlock: DoTx: fn panicked or called runtime.Goexit; the transaction was rolled back")

// fencedTxEnded counts the end of a fenced DoTx's transaction, whose mint
// took fenceWait, in Stats and tells the observer: err is nil when it
// committed, why it rolled back otherwise.
func (l *Locker) fencedTxEnded(ctx context.Context, key string, fenceWait time.Duration, err error) {
	l.stats.fenceWaitNanos.Add(int64(fenceWait))
	switch {
	case err == nil:
		l.stats.fencedCommits.Add(1)
	case errors.Is(err, ErrFenceWait):
		l.stats.fenceWaitTimeouts.Add(1)
	}
	l.observe(Event{Key: key, Outcome: FencedTx, FenceWait: fenceWait, Err: err, Context: ctx})
}
