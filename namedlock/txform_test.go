package namedlock_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/namedlock/sqlxlock"
)

// testTx is what the DoTx tests do in a transaction: both *sqlx.Tx
// (sqlxlock.DoTx) and *sql.Tx (Locker.DoTx) can.
type testTx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// txForm is one form of DoTx: sqlx (sqlxlock.DoTx, the sqlx form over
// Locker.DoTx) or database/sql (Locker.DoTx). The DoTx tests run over both.
type txForm struct {
	name string
	do   func(l *namedlock.Locker, ctx context.Context, key string, db *sqlx.DB, fn func(ctx context.Context, tx testTx) error) error
}

var txForms = []txForm{
	{"sqlx", func(l *namedlock.Locker, ctx context.Context, key string, db *sqlx.DB, fn func(context.Context, testTx) error) error {
		return sqlxlock.DoTx(ctx, l, key, db, nil, func(ctx context.Context, tx *sqlx.Tx) error { return fn(ctx, tx) })
	}},
	{"sql", func(l *namedlock.Locker, ctx context.Context, key string, db *sqlx.DB, fn func(context.Context, testTx) error) error {
		var sdb *sql.DB
		if db != nil {
			sdb = db.DB
		}
		return l.DoTx(ctx, key, sdb, nil, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, tx) })
	}},
}

// forEachTxForm runs test as a subtest for each form of DoTx.
func forEachTxForm(t *testing.T, test func(t *testing.T, form txForm)) {
	t.Helper()
	for _, form := range txForms {
		t.Run(form.name, func(t *testing.T) { test(t, form) })
	}
}
