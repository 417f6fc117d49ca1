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
	// TiDB is a server whose VERSION() contains "TiDB". It behaves like
	// MySQL in every method of this package.
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
// (MariaDB). The others take whole seconds: MySQL truncates 0.3 to 0,
// go-mysql-server rounds it, TiDB waits at least 1 s.
func (f Flavor) FractionalTimeouts() bool { return f == MariaDB }

// WaitsIgnoreCancel reports whether a GET_LOCK wait ignores its client's
// disconnect and KILL, ending only at its own timeout or when the lock is
// granted (Embedded). A cancelled wait then lingers at the server.
func (f Flavor) WaitsIgnoreCancel() bool { return f == Embedded }

// longestWait is the timeout sent to GET_LOCK when the caller has no
// deadline: one year, the largest MySQL accepts. The server answers 0 after
// that and the caller simply renews the wait.
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
//   - No deadline: the longest wait, one year in seconds (int64); 1 s on a
//     server whose waits ignore cancellation (WaitsIgnoreCancel), so that a
//     wait its caller gave up on lingers there at most a second.
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
// XtraDB Cluster node with wsrep_on=ON.
var ErrNodeLocal = errors.New("wsrep_on=ON (Galera / Percona XtraDB Cluster): named locks are node-local and some releases refuse them")

// CheckTopology refuses a server where named locks are node-local: a Galera
// or Percona XtraDB Cluster node with wsrep_on=ON (SHOW VARIABLES LIKE
// 'wsrep_on'). It returns ErrNodeLocal for such a server, an error saying
// that wsrep_on could not be read when the query fails, and nil otherwise
// (a server without the variable included). Its errors wrap no sentinel of
// the caller's: a caller tells a refusal from a failure with
// errors.Is(err, ErrNodeLocal).
func CheckTopology(ctx context.Context, db *sql.DB) error {
	var name, value string
	err := db.QueryRowContext(ctx, "SHOW VARIABLES LIKE 'wsrep_on'").Scan(&name, &value)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("read wsrep_on: %w", err)
	case strings.EqualFold(value, "ON"):
		return ErrNodeLocal
	}
	return nil
}
