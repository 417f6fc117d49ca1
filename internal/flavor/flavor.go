package flavor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Flavor is a kind of MySQL-compatible server.
type Flavor int

// The flavors. The zero Flavor, Unknown, is not a server.
const (
	// Unknown is no server: not detected yet.
	Unknown Flavor = iota
	// MySQL is Oracle MySQL or any server that is none of the other kinds
	// (Percona Server, ...).
	MySQL
	// MariaDB is a server whose VERSION() contains "MariaDB".
	MariaDB
	// Embedded is go-mysql-server (@@version_comment "Dolt"), such as the
	// in-process server of package internal/embedded.
	Embedded
	// TiDB is a server whose VERSION() contains "TiDB": its GET_LOCK is a
	// pessimistic lock on a row of mysql.advisory_locks, taken by an
	// internal transaction that is never committed (see the package
	// documentation for what follows from that).
	TiDB
)

// VersionQuery is the statement Detect runs: its two columns are the
// arguments of Of.
const VersionQuery = "SELECT VERSION(), @@version_comment"

// Of classifies a server by what it answers to VersionQuery: MariaDB when
// version contains "MariaDB", TiDB when it contains "TiDB" (both
// case-insensitively), Embedded when comment is "Dolt" (go-mysql-server
// calls itself "8.0.31"), else MySQL. It never returns Unknown.
func Of(version, comment string) Flavor {
	v := strings.ToLower(version)
	switch {
	case strings.Contains(v, "mariadb"):
		return MariaDB
	case strings.Contains(v, "tidb"):
		return TiDB
	case strings.EqualFold(comment, "Dolt"):
		return Embedded
	}
	return MySQL
}

// Detect runs VersionQuery on q (a *sql.DB, *sql.Conn or *sql.Tx) and
// returns the server's Flavor (Of) and its VERSION(). On error it returns
// Unknown and the error.
func Detect(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (Flavor, string, error) {
	var version string
	var comment sql.NullString
	if err := q.QueryRowContext(ctx, VersionQuery).Scan(&version, &comment); err != nil {
		return Unknown, "", err
	}
	return Of(version, comment.String), version, nil
}

// String returns "MySQL", "MariaDB", "go-mysql-server", "TiDB", or
// "Flavor(N)" for any other value (Unknown included).
func (f Flavor) String() string {
	switch f {
	case MySQL:
		return "MySQL"
	case MariaDB:
		return "MariaDB"
	case Embedded:
		return "go-mysql-server"
	case TiDB:
		return "TiDB"
	}
	return fmt.Sprintf("Flavor(%d)", int(f))
}

// FractionalTimeouts reports whether GET_LOCK takes fractional seconds
// (MariaDB). The others take whole seconds: MySQL and go-mysql-server
// round (MySQL: 0.4 to 0, 0.5 to 1), TiDB waits at least 1 s.
func (f Flavor) FractionalTimeouts() bool { return f == MariaDB }

// WaitsIgnoreCancel reports whether a GET_LOCK wait ignores its client's
// disconnect and KILL, ending only at its own timeout or when the lock is
// granted (Embedded, TiDB). A cancelled wait then lingers at the server
// until its timeout, so waits there go in slices of 1 s (WaitArg).
func (f Flavor) WaitsIgnoreCancel() bool { return f == Embedded || f == TiDB }

// NamesHolder reports whether IS_USED_LOCK(name), run by a session that
// does not hold the lock, answers the holder's connection id. TiDB answers
// 1 for a held lock (after waiting 1 s for it; NULL for a free one, as the
// others), and nothing else there names a named lock's holder.
func (f Flavor) NamesHolder() bool { return f != TiDB }

// SnapshotAtFirstStatement reports whether a repeatable-read transaction
// reads from a snapshot taken at its first statement even when that
// statement is a write that waited for a row lock (TiDB: its start
// timestamp), rather than at its first plain read (InnoDB). A transaction
// that must read what the holder of a row lock it waited for committed
// needs READ COMMITTED there.
func (f Flavor) SnapshotAtFirstStatement() bool { return f == TiDB }

// DetectsDeadlocks reports whether the server refuses a GET_LOCK wait that
// would deadlock with another session's (MySQL error 3058, MariaDB 1213:
// IsDeadlock). Embedded and TiDB do not: two sessions that wait for each
// other's lock both wait until their timeouts.
func (f Flavor) DetectsDeadlocks() bool { return f == MySQL || f == MariaDB }

// TryWaits reports whether GET_LOCK(name, 0) on a lock held by another
// session waits before it answers 0, instead of answering at once: TiDB
// waits 1 s, its shortest lock wait (innodb_lock_wait_timeout is at least
// 1). TryProbe is the fast answer there.
func (f Flavor) TryWaits() bool { return f == TiDB }

// NeedsInterpolation reports whether GET_LOCK and RELEASE_LOCK must not run
// as server-side prepared statements on this server: on TiDB (binary
// protocol and its plan cache, both defaults) a prepared
// SELECT GET_LOCK(?, 0) takes two references to the lock and a prepared
// SELECT RELEASE_LOCK(?) drops two, so a lock taken once by another form
// of the statement is released with an answer of 0, and references can be
// left behind. With the driver's interpolateParams=true (pool.Open sets it)
// every statement is a plain query.
func (f Flavor) NeedsInterpolation() bool { return f == TiDB }

// longestWait is the timeout sent to GET_LOCK when the caller has no
// deadline: one year. Every server that gets it takes it as it is (MySQL
// clamps a larger timeout to 2^31-1 s, about 68 years; MariaDB takes any).
// The server answers 0 after that and the caller simply renews the wait.
const longestWait = 365 * 24 * 3600

// WaitArg encodes a GET_LOCK timeout for the time left before a caller's
// deadline, as this server can express it. hasDeadline=false means there is
// no deadline (left is then ignored). With a deadline, left must be > 0: a
// deadline already passed is the caller's to handle, without GET_LOCK.
//
// It returns the argument to send, and hard=true when the server's own
// timeout would end after the deadline, so the caller's ctx must cut the
// wait (and the waiting session be ended).
//
//   - No deadline: a long wait, one year in seconds (int64); 1 s on a
//     server whose waits ignore cancellation (WaitsIgnoreCancel: Embedded,
//     TiDB), so that a wait its caller gave up on lingers there at most a
//     second. With a deadline such a server also waits at most 1 s per
//     statement.
//   - MariaDB: left in seconds, rounded up to the millisecond (float64), so
//     the server's timeout ends with the deadline.
//   - Others: they take whole seconds only, so the whole seconds left
//     (int64, at most the longest wait above), which end at or before the
//     deadline: the caller renews the wait. With less than 1 s left, 0
//     would not wait at all, so int64(1) with hard=true.
func (f Flavor) WaitArg(left time.Duration, hasDeadline bool) (arg any, hard bool) {
	longest := int64(longestWait)
	if f.WaitsIgnoreCancel() {
		longest = 1
	}
	if !hasDeadline {
		return longest, false
	}
	if f.FractionalTimeouts() {
		return math.Ceil(left.Seconds()*1000) / 1000, false
	}
	if left >= time.Second {
		return min(int64(left/time.Second), longest), false
	}
	return int64(1), true
}

// MySQL and MariaDB error numbers of a refused deadlocking wait.
const (
	errNumMariaDBDeadlock = 1213 // ER_LOCK_DEADLOCK
	errNumMySQLDeadlock   = 3058 // ER_USER_LOCK_DEADLOCK
)

// IsDeadlock reports whether err is, or wraps, a server error saying that a
// GET_LOCK wait would deadlock: a *mysql.MySQLError numbered 1213 (MariaDB's
// ER_LOCK_DEADLOCK) or 3058 (MySQL's ER_USER_LOCK_DEADLOCK).
func IsDeadlock(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return me.Number == errNumMariaDBDeadlock || me.Number == errNumMySQLDeadlock
}

// ErrNodeLocal is the error CheckTopology returns for a Galera or Percona
// XtraDB Cluster node with wsrep_on=ON. Its refusal of Group Replication in
// multi-primary mode, [ErrMultiPrimary], matches it too.
var ErrNodeLocal = errors.New("wsrep_on=ON (Galera / Percona XtraDB Cluster): named locks are node-local and some releases refuse them")

// ErrMultiPrimary is the error CheckTopology returns (wrapped, with the
// number of members) for a member of a MySQL Group Replication group in
// multi-primary mode: every member takes writes, and each keeps its own
// named locks. errors.Is(err, ErrNodeLocal) is true for it as well.
var ErrMultiPrimary error = nodeLocalError("group_replication_single_primary_mode=OFF (Group Replication multi-primary): named locks are node-local, each member grants its own")

// nodeLocalError is a refusal of CheckTopology other than ErrNodeLocal
// itself, which matches ErrNodeLocal.
type nodeLocalError string

func (e nodeLocalError) Error() string        { return string(e) }
func (e nodeLocalError) Is(target error) bool { return target == ErrNodeLocal }

// topologyQuery reads, in one round trip, the variables CheckTopology
// looks at. A server without one (MariaDB has no Group Replication, MySQL
// has wsrep_on only with Galera's patches, the variables of Group
// Replication exist only while its plugin is installed) answers no row for
// it.
const topologyQuery = "SHOW VARIABLES WHERE Variable_name IN ('wsrep_on', 'group_replication_single_primary_mode')"

// onlineMembersQuery counts the ONLINE members of the server's Group
// Replication group (0 when the server is in none).
const onlineMembersQuery = "SELECT COUNT(*) FROM performance_schema.replication_group_members WHERE MEMBER_STATE = 'ONLINE'"

// CheckTopology refuses a server where named locks are node-local:
//
//   - a Galera or Percona XtraDB Cluster node with wsrep_on=ON:
//     ErrNodeLocal;
//   - a member of a MySQL Group Replication group in multi-primary mode
//     (group_replication_single_primary_mode=OFF) with more than one ONLINE
//     member in performance_schema.replication_group_members: an error
//     wrapping ErrMultiPrimary (which also matches ErrNodeLocal). In
//     single-primary mode the locks are meaningful on the primary, as on
//     any primary with replicas, and are lost on failover.
//
// It returns an error saying what could not be read when a query fails,
// and nil otherwise (a server without these variables included). Its
// errors wrap no sentinel of the caller's: a caller tells a refusal from a
// failure with errors.Is(err, ErrNodeLocal).
func CheckTopology(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, topologyQuery)
	if err != nil {
		return fmt.Errorf("read wsrep_on and group_replication_single_primary_mode: %w", err)
	}
	var wsrepOn, singlePrimary string
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			_ = rows.Close()
			return fmt.Errorf("read wsrep_on and group_replication_single_primary_mode: %w", err)
		}
		switch strings.ToLower(name) {
		case "wsrep_on":
			wsrepOn = value
		case "group_replication_single_primary_mode":
			singlePrimary = value
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read wsrep_on and group_replication_single_primary_mode: %w", err)
	}
	if strings.EqualFold(wsrepOn, "ON") {
		return ErrNodeLocal
	}
	if !strings.EqualFold(singlePrimary, "OFF") && singlePrimary != "0" {
		return nil
	}
	var online int
	if err := db.QueryRowContext(ctx, onlineMembersQuery).Scan(&online); err != nil {
		return fmt.Errorf("group_replication_single_primary_mode=OFF, and the ONLINE members of the group could not be read: %w", err)
	}
	if online > 1 {
		return fmt.Errorf("%w (%d ONLINE members)", ErrMultiPrimary, online)
	}
	return nil
}

// Server error numbers of a wait ended by the server, not by its client.
const (
	errNumInterrupted      = 1317 // ER_QUERY_INTERRUPTED: KILL QUERY (MySQL; MariaDB outside the wait)
	errNumMySQLTimeout     = 3024 // ER_QUERY_TIMEOUT: max_execution_time (MySQL, TiDB)
	errNumMariaDBTimeout   = 1969 // ER_STATEMENT_TIMEOUT: max_statement_time (MariaDB)
	errNumUnknownVariable  = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE
	errNumBadLockName      = 3057 // ER_USER_LOCK_WRONG_NAME (MySQL: empty, bad charset, over 64 characters before 8.4)
	errNumOverlongLockName = 4163 // ER_USER_LOCK_OVERLONG_NAME (MySQL 8.4 and later: over 64 characters)
	errNumTooLongIdent     = 1059 // ER_TOO_LONG_IDENT (MariaDB: a lock name over 192 bytes)
)

// IsWaitKilled reports whether err is, or wraps, a server error saying that
// the statement was ended by the server while it ran: error 1317 (an
// operator's KILL QUERY; MySQL fails a waiting GET_LOCK with it, where
// MariaDB answers NULL), 3024 (MySQL's max_execution_time; TiDB's does not
// end a GET_LOCK wait) or 1969 (MariaDB's max_statement_time).
func IsWaitKilled(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case errNumInterrupted, errNumMySQLTimeout, errNumMariaDBTimeout:
		return true
	}
	return false
}

// IsBadLockName reports whether err is, or wraps, a server error refusing a
// lock name: MySQL's 3057 (empty, not convertible to its character set,
// or, before 8.4, over 64 characters) or 4163 (MySQL 8.4: over 64
// characters), or MariaDB's 1059 (over 192 bytes). keyfmt.Portable never
// produces such a name.
func IsBadLockName(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case errNumBadLockName, errNumOverlongLockName, errNumTooLongIdent:
		return true
	}
	return false
}

// IsUnknownVariable reports whether err is, or wraps, the server's error
// 1193: a SET of a system variable this server does not have.
func IsUnknownVariable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errNumUnknownVariable
}

// StatementTimeVar names the session variable that bounds how long one
// statement may run on this kind of server, a bound that ends a GET_LOCK
// wait like any other statement: max_statement_time on MariaDB (seconds,
// every statement), max_execution_time on MySQL and TiDB (milliseconds,
// every SELECT, and GET_LOCK runs in one). It is "" for Embedded, which
// enforces none, and for Unknown. 0 switches the bound off for the session
// (NoStatementLimit). MariaDB refuses MySQL's name with error 1193, and
// MySQL MariaDB's: one DSN cannot set it on both.
func (f Flavor) StatementTimeVar() string {
	switch f {
	case MariaDB:
		return "max_statement_time"
	case MySQL, TiDB:
		return "max_execution_time"
	}
	return ""
}

// NoStatementLimit returns the statement that switches this server's
// statement time limit (StatementTimeVar) off for the session that runs it,
// "SET SESSION max_statement_time = 0" on MariaDB, or "" when the server
// has no such limit.
func (f Flavor) NoStatementLimit() string {
	if v := f.StatementTimeVar(); v != "" {
		return "SET SESSION " + v + " = 0"
	}
	return ""
}

// errNumUnknown is the number of TiDB's catch-all error (ER_UNKNOWN_ERROR),
// which carries "pessimistic lock retry limit reached" among others.
const errNumUnknown = 1105

// IsRetryLimit reports whether err is, or wraps, TiDB's error 1105
// "pessimistic lock retry limit reached": under contention for one lock,
// the pessimistic lock behind GET_LOCK gave up retrying before its
// timeout. Nothing was acquired and the session is fine: the wait may be
// renewed as if that GET_LOCK had timed out (answered 0).
func IsRetryLimit(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errNumUnknown &&
		strings.Contains(me.Message, "pessimistic lock retry limit reached")
}

// The fast try on TiDB (TryWaits): TiDB's GET_LOCK inserts the lock's name,
// lowercased, into mysql.advisory_locks in a pessimistic transaction of its
// own that it never commits, so a lock held by any session is a
// pessimistic lock on that row's key. TryProbe's statement, run in a
// pessimistic transaction (TryProbeBegin, then TryProbeEnd whatever
// happened), asks for the same key's lock with NOWAIT: it fails at once
// with error 3572 (IsLockedNowait) when a holder has it, and otherwise
// takes it for the moment of the probe. The row itself never exists.
const (
	// TryProbeBegin starts the probe's transaction.
	TryProbeBegin = "BEGIN PESSIMISTIC"
	// TryProbe asks, without waiting, for the lock on the key of the row
	// that GET_LOCK inserts; its argument is TryProbeName of the lock name.
	// It needs the SELECT and UPDATE privileges on mysql.advisory_locks.
	TryProbe = "SELECT COUNT(*) FROM mysql.advisory_locks WHERE lock_name = ? FOR UPDATE NOWAIT"
	// TryProbeEnd ends the probe's transaction, giving back what it took.
	TryProbeEnd = "ROLLBACK"
)

// TryProbeName is the value of mysql.advisory_locks.lock_name that TiDB's
// GET_LOCK(name, ...) inserts: name lowercased (strings.ToLower, as TiDB
// does).
func TryProbeName(name string) string { return strings.ToLower(name) }

// errNumLockNowait is ER_LOCK_NOWAIT: a locking read with NOWAIT found the
// row locked.
const errNumLockNowait = 3572

// IsLockedNowait reports whether err is, or wraps, error 3572: a locking
// read with NOWAIT found the row locked by another transaction.
func IsLockedNowait(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errNumLockNowait
}

// Errors that make TryProbe unusable on a server, where tries must use
// GET_LOCK instead.
const (
	errNumTableAccessDenied  = 1142 // ER_TABLEACCESS_DENIED_ERROR
	errNumColumnAccessDenied = 1143 // ER_COLUMNACCESS_DENIED_ERROR
	errNumNoSuchTable        = 1146 // ER_NO_SUCH_TABLE
)

// IsProbeRefused reports whether err is, or wraps, the server's refusal of
// TryProbe itself, as opposed to an answer about the lock: no privilege on
// mysql.advisory_locks (error 1142 or 1143; an application's user usually
// has none), or no such table (1146: a TiDB older than its GET_LOCK).
func IsProbeRefused(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case errNumTableAccessDenied, errNumColumnAccessDenied, errNumNoSuchTable:
		return true
	}
	return false
}

// DefaultMaxTxnTTL is TiDB's default performance.max-txn-ttl: how long a
// transaction, and so a named lock, may live.
const DefaultMaxTxnTTL = time.Hour

// MaxTxnTTLQuery reads TiDB's performance.max-txn-ttl, in milliseconds,
// from the configuration of the TiDB instance that runs it.
const MaxTxnTTLQuery = `SELECT JSON_EXTRACT(@@tidb_config, '$.performance."max-txn-ttl"')`

// ErrMaxHoldRefused is the error (wrapped) that MaxHold returns, with
// DefaultMaxTxnTTL, when the server answered but will not say its
// performance.max-txn-ttl: @@tidb_config is refused to the user (error
// 1227: TiDB's security enhanced mode hides it without the
// RESTRICTED_VARIABLES_ADMIN privilege), unknown (1193), or has no positive
// value. Asking again gets the same answer.
var ErrMaxHoldRefused = errors.New("the server does not say")

// Server answers that refuse MaxTxnTTLQuery for good.
const errNumSpecificAccessDenied = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR

// MaxHold returns how long this server lets a named lock live once
// GET_LOCK was sent for it, however its session fares: 0 (no limit) for
// every kind but TiDB. On TiDB a lock is a pessimistic lock of a
// transaction, kept alive only until the transaction is
// performance.max-txn-ttl old (counted from when GET_LOCK began it); after
// that another session can be granted the lock while the holder's session,
// its IS_USED_LOCK and its RELEASE_LOCK still answer as if it held it.
// MaxHold reads the setting with MaxTxnTTLQuery on q (one instance's
// configuration: every instance of a cluster should have the same).
//
// When the server refuses to say (ErrMaxHoldRefused), MaxHold returns
// DefaultMaxTxnTTL and that error. Any other failure (a broken connection,
// a timeout, ctx) returns 0 and the error: the caller does not know the
// limit and must ask again.
func (f Flavor) MaxHold(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (time.Duration, error) {
	if f != TiDB {
		return 0, nil
	}
	var ms sql.NullFloat64
	if err := q.QueryRowContext(ctx, MaxTxnTTLQuery).Scan(&ms); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == errNumSpecificAccessDenied || me.Number == errNumUnknownVariable) {
			return DefaultMaxTxnTTL, fmt.Errorf("read performance.max-txn-ttl: %w (%w)", ErrMaxHoldRefused, err)
		}
		return 0, fmt.Errorf("read performance.max-txn-ttl: %w", err)
	}
	if !ms.Valid || ms.Float64 <= 0 {
		return DefaultMaxTxnTTL, fmt.Errorf("read performance.max-txn-ttl: %w: @@tidb_config has no positive performance.max-txn-ttl", ErrMaxHoldRefused)
	}
	return time.Duration(ms.Float64 * float64(time.Millisecond)), nil
}

// errNumWriteConflict is TiDB's ErrWriteConflict: a transaction found, when
// it locked or committed a key, that another transaction had written it
// after its snapshot.
const errNumWriteConflict = 9007

// IsWriteConflict reports whether err is, or wraps, TiDB's error 9007
// "Write conflict": the statement (a write in a pessimistic transaction
// at TiDB's SERIALIZABLE, which does not retry it) or the COMMIT (an
// optimistic transaction) found a key written by another transaction after
// its snapshot. The transaction is rolled back; nothing of it committed.
func IsWriteConflict(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errNumWriteConflict
}

// TxnModeExpr is the expression, for a SELECT on TiDB, that answers 1 when
// the session begins its transactions in pessimistic mode (tidb_txn_mode
// 'pessimistic', the default) and 0 when in optimistic mode ('optimistic',
// or the empty value, which TiDB takes as optimistic). An optimistic transaction takes
// no row lock before its COMMIT: its writes wait for nobody, and a conflict
// fails the COMMIT (IsWriteConflict).
const TxnModeExpr = "UPPER(@@tidb_txn_mode) = 'PESSIMISTIC'"

// IsLockWait reports whether a row of SHOW FULL PROCESSLIST, by its State
// and Info, is a session waiting in GET_LOCK: MariaDB and MySQL show the
// state "User lock" (MySQL 9.7 does, TestGetLockOnServer); "Waiting for
// user level lock", an older MySQL name of it, counts too. TiDB shows no such
// state (a waiter's is "autocommit"), so a row whose statement (Info)
// calls GET_LOCK counts too: there GET_LOCK waits at least 1 s whenever
// the lock is held.
func IsLockWait(state, info string) bool {
	switch state {
	case "User lock", "Waiting for user level lock":
		return true
	}
	return strings.Contains(strings.ToUpper(info), "GET_LOCK(")
}

// NamedLockProbe is the statement CheckNamedLocks runs, with one fresh
// lock name as each of its five arguments: take the lock without waiting,
// ask whether this session holds it (the ownership check the keep-alive
// runs), which session holds it and what CONNECTION_ID() answers (to say
// why, when the check fails), release it, and ask whether anyone holds it.
// A server whose named locks work answers 1, 1, id, id, 1, NULL.
const NamedLockProbe = "SELECT GET_LOCK(?, 0), IS_USED_LOCK(?) = CONNECTION_ID(), IS_USED_LOCK(?), CONNECTION_ID(), RELEASE_LOCK(?), IS_USED_LOCK(?)"

// AdvisoryLocksProbe asks TiDB whether it has mysql.advisory_locks, the
// table whose rows its GET_LOCK locks: a TiDB without it has no real
// GET_LOCK (with tidb_enable_noop_functions on, GET_LOCK there answers 1
// and locks nothing).
const AdvisoryLocksProbe = "SELECT COUNT(*) FROM mysql.advisory_locks WHERE 1 = 0"

// ErrNoNamedLocks matches the error that CheckNamedLocks returns for a
// server whose named locks do not work as the library needs them; that
// error's text names the server's kind, its version and the reason.
var ErrNoNamedLocks = errors.New("named locks do not work on this server")

// noNamedLocksError is a refusal of CheckNamedLocks: it matches
// ErrNoNamedLocks.
type noNamedLocksError struct {
	text string
	err  error // the server's answer, if an error; nil otherwise
}

func (e *noNamedLocksError) Error() string {
	if e.err != nil {
		return e.text + " (" + e.err.Error() + ")"
	}
	return e.text
}
func (e *noNamedLocksError) Unwrap() error        { return e.err }
func (e *noNamedLocksError) Is(target error) bool { return target == ErrNoNamedLocks }

// CheckNamedLocks proves on conn that named locks work as the library uses
// them, with name, a lock name no one else uses: NamedLockProbe must answer
// 1, 1, id, id, 1, NULL (a session whose CONNECTION_ID() is not the id
// IS_USED_LOCK gives it, as a pseudo_thread_id set in the DSN makes it, is
// refused: the keep-alive would find every lock lost and a cancelled
// wait's KILL would end another session), and on TiDB mysql.advisory_locks must exist
// (AdvisoryLocksProbe; a refusal for want of privileges on it is no
// answer, and passes). It returns nil, an error wrapping ErrNoNamedLocks
// that names the server's VERSION() and the reason (TiDB v6.1 to v7.1 have
// no IS_USED_LOCK; a TiDB without mysql.advisory_locks has a no-op
// GET_LOCK at most), or the error of a query that failed otherwise (not
// a server's answer: a broken connection, ctx).
func CheckNamedLocks(ctx context.Context, conn *sql.Conn, name string) error {
	f, version, err := Detect(ctx, conn)
	if err != nil {
		return err
	}
	refusedBy := func(err error, format string, args ...any) error {
		return &noNamedLocksError{text: fmt.Sprintf("%s %q: ", f, version) + fmt.Sprintf(format, args...), err: err}
	}
	refused := func(format string, args ...any) error { return refusedBy(nil, format, args...) }
	var got, owns, holder, cid, released, after sql.NullInt64
	err = conn.QueryRowContext(ctx, NamedLockProbe, name, name, name, name, name).Scan(&got, &owns, &holder, &cid, &released, &after)
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me):
		// A lock the failed statement may have taken goes with the
		// session: pool.Open closes the pool when its check fails.
		why := "the keep-alive's ownership check IS_USED_LOCK(name) = CONNECTION_ID() is refused"
		if f == TiDB {
			why += " (TiDB v6.1 to v7.1 do not support IS_USED_LOCK)"
		}
		return refusedBy(err, "GET_LOCK, IS_USED_LOCK or RELEASE_LOCK failed: %s", why)
	case err != nil:
		return err
	case got.Int64 != 1 || !got.Valid:
		return refused("GET_LOCK(name, 0) of a free name answered %s, want 1", nullInt(got))
	case (owns.Int64 != 1 || !owns.Valid) && holder.Valid && cid.Valid && holder.Int64 != cid.Int64:
		return refused("CONNECTION_ID() answered %d, but IS_USED_LOCK(name) names session %d as the holder of the lock this session had just taken: the session's pseudo_thread_id is set (a DSN parameter pseudo_thread_id?), so CONNECTION_ID() names another session; the keep-alive's ownership check IS_USED_LOCK(name) = CONNECTION_ID() would find every lock lost, and the KILL that ends a cancelled wait would end that other session", cid.Int64, holder.Int64)
	case owns.Int64 != 1 || !owns.Valid:
		return refused("IS_USED_LOCK(name) = CONNECTION_ID() answered %s for the lock the session had just taken, want 1: the keep-alive could not see that it holds a lock", nullInt(owns))
	case released.Int64 != 1 || !released.Valid:
		return refused("RELEASE_LOCK(name) answered %s for the lock the session held, want 1", nullInt(released))
	case after.Valid:
		return refused("IS_USED_LOCK(name) answered %d after the release, want NULL: the server does not say whether a lock is held (a no-op lock?)", after.Int64)
	}
	if f != TiDB {
		return nil
	}
	var n int64
	err = conn.QueryRowContext(ctx, AdvisoryLocksProbe).Scan(&n)
	switch {
	case errors.As(err, &me) && me.Number == errNumNoSuchTable:
		return refusedBy(err, "it has no mysql.advisory_locks, the table TiDB's cluster-wide GET_LOCK locks rows of: its GET_LOCK is a no-op at most (with tidb_enable_noop_functions on it answers 1 and locks nothing)")
	case errors.As(err, &me) && (me.Number == errNumTableAccessDenied || me.Number == errNumColumnAccessDenied):
		return nil // the user may not read it: no answer, and the probe above passed
	}
	return err
}

// nullInt formats n as the server answered it: NULL or the number.
func nullInt(n sql.NullInt64) string {
	if !n.Valid {
		return "NULL"
	}
	return fmt.Sprint(n.Int64)
}
