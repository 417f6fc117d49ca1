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
// sees its writes. It is rolled back when fn returns an error or panics, or
// when the lock is lost before the commit (DoTx then returns an error
// matching [ErrLockLost]). db must not be the lock pool.
//
// A lock is not a fencing token: a lock lost between the final check and the
// COMMIT reaching the server cannot be detected. Keep the work inside the
// transaction, where a lost lock cancels fn's ctx and rolls it back.
func (l *Locker) DoTx(ctx context.Context, key string, db *sqlx.DB, opts *sql.TxOptions, fn func(ctx context.Context, tx *sqlx.Tx) error) error {
	if db == nil {
		return fmt.Errorf("%w: DoTx: nil *sqlx.DB", ErrInvalidOption)
	}
	k, err := l.Acquire(ctx, key)
	if err != nil {
		return err
	}
	return l.run(ctx, []*Lock{k}, func(ctx context.Context) (err error) {
		tx, err := db.BeginTxx(ctx, opts)
		if err != nil {
			return fmt.Errorf("namedlock: DoTx %q: begin: %w", key, err)
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
			return fmt.Errorf("namedlock: DoTx %q: commit: %w", key, err)
		}
		committed = true
		return nil
	})
}
