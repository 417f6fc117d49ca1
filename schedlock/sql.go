package schedlock

// The statements are ShedLock's MySqlServerTimeStatementsSource (the
// usingDbTime() variant of its JDBC providers) with the named parameters
// turned into placeholders: every time is the server's UTC_TIMESTAMP(3), and
// durations are microseconds added with TIMESTAMPADD. Within one statement
// UTC_TIMESTAMP(3) is the statement's start time, so "now" is one instant.
//
// One condition is this package's own: a statement that sets lock_until to
// now + d writes nothing unless that fits the TIMESTAMP column (fitsDbNow),
// where ShedLock's would store a zero lock_until (INSERT IGNORE, or any
// statement in a non-strict session) with a mere warning, and another
// instance would take the job at once. So the insert is an INSERT IGNORE …
// SELECT … FROM DUAL WHERE that condition, and the updates carry it in
// their WHERE. The unlock needs none: its lock_until is at most the one the
// lock wrote. holder and owned tell such a refusal from the other reasons
// a statement changed nothing.
//
// A lease is one acquisition: the row's name, this Provider's locked_by and
// the locked_at that acquisition wrote, which no other acquisition writes
// (see leaseIs). The unlock and the extend carry all three in their WHERE,
// where ShedLock's carry name and locked_by only, and the unlock, like the
// extend, changes only a row whose lock_until has not passed: once it has,
// only an acquisition writes the row (ShedLock's unlock would lock a free
// job again, until locked_at + lockAtLeastFor). The values they write are
// ShedLock's.
//
// holder, owned, holds and acquired are this package's own read-only
// checks; they never change the table.
type statements struct {
	create   string
	insert   string // args: name, lockAtMostFor µs, lockedBy, lockAtMostFor µs
	update   string // args: lockAtMostFor µs, lockedBy, name, lockAtMostFor µs
	unlock   string // args: lockAtLeastFor µs, lockAtLeastFor µs, name, lockedBy, lockedAt ms
	extend   string // args: lockAtMostFor µs, name, lockedBy, lockedAt ms, lockAtMostFor µs
	holder   string // args: name, lockAtMostFor µs — (locked_by or NULL, fits)
	owned    string // args: name, lockedBy, lockedAt ms, d µs — (unexpired and this lease's, fits)
	holds    string // args: name, lockedBy, lockedAt ms — this lease's and unexpired
	acquired string // args: name, lockedBy — locked_at in ms since the epoch
}

const (
	dbNow        = "UTC_TIMESTAMP(3)"
	dbNowPlus    = "TIMESTAMPADD(MICROSECOND, ?, " + dbNow + ")"
	lockedAtPlus = "TIMESTAMPADD(MICROSECOND, ?, locked_at)"

	// timestampEnd is the last instant a TIMESTAMP(3) column holds,
	// 2038-01-19 03:14:07.999 UTC, as a DATETIME in the session's
	// time_zone: the zone lock_until is converted from when stored.
	timestampEnd = "FROM_UNIXTIME(2147483647.999)"
	// fitsDbNow is true when now + ? µs fits the TIMESTAMP column; not
	// true (NULL) also when TIMESTAMPADD itself overflows, past 9999.
	fitsDbNow = dbNowPlus + " <= " + timestampEnd

	// lockedAtMs is locked_at in milliseconds since the epoch: UNIX_TIMESTAMP
	// of a TIMESTAMP column is the stored instant itself, whatever the
	// session's time_zone, and exact (a DECIMAL with the column's three
	// fractional digits), so the value read back after acquiring compares
	// equal in any session, on MySQL (which rounds what it stores) as on
	// MariaDB (which truncates).
	lockedAtMs = "CAST(UNIX_TIMESTAMP(locked_at) * 1000 AS SIGNED)"

	// leaseIs matches the row of one acquisition. Every acquisition writes
	// locked_at = now, and takes a row only once its lock_until <= now. A
	// lock_until written by an acquisition or an extension is at least a
	// millisecond past the locked_at beside it (LockAtMostFor and
	// extensions are at least 1ms), so the next acquisition writes a later
	// locked_at. Only a lease's unlock can write lock_until = locked_at
	// (LockAtLeastFor 0, within the millisecond), and once the server has
	// applied it that lease has no statement left to send (Unlock is its
	// last, see (*Lease).Unlock). So no statement still to come from one
	// acquisition matches another's row, as long as the server's clock does
	// not step back (or a session's SET timestamp move it back).
	leaseIs = "name = ? AND locked_by = ? AND " + lockedAtMs + " = ?"
)

func buildStatements(table string) statements {
	return statements{
		create: "CREATE TABLE IF NOT EXISTS " + table + " (" +
			"name VARCHAR(64) NOT NULL, " +
			"lock_until TIMESTAMP(3) NOT NULL, " +
			"locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), " +
			"locked_by VARCHAR(255) NOT NULL, " +
			"PRIMARY KEY (name))",
		insert: "INSERT IGNORE INTO " + table + " (name, lock_until, locked_at, locked_by) " +
			"SELECT ?, " + dbNowPlus + ", " + dbNow + ", ? FROM DUAL WHERE " + fitsDbNow,
		update: "UPDATE " + table + " SET lock_until = " + dbNowPlus + ", locked_at = " + dbNow +
			", locked_by = ? WHERE name = ? AND lock_until <= " + dbNow + " AND " + fitsDbNow,
		unlock: "UPDATE " + table + " SET lock_until = IF(" + lockedAtPlus + " > " + dbNow + ", " +
			lockedAtPlus + ", " + dbNow + ") WHERE " + leaseIs + " AND lock_until > " + dbNow,
		extend: "UPDATE " + table + " SET lock_until = " + dbNowPlus +
			" WHERE " + leaseIs + " AND lock_until > " + dbNow + " AND " + fitsDbNow,
		holder: "SELECT (SELECT locked_by FROM " + table + " WHERE name = ?), " + fitsDbNow,
		owned: "SELECT (SELECT COUNT(*) FROM " + table + " WHERE " + leaseIs + " AND lock_until > " + dbNow +
			"), " + fitsDbNow,
		holds:    "SELECT COUNT(*) FROM " + table + " WHERE " + leaseIs + " AND lock_until > " + dbNow,
		acquired: "SELECT " + lockedAtMs + " FROM " + table + " WHERE name = ? AND locked_by = ?",
	}
}
