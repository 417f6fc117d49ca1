package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/namedlock/sqlxlock"
)

// Review r1 (DoTx's one result): each test below is a finding, failing on
// the code it was written against.

// TestReviewR1FnCommitsItself: fn commits the transaction itself
// (tx.Commit(), the natural thing for code moved into a DoTx from a
// function that used to own its transaction) and returns nil. The
// transaction committed, but DoTx's own Commit then returns sql.ErrTxDone,
// which commitRefused reads as "the COMMIT was not applied": DoTx returns
// an error that is not ErrCommitUnknown, i.e. "nothing was committed, run
// it again". A caller that retries on that error applies the transaction
// twice. Nothing in DoTx's doc forbids fn to commit (DoBatch's does, and
// detects it with ErrSectionEndedTx; DoTx does neither). Deterministic, in
// every mode, through DoTx and sqlxlock.DoTx, on MariaDB and MySQL.
func TestReviewR1FnCommitsItself(t *testing.T) {
	srv := testdb.RequireReal(t)
	for _, mode := range txModes {
		for _, via := range []string{"DoTx", "sqlxlock.DoTx"} {
			t.Run(mode.name+"/"+via, func(t *testing.T) {
				skipUnsupportedMode(t, srv, mode)
				app := openPool(t, srv.DSN)
				hist := historyTable(t, app)
				l := newInstance(t, srv.DSN, mode.opts(t, app)...).locker
				key := uniqueKey(t, "fncommit")
				sec := mode.name + "/" + via
				fn := func(ctx context.Context, tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, "INSERT INTO "+hist+" (sec) VALUES (?)", sec); err != nil {
						return err
					}
					return tx.Commit()
				}
				ctx := testCtx(t, 30*time.Second)
				var err error
				if via == "DoTx" {
					err = l.DoTx(ctx, key, app, nil, fn)
				} else {
					err = sqlxlock.DoTx(ctx, l, key, sqlx.NewDb(app, "mysql"), nil, func(ctx context.Context, tx *sqlx.Tx) error {
						return fn(ctx, tx.Tx)
					})
				}
				committed := inHistory(t, app, hist, sec)
				t.Logf("%s: DoTx = %v; committed: %v", srv.Name, err, committed)
				checkResult(t, sec, err, committed)
			})
		}
	}
}

// TestReviewR1FnEndsTxThenFails: fn's statement ends the transaction (a
// COMMIT sent through tx, as a stored procedure or a migration helper
// would; or tx.Commit()), and fn then returns an error. DoTx's doc says
// the transaction "is rolled back when fn returns an error", and DoTx
// returns fn's error, not ErrCommitUnknown: "nothing was committed". The
// rows written before the COMMIT are committed. DoBatch detects a section
// that ended the transaction (ErrSectionEndedTx, "may have been
// committed"); DoTx does not. Deterministic, every mode, MariaDB and MySQL.
func TestReviewR1FnEndsTxThenFails(t *testing.T) {
	srv := testdb.RequireReal(t)
	for _, mode := range txModes {
		for _, how := range []string{"exec COMMIT", "tx.Commit"} {
			t.Run(mode.name+"/"+how, func(t *testing.T) {
				skipUnsupportedMode(t, srv, mode)
				app := openPool(t, srv.DSN)
				hist := historyTable(t, app)
				l := newInstance(t, srv.DSN, mode.opts(t, app)...).locker
				key := uniqueKey(t, "fnends")
				sec := mode.name + "/" + how
				ctx := testCtx(t, 30*time.Second)
				err := l.DoTx(ctx, key, app, nil, func(ctx context.Context, tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, "INSERT INTO "+hist+" (sec) VALUES (?)", sec); err != nil {
						return err
					}
					if how == "tx.Commit" {
						if err := tx.Commit(); err != nil {
							return err
						}
					} else if _, err := tx.ExecContext(ctx, "COMMIT"); err != nil {
						return err
					}
					return errors.New("fn: a later step failed")
				})
				committed := inHistory(t, app, hist, sec)
				t.Logf("%s: DoTx = %v; committed: %v", srv.Name, err, committed)
				checkResult(t, sec, err, committed)
			})
		}
	}
}

var (
	_ = sync.Mutex{}
	_ atomic.Int64
	_ = keyfmt.Portable
	_ = namedlock.ErrLockLost
)
