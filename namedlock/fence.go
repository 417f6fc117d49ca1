package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"

	"github.com/namedlock/mysql/internal/sqlident"
)

// Fencing tokens (see "Fencing" in the package docs): a fence table in the
// application's database holds one row per lock name and a counter that
// every new holder increments in one statement.

// DefaultFenceTable is a name for the fence table, for callers with no
// reason to choose another.
const DefaultFenceTable = "namedlock_fence"

// errNumNoSuchTable is ER_NO_SUCH_TABLE (MySQL and MariaDB).
const errNumNoSuchTable = 1146

// errNumLockWaitTimeout is ER_LOCK_WAIT_TIMEOUT: an InnoDB row lock wait
// passed innodb_lock_wait_timeout.
const errNumLockWaitTimeout = 1205

// fenceTable is the fence table of a Locker with fencing: it mints the
// tokens.
type fenceTable struct {
	db       *sql.DB // the application's database, holding the table
	table    string  // as the caller named it
	quoted   string  // as statements name it
	verified atomic.Bool
	// kind is db's flavor.Flavor, learned by verify. On TiDB a
	// transaction's snapshot is taken at its first statement, before the
	// mint waited for the fence row (flavor.SnapshotAtFirstStatement): see
	// txOptions and mintInTx.
	kind atomic.Int32
}

// ErrWriteConflict: on TiDB, a fenced [Locker.DoTx]'s transaction was
// rolled back because the server found the fence row written by another
// transaction after the snapshot it read from (TiDB error 9007, "Write
// conflict", which stays matchable, when the server sent it): at its
// COMMIT, or before fn ran, when 5 fresh transactions in a row each found
// the fence row committed past its snapshot. Nothing of the transaction
// was committed; run it again.
var ErrWriteConflict = errors.New("namedlock: write conflict on the fence row: the transaction was rolled back")

// createStatement is the CREATE TABLE of a fence table: one row per lock
// name (portable names are ASCII, at most 64 characters), one counter.
func createStatement(quoted string) string {
	return "CREATE TABLE IF NOT EXISTS " + quoted + " (" +
		"name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY, " +
		"token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"
}

// CreateFenceTable creates the fence table named table (name or
// schema.name) in db, the application's database, if it does not exist.
// Call it once, explicitly, as for a migration: [WithFencing] never creates
// it. A nil db, or a table name that is not one or two plain identifiers,
// returns an error matching [ErrInvalidArgument]. The statement it runs is
//
//	CREATE TABLE IF NOT EXISTS `table` (
//	  name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
//	  token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB
func CreateFenceTable(ctx context.Context, db *sql.DB, table string) error {
	if db == nil {
		return fail("", "", "invalid argument: CreateFenceTable: nil *sql.DB", ErrInvalidArgument)
	}
	quoted, err := sqlident.Quote(table)
	if err != nil {
		return fail("", "", "invalid argument: CreateFenceTable: "+err.Error(), ErrInvalidArgument, err)
	}
	if _, err := db.ExecContext(ctx, createStatement(quoted)); err != nil {
		return fail("", "", "create the fence table "+quoted+": "+err.Error(), err)
	}
	return nil
}

// verify makes sure, once per Locker and before its first lock, that the
// fence table exists: a missing table is an error that names it and the
// statement that creates it.
func (f *fenceTable) verify(ctx context.Context) error {
	if f.verified.Load() {
		return nil
	}
	var n int
	err := f.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+f.quoted+" WHERE 1 = 0").Scan(&n)
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == errNumNoSuchTable:
		return fail("", "", "fencing misconfigured: the fence table "+f.quoted+" does not exist: create it once with namedlock.CreateFenceTable ("+createStatement(f.quoted)+")", ErrFencing, err)
	case err != nil:
		return fail("", "", "check the fence table "+f.quoted+": "+err.Error(), err)
	}
	kind, _, err := flavor.Detect(ctx, f.db)
	if err != nil {
		return fail("", "", "check the fence table "+f.quoted+": "+err.Error(), err)
	}
	f.kind.Store(int32(kind))
	f.verified.Store(true)
	return nil
}

// snapshotAtFirst reports whether db's transactions read from a snapshot
// taken at their first statement, even one that then waited for a row
// lock (TiDB).
func (f *fenceTable) snapshotAtFirst() bool {
	return flavor.Flavor(f.kind.Load()).SnapshotAtFirstStatement()
}

// txOptions returns the options a fenced DoTx begins its transaction with:
// opts, except on a server whose transactions read from a snapshot taken
// at their first statement (TiDB), where a transaction that asks for the
// default isolation gets READ COMMITTED: its mint may wait for the fence
// row until the previous holder's transaction commits, and its reads must
// see that commit, which READ COMMITTED's per-statement snapshots do. Other
// levels are kept as asked; mintInTx makes their single snapshot come after
// the previous holder's commit.
func (f *fenceTable) txOptions(opts *sql.TxOptions) *sql.TxOptions {
	if !f.snapshotAtFirst() || (opts != nil && opts.Isolation != sql.LevelDefault) {
		return opts
	}
	o := sql.TxOptions{Isolation: sql.LevelReadCommitted}
	if opts != nil {
		o.ReadOnly = opts.ReadOnly
	}
	return &o
}

// maxSnapshotRetries bounds how many fresh transactions mintInTx begins
// when each one's snapshot predates a commit of the fence row. A retry
// follows a commit of another fenced transaction on the key between the
// snapshot and the mint: the one this DoTx was handed the lock by early
// (one retry), or a zombie holder of another instance.
const maxSnapshotRetries = 5

// rowQueryer is what mintInTx reads through: *sql.Tx and *sqlx.Tx.
type rowQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// mintInTx mints a fenced DoTx's token inside tx, its transaction, begun
// by begin at isolation (sql.LevelDefault when opts asked for none), and
// returns the transaction the token is in with it: tx, or on TiDB a
// transaction begun anew. Statements run on fctx; begin gets ctx, the
// caller's, on which the transaction lives. On a failure the transaction
// returned may already be rolled back (Rollback then does nothing).
//
// Elsewhere it is the mint alone. On TiDB (f.snapshotAtFirst), first, in
// one round trip, it reads whether the session's transactions are
// pessimistic, refusing an optimistic one with ErrFencing (it would take
// no lock at its mint and fail at its COMMIT behind any other holder),
// and, for a transaction that keeps one snapshot (every level but READ
// COMMITTED, to which txOptions maps the default), reads the fence row's
// token from that snapshot. The mint then waits for the row as everywhere
// and returns the token after the newest one committed. If that is not the
// snapshot's token + 1, a holder committed after the snapshot was taken
// and fn would not see its writes: tx is rolled back and a new one begun,
// whose snapshot comes after that commit. No fenced DoTx of this Locker
// can mint in between (the lock is handed on only after this mint); a
// zombie holder of another instance can, which costs one more retry. A
// write conflict at the mint (TiDB's SERIALIZABLE, which reads and writes
// at its snapshot and fails instead of waiting past it) is the same news
// and gets the same retry.
func mintInTx[T txn](ctx, fctx context.Context, f *fenceTable, tx T, begin func(context.Context) (T, error), isolation sql.IsolationLevel, key, name string) (T, uint64, error) {
	if !f.snapshotAtFirst() {
		tok, err := f.mint(fctx, tx, key, name, 1)
		return tx, tok, err
	}
	snapshot := isolation != sql.LevelDefault && isolation != sql.LevelReadCommitted
	var lastErr error
	for range maxSnapshotRetries {
		q, ok := any(tx).(rowQueryer)
		if !ok {
			return tx, 0, fail(key, "", "fenced transaction cannot read (no QueryRowContext)", ErrFencing)
		}
		var pessimistic bool
		var before sql.NullInt64
		var err error
		if snapshot {
			err = q.QueryRowContext(fctx, "SELECT "+flavor.TxnModeExpr+", (SELECT token FROM "+f.quoted+" WHERE name = ?)", name).Scan(&pessimistic, &before)
		} else {
			err = q.QueryRowContext(fctx, "SELECT "+flavor.TxnModeExpr).Scan(&pessimistic)
		}
		if err != nil {
			return tx, 0, fail(key, "", "no fencing token minted in "+f.quoted+": read the transaction mode: "+err.Error(), err)
		}
		if !pessimistic {
			return tx, 0, fail(key, "", "fencing misconfigured: the application's session runs TiDB transactions in optimistic mode (tidb_txn_mode is not 'pessimistic'): a fenced DoTx there takes no lock at its mint, so it cannot wait for the previous holder's commit; set tidb_txn_mode = 'pessimistic' (TiDB's default) for the pool given to WithFencing", ErrFencing)
		}
		tok, err := f.mint(fctx, tx, key, name, 1)
		switch {
		case err == nil && (!snapshot || tok == uint64(before.Int64)+1):
			return tx, tok, nil
		case err == nil:
			lastErr = fmt.Errorf("the transaction's snapshot has token %d, the mint %d", before.Int64, tok)
		case errors.Is(err, ErrWriteConflict) && snapshot:
			lastErr = err
		default:
			return tx, 0, err
		}
		// A commit of the fence row came after this snapshot: again, in a
		// transaction whose snapshot comes after it.
		_ = tx.Rollback()
		next, err := begin(ctx)
		if err != nil {
			return tx, 0, fail(key, "", "begin again after a commit of the fence row newer than the transaction's snapshot: "+err.Error(), err)
		}
		tx = next
	}
	return tx, 0, fail(key, "", fmt.Sprintf("the fence row %s was committed past the transaction's snapshot %d times in a row (%v)", f.quoted, maxSnapshotRetries, lastErr), ErrWriteConflict, lastErr)
}

// execer runs a statement: a *sql.DB (autocommit) or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// mintStatement is the one statement that mints name's next n tokens: it
// moves the row's counter up by n (from 0 for a new row) and returns the new
// value as LAST_INSERT_ID. name is a server lock name (keyfmt.Portable: a-z
// 0-9 - _ . : / #, never a quote or a backslash), so it is written into the
// statement as a literal and the statement needs no server-side prepare,
// whatever the DSN of db says.
func (f *fenceTable) mintStatement(name string, n uint64) string {
	ns := strconv.FormatUint(n, 10)
	return "INSERT INTO " + f.quoted + " (name, token) VALUES ('" + name + "', LAST_INSERT_ID(" + ns + ")) " +
		"ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + " + ns + ")"
}

// literalSafe reports whether name can be written into a statement as a
// single-quoted literal as is.
func literalSafe(name string) bool {
	for _, c := range []byte(name) {
		if c == '\'' || c == '\\' || c < ' ' || c > '~' {
			return false
		}
	}
	return name != ""
}

// mint runs the mint statement for name's next n tokens on ex and returns
// the first of them: on the application's pool (autocommit: the tokens are
// never handed out again) or inside a transaction (the row then stays
// locked by it until it ends). key, whose server name is name, is for
// errors.
func (f *fenceTable) mint(ctx context.Context, ex execer, key, name string, n uint64) (uint64, error) {
	var res sql.Result
	var err error
	if literalSafe(name) {
		res, err = ex.ExecContext(ctx, f.mintStatement(name, n))
	} else {
		res, err = ex.ExecContext(ctx, "INSERT INTO "+f.quoted+" (name, token) VALUES (?, LAST_INSERT_ID(?)) "+
			"ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + ?)", name, n, n)
	}
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == errNumLockWaitTimeout {
			return 0, fail(key, "not acquired", "an earlier holder's transaction kept the fence row locked past innodb_lock_wait_timeout ("+err.Error()+")", ErrNotAcquired, ErrFenceWait, err)
		}
		if flavor.IsWriteConflict(err) {
			return 0, fail(key, "", "no fencing token minted in "+f.quoted+": another transaction wrote the fence row after this one's snapshot ("+err.Error()+")", ErrWriteConflict, err)
		}
		return 0, fail(key, "", "no fencing token minted in "+f.quoted+": "+err.Error(), err)
	}
	last, err := res.LastInsertId()
	if err != nil || uint64(last) < n {
		return 0, fail(key, "", fmt.Sprintf("no fencing token minted in %s: none returned (%v)", f.quoted, err), err)
	}
	return uint64(last) - n + 1, nil
}

// CheckFenced checks the result of a fenced write outside [Locker.DoTx]: an
// UPDATE that sets the row's fence column to the holder's token and
// matches only a row whose fence is smaller, for example
//
//	err := namedlock.CheckFenced(db.ExecContext(ctx,
//		"UPDATE products SET stock = ?, fence = ? WHERE id = ? AND fence < ?",
//		stock, token, id, token))
//
// It returns err when err is not nil, [ErrStaleToken] when the statement
// changed no row, and nil otherwise. Because the write moves the fence
// forward, a matched row always counts as changed; use one such write per
// token, or several in one transaction.
func CheckFenced(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrStaleToken
	}
	return nil
}
