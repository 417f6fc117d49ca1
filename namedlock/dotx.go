package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/flavor"
)

// DoTx runs fn in a transaction on the application's primary pool db, under
// the lock named by key, and commits it. It is rolled back when fn returns
// an error or panics. db must not be the lock pool: a db on the Locker's
// lock pool (the same *sql.DB, or one opened on its connector), a nil db or
// a nil fn return an error matching [ErrInvalidArgument] before anything is
// locked.
//
// Without fencing: acquire, begin, fn, commit, release. The transaction is
// committed before the lock is released, so the next holder sees its
// writes. It is also rolled back when the lock is found lost before the
// commit (DoTx then returns an error matching [ErrLockLost]), but a lock is
// not a fencing token: a loss between the last check and the COMMIT
// reaching the server cannot be detected, and a committed transaction can
// then be reported as failed.
//
// With fencing ([WithFencing]; db must be the database given there), the
// transaction's first statement after the lock is taken mints the holder's
// token ([TokenFromContext]), which locks the key's fence row until the
// transaction ends: two fenced DoTx on one key never interleave, even when
// the named lock was lost and granted elsewhere, even when fn ignores its
// cancelled ctx and commits late. Because the fence row orders them, a
// fenced DoTx hands the lock to a fenced DoTx of this Locker waiting for
// the same key as soon as its own mint is done: the next one starts at once
// and waits at its mint, inside the server, until this transaction ends,
// then reads what it wrote — the way transactions queue on a row lock, but
// one at a time per process instead of every caller. Every other holder of
// the key — a Do, an Acquire, another fenced instance — mints its token
// first, so it too waits at the fence row until that COMMIT (a non-fenced
// instance on the same key is not ordered this way). DoTx then returns nil exactly
// when the transaction committed and an error exactly when it rolled back;
// a loss of the named lock after the mint does not fail work the fence kept
// safe, and is reported through [Locker.Stats] and the observer instead.
//
// At SERIALIZABLE (opts.Isolation is [sql.LevelSerializable]), without
// fencing, on MySQL and MariaDB: there every read of a transaction locks
// what it reads, so a later transaction's reads of what an earlier one
// wrote, and its writes of what the earlier one read, wait inside the
// server until the earlier one commits. DoTx then hands the lock to the
// next DoTx at SERIALIZABLE of this Locker on the same db as soon as fn
// returns, before its own COMMIT; that one, which began its transaction
// while it was first in line, reads a row this one wrote only once this
// COMMIT is done, waiting inside the server as a SELECT … FOR UPDATE waits
// for a row lock. Anyone else — a Do, an Acquire, a DoTx at another level
// or on another db, a caller that takes the lock over between two holders,
// another instance at the server — gets the lock only once every COMMIT of
// the DoTx that handed it on this way before it has returned: a DoTx that
// got the lock early hands it to anyone but the next such DoTx, and
// returns (also when its ctx ended, Close took its lock, or its begin or fn
// failed), only once the COMMITs before it have returned; so does Close
// before it releases the lock. Each of those is bounded only by its own
// connection (the driver's readTimeout, if set on db); a COMMIT that
// returns an error on the client's side (a broken connection, that
// timeout) counts as returned, although the server may still apply it.
// One exception: when the lock is lost while such COMMITs are pending,
// another instance may take it at the server before they land, as with
// any DoTx without fencing that loses its lock during its COMMIT. Of the
// callers waiting for a key, only the first in line holds a connection of
// db. fn must read through tx: a read through db itself may not see the
// previous holder's commit yet. The
// server orders these transactions even when the named lock is lost (two
// that conflict then may end in a deadlock error instead); the errors are
// those of DoTx without fencing. On other servers, and with fencing, the
// isolation level changes nothing here.
//
// Fenced, on TiDB, whose transactions read from a snapshot taken at their
// first statement, before the mint waited for the previous holder: a DoTx
// that asks for the default level runs at READ COMMITTED, and one that asks
// for READ COMMITTED runs at it (every statement reads the latest commit).
// Any other level (REPEATABLE READ, READ UNCOMMITTED, SERIALIZABLE) is
// refused before anything is locked, begun or minted, with an error
// matching [ErrFencing] and [ErrInvalidArgument] that names the level: its
// one snapshot can predate a write committed while the mint waited (a
// zombie holder's [CheckFenced] write), which fn would not see, and TiDB
// has no way to move a snapshot forward. A session whose tidb_txn_mode is
// not pessimistic is refused with [ErrFencing] before the mint. A write
// conflict (TiDB error 9007) at the mint, at the COMMIT, or returned by fn
// matches [ErrWriteConflict]: the transaction was rolled back, and can be
// run again.
func (l *Locker) DoTx(ctx context.Context, key string, db *sqlx.DB, opts *sql.TxOptions, fn func(ctx context.Context, tx *sqlx.Tx) error) error {
	if db == nil || db.DB == nil {
		return fail("", "", "invalid argument: DoTx: nil *sqlx.DB", ErrInvalidArgument)
	}
	if err := l.txArgs("DoTx", db.DB, fn == nil); err != nil {
		return err
	}
	return doTx(l, ctx, "DoTx", key, db.DB, opts, func(ctx context.Context) (*sqlx.Tx, error) { return db.BeginTxx(ctx, l.txOptions(opts)) }, fn)
}

// txOptions returns the options DoTx begins with: opts, or, for a fenced
// DoTx on TiDB asking for the default isolation, READ COMMITTED (see
// fenceTable.txOptions).
func (l *Locker) txOptions(opts *sql.TxOptions) *sql.TxOptions {
	if f := l.cfg.fence; f != nil {
		return f.txOptions(opts)
	}
	return opts
}

// txArgs checks what DoTx and DoSQLTx (named by call) are given before
// anything changes: a fn, and a business db that is not the lock pool.
func (l *Locker) txArgs(call string, db *sql.DB, nilFunc bool) error {
	switch {
	case nilFunc:
		return nilFn(call)
	case l.pool != nil && sameDB(db, l.pool):
		return fail("", "", "invalid argument: "+call+": db is the Locker's lock pool; pass the application's own pool, where its transaction belongs", ErrInvalidArgument)
	}
	return nil
}

// doTx is DoTx and DoSQLTx on db, whose transactions begin begins with
// the options the caller gave (opts, which begin has already).
func doTx[T txn](l *Locker, ctx context.Context, call, key string, db *sql.DB, opts *sql.TxOptions, begin func(context.Context) (T, error), fn func(ctx context.Context, tx T) error) error {
	f := l.cfg.fence
	if f != nil && db != f.db {
		return fail(key, "", call+": db is not the *sql.DB given to WithFencing, which holds the fence table "+f.quoted+": its transaction could not be fenced", ErrFencing)
	}
	if f != nil {
		return fencedDoTx(l, ctx, call, key, opts, begin, fn)
	}
	if isSerializable(opts) {
		if ctx == nil {
			panic("namedlock: nil Context")
		}
		if key == "" {
			return errEmptyKey
		}
		ok, err := l.serial.locksReads(ctx, db)
		if err != nil {
			if ctx.Err() != nil {
				return notAcquired(ctx, key, nil)
			}
			return fail(key, "", call+": learn the kind of server of db: "+err.Error(), err)
		}
		if ok {
			return serialTx(l, ctx, call, key, db, begin, fn)
		}
	}
	k, err := l.acquire(ctx, key, false, false, early{kind: earlyNone}, nil)
	if err != nil {
		return err
	}
	return l.run(ctx, []*Lock{k}, func(fctx context.Context) error {
		return unfencedTx(fctx, call, k, begin, fn)
	})
}

// unfencedTx runs fn in a transaction that is committed only if the lock
// is not known lost.
func unfencedTx[T txn](ctx context.Context, call string, k *Lock, begin func(context.Context) (T, error), fn func(ctx context.Context, tx T) error) error {
	tx, err := begin(ctx)
	if err != nil {
		return fail(k.key, "", call+": begin: "+err.Error(), err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := k.Err(); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		if lost := k.Err(); lost != nil {
			return alsoMatching(lost, err)
		}
		return fail(k.key, "", call+": commit: "+err.Error(), err)
	}
	committed = true
	return nil
}

// fencedDoTx is DoTx with fencing: acquire, begin, mint inside the
// transaction, fn, COMMIT. When the next local waiter is itself a fenced
// DoTx, the lock is handed to it as soon as this transaction's mint holds
// the fence row (Lock.handOffEarly), and the proof of that handoff
// runs while fn runs or beside the COMMIT (a goroutine of this call,
// awaited before it returns); any other next holder gets the lock after the
// COMMIT. The transaction lives on ctx, the
// caller's: a loss of the named lock cancels fn's ctx, not the transaction,
// which the fence keeps safe from the mint on. A loss before the mint fails
// the mint (fn's ctx is done) and nothing is written.
//
// The transaction is begun after the lock is taken, not while the caller
// waits (as a DoTx at SERIALIZABLE does when first in line): a handoff
// comes right after the previous holder's mint, so this BEGIN is sent while
// that holder still runs fn, off the path that holders of the key take one
// after another (beginning while first in line would not shorten it), and a
// waiting caller holds no connection of the application's pool.
func fencedDoTx[T txn](l *Locker, ctx context.Context, call, key string, opts *sql.TxOptions, begin func(context.Context) (T, error), fn func(ctx context.Context, tx T) error) (err error) {
	if ctx == nil {
		panic("namedlock: nil Context")
	}
	if key == "" {
		return errEmptyKey
	}
	f := l.cfg.fence
	if err := f.verify(ctx); err != nil {
		return err
	}
	if opts != nil {
		if err := f.refuseLevel(call, key, opts.Isolation); err != nil {
			return err
		}
	}
	k, err := l.acquire(ctx, key, false, false, early{kind: earlyFencedTx}, nil)
	if err != nil {
		return err
	}
	tx, err := begin(ctx)
	if err != nil {
		_ = l.releaseAll([]*Lock{k})
		return fail(key, "", call+": begin: "+err.Error(), err)
	}
	locks := []*Lock{k}
	fctx, cancel := l.sectionContext(ctx, locks)
	defer cancel(context.Canceled)
	var finish func() error // the rest of a release begun by an early handoff
	release := func() error {
		if finish != nil {
			return finish()
		}
		return l.releaseAll(locks)
	}
	finished := false
	var fenceWait time.Duration // how long the mint took
	defer func() {
		if !finished { // fn panicked or called runtime.Goexit
			_ = tx.Rollback()
			l.fencedTxEnded(ctx, key, fenceWait, errFnDidNotReturn)
			_ = release()
		}
	}()
	// The session's block of tokens (mintFor) ends here: this mint moves
	// the counter past it, so the next holder mints anew.
	l.mu.Lock()
	k.sess.tokenNext = 0
	l.mu.Unlock()
	minting := time.Now()
	tok, err := f.mintInTx(fctx, tx, key, k.q.name)
	fenceWait = time.Since(minting)
	if err == nil {
		k.token.Store(tok)
		// The fence row is this transaction's until it ends: a fenced DoTx
		// waiting here may start now and wait at its own mint.
		finish, _ = k.handOffEarly(early{kind: earlyFencedTx}) // the mint orders every later holder
		err = fn(fctx, tx)
		if err != nil && flavor.IsWriteConflict(err) {
			err = alsoMatching(err, ErrWriteConflict) // rolled back below: it can run again
		}
	} else if cause := context.Cause(fctx); fctx.Err() != nil && cause != nil {
		// The loss (or ctx, or Close) made the mint fail: say so once.
		if isLost(cause) {
			err = alsoMatching(cause, err)
		} else {
			err = alsoMatching(err, cause)
		}
	}
	finished = true
	if err != nil {
		_ = tx.Rollback()
		l.fencedTxEnded(ctx, key, fenceWait, err)
		if rerr := release(); rerr != nil {
			return joinErrors(rerr, err)
		}
		return err
	}
	if finish == nil {
		finish, _ = k.handOffEarly(early{kind: earlyFencedTx}) // one may have come while fn ran
	}
	if finish == nil {
		// Anyone else (a Do, another instance) must see the COMMIT done
		// before it gets the lock. A loss found by this release is in
		// Stats and the observer: the transaction committed.
		err = tx.Commit()
		_ = l.releaseAll(locks)
	} else {
		err, _ = commitBeside(tx, finish, nil) // a loss found by the proof: Stats and the observer
	}
	if err != nil && flavor.IsWriteConflict(err) {
		err = fail(key, "", call+": commit: "+err.Error(), ErrWriteConflict, err)
	} else if err != nil {
		err = fail(key, "", call+": commit: "+err.Error(), err)
	}
	l.fencedTxEnded(ctx, key, fenceWait, err)
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
