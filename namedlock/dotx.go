package namedlock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/namedlock/mysql/internal/txhook"
)

// DoTx runs fn in a transaction on db, the application's database, under
// the lock named by key, and commits it. It is rolled back when fn returns
// an error or panics. db must not be the lock pool: a db on the Locker's
// lock pool (the same *sql.DB, or one opened on its connector), a nil db or
// a nil fn return an error matching [ErrInvalidArgument] before anything is
// locked. sqlx users call [github.com/namedlock/mysql/namedlock/sqlxlock.DoTx],
// the same call with a *sqlx.Tx.
//
// # What the result means
//
// In every mode below, DoTx returns nil exactly when the transaction
// committed, and an error exactly when it did not — with one exception
// that has its own sentinel: when the COMMIT was sent and no answer came
// back (the application's connection broke during the COMMIT), nobody can
// tell whether it was applied, and DoTx returns an error matching
// [ErrCommitUnknown]: the transaction may have committed. Any other error
// means that nothing of the transaction was committed, so a caller may
// run it again. A COMMIT the server refused (a deadlock, a write
// conflict, a session the server ended for inactivity before the COMMIT
// came: MySQL's error 4031), or one that was never sent (ctx ended first,
// a connection the driver found broken before writing), is such an error.
//
// fn must not end the transaction: no tx.Commit or tx.Rollback, no COMMIT
// or ROLLBACK statement, no statement that commits implicitly (DDL such as
// CREATE, ALTER or DROP TABLE, LOCK TABLES, …). DoTx commits or rolls
// back itself, and database/sql does not tell it how fn ended the
// transaction. When it finds the transaction already ended by fn (tx.Commit
// or tx.Rollback: its own Commit or Rollback returns [sql.ErrTxDone] while
// ctx is live), DoTx returns an error matching ErrCommitUnknown (joined
// with fn's error, if fn returned one): what fn ended may have committed.
// A COMMIT or ROLLBACK statement, or one that commits implicitly, cannot
// be detected without a round trip: the result of such a DoTx does not say
// whether its writes were committed (they may be, although DoTx returns
// fn's error), and the writes after it ran outside the transaction.
//
// A lock found lost before the COMMIT rolls the transaction back (an error
// matching [ErrLockLost]). A lock found lost during or after a COMMIT that
// succeeded does not change the result: the transaction committed, DoTx
// returns nil, and the loss is reported where it can be acted on —
// counted in [Stats].LostCommits, and told to the observer ([WithObserver])
// as a [Lost] event, or a [Released] event whose Err matches ErrLockLost,
// with the call's ctx as the event's Context.
//
// # Plain (the default)
//
// Acquire, begin, fn, COMMIT, release: the transaction is committed before
// the lock is released, so the next holder sees its writes; Close, too,
// releases the lock only once a COMMIT in flight has returned (a lock that
// Close took before the COMMIT was sent rolls the transaction back: an
// error matching [ErrClosed]). A lock is not a
// fencing token: a loss between the last check and the COMMIT reaching the
// server cannot be detected, so such a transaction may have overlapped
// another holder of the key (Stats.LostCommits counts the commits where a
// loss was found at or after the COMMIT). Use [WithFencing] when that
// matters. The isolation level is opts' (SERIALIZABLE included: it changes
// nothing in how the lock is handed on).
//
// # Fenced ([WithFencing])
//
// db must be the database given to WithFencing. The transaction's first
// statement after the lock is taken mints the holder's token
// ([TokenFromContext]), which locks the key's fence row until the
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
// instance on the same key is not ordered this way). A loss of the named
// lock after the mint does not fail work the fence kept safe: the
// transaction commits, and the loss is reported as above.
//
// On TiDB, whose transactions at most levels read from a snapshot taken at
// their first statement, before the mint waited for the previous holder, a
// fenced DoTx runs at READ COMMITTED (every statement reads the latest
// commit): a DoTx that asks for the default level (REPEATABLE READ there)
// gets READ COMMITTED, and any other level is refused before anything is
// locked, begun or minted, with an error matching [ErrFencing] and
// [ErrInvalidArgument] that names the level — its one snapshot can predate
// a write committed while the mint waited (a zombie holder's [CheckFenced]
// write), which fn would not see. A session whose tidb_txn_mode is not pessimistic is
// refused with ErrFencing before the mint. A write conflict (TiDB error
// 9007) at the mint, at the COMMIT, or returned by fn matches
// [ErrWriteConflict]: the transaction was rolled back, and can be run
// again.
//
// # Serializable handoff ([WithSerializableHandoff])
//
// The transaction runs at SERIALIZABLE (opts.Isolation must be the default
// or [sql.LevelSerializable]; any other level returns an error matching
// [ErrInvalidArgument]). On MySQL and MariaDB every read of such a
// transaction locks what it reads, so a later transaction's reads of what
// an earlier one wrote, and its writes of what the earlier one read, wait
// inside the server until the earlier one commits. DoTx then hands the
// lock to the next such DoTx of this Locker on the same db as soon as fn
// returns, before its own COMMIT; that one, which began its transaction
// while it was first in line, reads a row this one wrote only once this
// COMMIT is done, waiting inside the server as a SELECT … FOR UPDATE waits
// for a row lock. Anyone else — a Do, an Acquire, a DoTx on another db, a
// caller that takes the lock over between two holders, another instance at
// the server — gets the lock only once every COMMIT of the DoTx that handed
// it on this way before it has returned: a DoTx that got the lock early
// hands it to anyone but the next such DoTx, and returns (also when its ctx
// ended, Close took its lock, or its begin or fn failed), only once the
// COMMITs before it have returned; so does Close before it releases the
// lock (and, as for a plain DoTx, before it releases the lock of a DoTx
// whose own COMMIT is in flight). Each of those is bounded only by its own
// connection (the driver's readTimeout, if set on db). One exception: when
// the lock is lost while such COMMITs are pending, another instance may
// take it at the server before they land, as with any plain DoTx that
// loses its lock during its COMMIT; each of those COMMITs that succeeds is
// then counted in Stats.LostCommits and told to the observer with its own
// call's ctx, when the loss is found (by the next holder, the keep-alive or
// a release) before a check sent after that COMMIT returned showed the
// lock held. Of the callers waiting for a key, only the first in line holds a
// connection of db. fn must read through tx: a read through db itself may
// not see the previous holder's commit yet. The server orders these
// transactions even when the named lock is lost; two that conflict may
// then end in a deadlock error (rolled back: run it again). A db whose
// server does not lock serializable reads (TiDB) is refused with an error
// matching [ErrInvalidArgument] before anything is locked.
func (l *Locker) DoTx(ctx context.Context, key string, db *sql.DB, opts *sql.TxOptions, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if db == nil {
		return fail("", "", "invalid argument: DoTx: nil *sql.DB", ErrInvalidArgument)
	}
	return l.doTx(ctx, key, db, opts, db.BeginTx, fn)
}

func init() {
	// namedlock/sqlxlock runs DoTx on a transaction it begins itself.
	txhook.DoTx = func(ctx context.Context, l any, key string, db *sql.DB, opts *sql.TxOptions, begin txhook.Begin, fn func(ctx context.Context, tx *sql.Tx) error) error {
		lk, ok := l.(*Locker)
		if !ok || lk == nil {
			return fail("", "", "invalid argument: DoTx: nil *namedlock.Locker", ErrInvalidArgument)
		}
		if db == nil {
			return fail("", "", "invalid argument: DoTx: nil database", ErrInvalidArgument)
		}
		return lk.doTx(ctx, key, db, opts, begin, fn)
	}
}

// doTx is DoTx on db, whose transaction begin begins with the options doTx
// chose. It checks the arguments and runs the Locker's protocol: fenced
// (fencedDoTx), with the serializable handoff (serialTx), or plain
// (plainDoTx).
func (l *Locker) doTx(ctx context.Context, key string, db *sql.DB, opts *sql.TxOptions, begin txhook.Begin, fn func(ctx context.Context, tx *sql.Tx) error) error {
	switch {
	case fn == nil:
		return nilFn("DoTx")
	case l.pool != nil && sameDB(db, l.pool):
		return fail("", "", "invalid argument: DoTx: db is the Locker's lock pool; pass the application's own pool, where its transaction belongs", ErrInvalidArgument)
	case ctx == nil:
		panic("namedlock: nil Context")
	case key == "":
		return errEmptyKey
	}
	if f := l.cfg.fence; f != nil {
		if db != f.db {
			return fail(key, "", "DoTx: db is not the *sql.DB given to WithFencing, which holds the fence table "+f.quoted+": its transaction could not be fenced", ErrFencing)
		}
		return fencedDoTx(l, ctx, key, opts, func(ctx context.Context) (*sql.Tx, error) { return begin(ctx, l.cfg.fence.txOptions(opts)) }, fn)
	}
	if l.cfg.serialHandoff {
		o, err := l.serialOptions(ctx, key, db, opts)
		if err != nil {
			return err
		}
		return serialTx(l, ctx, key, db, func(ctx context.Context) (*sql.Tx, error) { return begin(ctx, o) }, fn)
	}
	return plainDoTx(l, ctx, key, func(ctx context.Context) (*sql.Tx, error) { return begin(ctx, opts) }, fn)
}

// plainDoTx is DoTx without fencing or the serializable handoff: acquire,
// begin, fn, COMMIT, release (runSection), the COMMIT counted on the
// lock's session so that Close waits for it (commitHeld). Its outcome is
// read under the lock, before the release: a loss found by the release
// does not change a COMMIT that succeeded (counted: committed), nor is it
// joined to an outcome that is unknown.
func plainDoTx(l *Locker, ctx context.Context, key string, begin func(context.Context) (*sql.Tx, error), fn func(ctx context.Context, tx *sql.Tx) error) error {
	k, err := l.acquire(ctx, key, false, false, early{kind: earlyNone}, nil)
	if err != nil {
		return err
	}
	committed := false
	ferr, rerr := l.runSection(ctx, []*Lock{k}, func(fctx context.Context) (err error) {
		committed, err = plainTx(fctx, k, begin, fn)
		return err
	})
	switch {
	case committed:
		l.committed(k)
		return nil
	case errors.Is(ferr, ErrCommitUnknown):
		return ferr // alone: a loss found by the release must not read as "not committed"
	}
	return joinErrors(rerr, ferr)
}

// plainTx runs fn in a transaction that is committed only if the lock is
// not known lost, and reports whether it committed.
func plainTx(ctx context.Context, k *Lock, begin func(context.Context) (*sql.Tx, error), fn func(ctx context.Context, tx *sql.Tx) error) (committed bool, err error) {
	tx, err := begin(ctx)
	if err != nil {
		return false, fail(k.key, "", "DoTx: begin: "+err.Error(), err)
	}
	finished := false
	defer func() {
		if !finished { // fn panicked or called runtime.Goexit
			_ = tx.Rollback()
		}
	}()
	ferr := fn(ctx, tx)
	finished = true
	if ferr != nil {
		return false, rolledBack(ctx, k.key, tx, ferr)
	}
	switch cerr, notHeld := commitHeld(k, tx); {
	case notHeld != nil:
		return false, notHeld
	case cerr != nil:
		return false, commitFailed(ctx, k, cerr)
	}
	return true, nil
}
