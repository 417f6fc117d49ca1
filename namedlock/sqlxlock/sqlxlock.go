// Package sqlxlock runs [namedlock.Locker.DoTx] with sqlx's transaction
// type, for applications that use [github.com/jmoiron/sqlx]. It is the only
// part of this module's lock API that imports sqlx.
package sqlxlock

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/txhook"
	"github.com/namedlock/mysql/namedlock"
)

// DoTx is l.DoTx(ctx, key, db.DB, opts, …) with fn given a *sqlx.Tx: the
// transaction is begun by db.BeginTxx, so it carries db's driver name (for
// Rebind and named queries), its mapper and its Unsafe setting, as any
// transaction of db does. Everything else — when the transaction begins,
// the isolation level it runs at, when it commits, what the result means
// (nil exactly when it committed; [namedlock.ErrCommitUnknown] when its
// COMMIT's outcome is unknown), fencing and the serializable handoff — is
// [namedlock.Locker.DoTx]'s. A nil l, db or fn returns an error matching
// [namedlock.ErrInvalidArgument] before anything is locked.
func DoTx(ctx context.Context, l *namedlock.Locker, key string, db *sqlx.DB, opts *sql.TxOptions, fn func(ctx context.Context, tx *sqlx.Tx) error) error {
	if db == nil || db.DB == nil {
		return txhook.DoTx(ctx, l, key, nil, opts, nil, nil)
	}
	var tx *sqlx.Tx
	begin := func(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
		t, err := db.BeginTxx(ctx, opts)
		if err != nil {
			return nil, err
		}
		tx = t
		return t.Tx, nil
	}
	var run func(ctx context.Context, _ *sql.Tx) error
	if fn != nil {
		run = func(ctx context.Context, _ *sql.Tx) error { return fn(ctx, tx) }
	}
	return txhook.DoTx(ctx, l, key, db.DB, opts, begin, run)
}
