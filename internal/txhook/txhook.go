// Package txhook lets package namedlock/sqlxlock run a Locker's DoTx on a
// transaction it begins itself (a *sqlx.Tx, whose driver name and mapper
// only sqlx can set), without package namedlock importing sqlx or exporting
// a hook.
package txhook

import (
	"context"
	"database/sql"
)

// Begin begins DoTx's transaction on its database with the options DoTx
// chose (the caller's, or SERIALIZABLE with the serializable handoff). DoTx
// calls it at most once per call.
type Begin func(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)

// DoTx is set by package namedlock, at init, to (*namedlock.Locker).DoTx
// for l (a *namedlock.Locker) whose transaction begin begins instead of
// db.BeginTx; db is the database begin begins on.
var DoTx func(ctx context.Context, l any, key string, db *sql.DB, opts *sql.TxOptions, begin Begin, fn func(ctx context.Context, tx *sql.Tx) error) error
