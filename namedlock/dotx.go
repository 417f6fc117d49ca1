package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// DoTx runs fn in a transaction on the application's primary pool db, under
// the lock named by key: acquire, begin, fn, commit, release. The
// transaction is committed before the lock is released, so the next holder
// sees its writes. It is rolled back when fn returns an error or panics.
// db must not be the lock pool.
//
// Without fencing, a lock is not a fencing token: the transaction is also
// rolled back when the lock is found lost before the commit (DoTx then
// returns an error matching [ErrLockLost]), but a loss between the last
// check and the COMMIT reaching the server cannot be detected, and a
// committed transaction can then be reported as failed.
//
// With fencing ([WithFencing]; db must be the database given there), the
// transaction's first statement mints the holder's token
// ([TokenFromContext]), which locks the key's fence row until the
// transaction ends: two fenced DoTx on one key never interleave, even when
// the named lock was lost and granted elsewhere, even when fn ignores its
// cancelled ctx and commits late. DoTx then returns nil exactly when the
// transaction committed and an error exactly when it rolled back; a loss of
// the named lock after the mint does not fail work the fence kept safe, and
// is reported through [Locker.Stats] and the observer instead.
func (l *Locker) DoTx(ctx context.Context, key string, db *sqlx.DB, opts *sql.TxOptions, fn func(ctx context.Context, tx *sqlx.Tx) error) error {
	if db == nil {
		return fmt.Errorf("%w: DoTx: nil *sqlx.DB", ErrInvalidOption)
	}
	f := l.cfg.fence
	if f != nil && db.DB != f.db {
		return fmt.Errorf("%w: DoTx %q: db is not the *sql.DB given to WithFencing, which holds the fence table %s: its transaction could not be fenced", ErrFencing, key, f.quoted)
	}
	k, err := l.acquire(ctx, key, false, false)
	if err != nil {
		return err
	}
	if f == nil {
		return l.run(ctx, []*Lock{k}, func(fctx context.Context) error {
			return l.unfencedTx(fctx, k, db, opts, fn)
		})
	}
	ferr, rerr := l.runSection(ctx, []*Lock{k}, func(fctx context.Context) error {
		return l.fencedTx(ctx, fctx, k, db, opts, fn)
	})
	if ferr != nil && rerr != nil {
		return errors.Join(rerr, ferr)
	}
	return ferr // nil: committed, whatever happened to the named lock since the mint
}

// unfencedTx runs fn in a transaction that is committed only if the lock
// is not known lost.
func (l *Locker) unfencedTx(ctx context.Context, k *Lock, db *sqlx.DB, opts *sql.TxOptions, fn func(ctx context.Context, tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, opts)
	if err != nil {
		return fmt.Errorf("namedlock: DoTx %q: begin: %w", k.key, err)
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
			return errors.Join(lost, err)
		}
		return fmt.Errorf("namedlock: DoTx %q: commit: %w", k.key, err)
	}
	committed = true
	return nil
}

// fencedTx runs fn in a transaction whose first statement mints k's token.
// The transaction lives on ctx, the caller's: a loss of the named lock
// cancels fctx (fn's), not the transaction, which the fence keeps safe
// from the mint on. A loss before the mint fails the mint (fctx is done)
// and nothing is written.
func (l *Locker) fencedTx(ctx, fctx context.Context, k *Lock, db *sqlx.DB, opts *sql.TxOptions, fn func(ctx context.Context, tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, opts)
	if err != nil {
		return fmt.Errorf("namedlock: DoTx %q: begin: %w", k.key, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	// The session's block of tokens (mintFor) ends here: this mint moves
	// the counter past it, so the next holder mints anew.
	l.mu.Lock()
	k.sess.tokenNext = 0
	l.mu.Unlock()
	tok, err := l.cfg.fence.mint(fctx, tx, k.q.name, 1)
	if err != nil {
		if cause := context.Cause(fctx); fctx.Err() != nil && cause != nil {
			return errors.Join(cause, err)
		}
		return err
	}
	k.token.Store(tok)
	if err := fn(fctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("namedlock: DoTx %q: commit: %w", k.key, err)
	}
	committed = true
	return nil
}
