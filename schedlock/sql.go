package schedlock

// The statements are ShedLock's MySqlServerTimeStatementsSource (the
// usingDbTime() variant of its JDBC providers) with the named parameters
// turned into placeholders: every time is the server's UTC_TIMESTAMP(3), and
// durations are microseconds added with TIMESTAMPADD. Within one statement
// UTC_TIMESTAMP(3) is the statement's start time, so "now" is one instant.
//
// holder, owned and ownsRow are this package's own read-only checks; they
// never change the table.
type statements struct {
	create  string
	insert  string // args: name, lockAtMostFor µs, lockedBy
	update  string // args: lockAtMostFor µs, lockedBy, name
	unlock  string // args: lockAtLeastFor µs, lockAtLeastFor µs, name, lockedBy
	extend  string // args: lockAtMostFor µs, name, lockedBy
	holder  string // args: name
	owned   string // args: name, lockedBy — unexpired and ours
	ownsRow string // args: name, lockedBy — ours, expired or not
}

const (
	dbNow        = "UTC_TIMESTAMP(3)"
	dbNowPlus    = "TIMESTAMPADD(MICROSECOND, ?, " + dbNow + ")"
	lockedAtPlus = "TIMESTAMPADD(MICROSECOND, ?, locked_at)"
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
			"VALUES (?, " + dbNowPlus + ", " + dbNow + ", ?)",
		update: "UPDATE " + table + " SET lock_until = " + dbNowPlus + ", locked_at = " + dbNow +
			", locked_by = ? WHERE name = ? AND lock_until <= " + dbNow,
		unlock: "UPDATE " + table + " SET lock_until = IF(" + lockedAtPlus + " > " + dbNow + ", " +
			lockedAtPlus + ", " + dbNow + ") WHERE name = ? AND locked_by = ?",
		extend: "UPDATE " + table + " SET lock_until = " + dbNowPlus +
			" WHERE name = ? AND locked_by = ? AND lock_until > " + dbNow,
		holder:  "SELECT locked_by FROM " + table + " WHERE name = ?",
		owned:   "SELECT COUNT(*) FROM " + table + " WHERE name = ? AND locked_by = ? AND lock_until > " + dbNow,
		ownsRow: "SELECT COUNT(*) FROM " + table + " WHERE name = ? AND locked_by = ?",
	}
}
