package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	// refuseLevel and mintInTx.
	kind atomic.Int32
}

// ErrWriteConflict: on TiDB, a fenced [Locker.DoTx]'s transaction was
// rolled back after the server reported a write conflict (TiDB error 9007,
// which stays matchable): at the mint, in one of fn's statements (which fn
// returned), or at the COMMIT. Nothing of the transaction was committed;
// run it again.
var ErrWriteConflict = errors.New("namedlock: write conflict: the transaction was rolled back")

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

// mintInTx mints a fenced DoTx's token inside tx, its transaction (fn's
// ctx, which a loss of the lock ends). On TiDB it first reads, in tx,
// whether the session's transactions are pessimistic, and refuses an
// optimistic one with ErrFencing: an optimistic transaction takes no lock
// at its mint, so it would wait for nobody and fail at its COMMIT behind
// any other holder.
func (f *fenceTable) mintInTx(ctx context.Context, tx *sql.Tx, key, name string) (uint64, error) {
	return f.mintBlockInTx(ctx, tx, key, name, 1)
}

// mintBlockInTx is mintInTx for n tokens: it returns the first.
func (f *fenceTable) mintBlockInTx(ctx context.Context, tx *sql.Tx, key, name string, n uint64) (uint64, error) {
	if f.snapshotAtFirst() {
		var pessimistic bool
		if err := tx.QueryRowContext(ctx, "SELECT "+flavor.TxnModeExpr).Scan(&pessimistic); err != nil {
			return 0, fail(key, "", "no fencing token minted in "+f.quoted+": read the transaction mode: "+err.Error(), err)
		}
		if !pessimistic {
			return 0, fail(key, "", "fencing misconfigured: the application's session runs TiDB transactions in optimistic mode (tidb_txn_mode is not 'pessimistic'): a fenced DoTx there takes no lock at its mint, so it cannot wait for the previous holder's commit; set tidb_txn_mode = 'pessimistic' (TiDB's default) for the pool given to WithFencing", ErrFencing)
		}
	}
	return f.mint(ctx, tx, key, name, n)
}

// refuseLevel returns the error of a fenced DoTx asked for isolation on a
// server where it cannot be fenced, nil otherwise. On TiDB a transaction at
// a level that keeps one snapshot (REPEATABLE READ, which is also TiDB's
// default, and READ UNCOMMITTED and SERIALIZABLE, which TiDB runs as
// snapshots when tidb_skip_isolation_level_check is on) reads from a
// snapshot taken at its first statement. The mint may wait for the fence
// row behind another transaction, and a write that commits meanwhile
// without touching the fence row (a zombie holder's CheckFenced write) is
// older than the mint's token but newer than that snapshot: fn would read
// around it. Nothing in TiDB moves a transaction's snapshot forward, so
// only READ COMMITTED, whose statements each read the latest commit, is
// fenced there. The default level runs as READ COMMITTED there
// (txOptions); any other level is refused.
func (f *fenceTable) refuseLevel(key string, isolation sql.IsolationLevel) error {
	if !f.snapshotAtFirst() || isolation == sql.LevelReadCommitted || isolation == sql.LevelDefault {
		return nil
	}
	level := strings.ToUpper(isolation.String())
	return fail(key, "", "fencing misconfigured: DoTx at "+level+" cannot be fenced on TiDB, whose transactions at that level read from a snapshot taken at their first statement, which can be older than a commit made while the mint waited: ask for the default level or READ COMMITTED (&sql.TxOptions{Isolation: sql.LevelReadCommitted}), which on TiDB read the latest commit at every statement", ErrFencing, ErrInvalidArgument)
}

// txOptions returns the options a fenced DoTx begins its transaction with:
// opts, except on a server whose transactions read from a snapshot taken at
// their first statement (TiDB), where a DoTx that asks for the default
// level gets READ COMMITTED (see refuseLevel).
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
