// Package schedlock makes a scheduled job run once across instances, with a
// lease table that is compatible with Java's ShedLock.
//
// Every instance's scheduler fires the same job at the same tick; each calls
// (*Provider).Run, and only the instance that takes the job's row runs it.
// The others skip the tick (ran == false, no error). The row records
// lock_until, the database time until which the job is locked:
//
//   - LockAtMostFor bounds how long a holder that crashed (never unlocked)
//     blocks the job: lock_until = now + LockAtMostFor on acquire.
//   - LockAtLeastFor keeps a fast job locked after it finished, so an
//     instance whose tick comes a little late does not run it again: on
//     unlock lock_until = max(locked_at + LockAtLeastFor, now).
//   - KeepAlive (optional) extends lock_until while a long job runs, and
//     cancels the job's context with ErrLeaseLost if the row was taken over.
//
// In code, on the application's own *sql.DB:
//
//	p, err := schedlock.New(appDB) // the "shedlock" table
//	if err != nil { ... }
//	if err := p.CreateTable(ctx); err != nil { ... } // once, like a migration
//	ran, err := p.Run(ctx, schedlock.Config{
//		Name:           "nightly-report",
//		LockAtMostFor:  10 * time.Minute,
//		LockAtLeastFor: 30 * time.Second,
//	}, report)
//
// Unlike a named lock (GET_LOCK), the lease survives the holder's crash and
// gives LockAtLeastFor; unlike a lease computed from the application's
// clock, it is immune to clock skew between instances: every time is the
// server's UTC_TIMESTAMP(3). No code path reads the application's clock to
// decide anything; local timers only pace the keep-alive.
//
// # ShedLock compatibility
//
// The table has ShedLock's schema (CreateTable makes it; it is never created
// implicitly):
//
//	CREATE TABLE shedlock (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL,
//	  locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
//	  locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))
//
// and the statements are those of ShedLock's MySQL provider with
// usingDbTime() (MySqlServerTimeStatementsSource, which ShedLock uses for
// MySQL and MariaDB alike), durations in microseconds, with two conditions
// added: FITS, and LEASE in the extend and the unlock, whose WHERE also
// has the extend's lock_until > UTC_TIMESTAMP(3) (see Leases below):
//
//	lock:   INSERT IGNORE INTO shedlock (name, lock_until, locked_at, locked_by)
//	          SELECT ?, TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)), UTC_TIMESTAMP(3), ?
//	          FROM DUAL WHERE FITS
//	        then, if no row was inserted:
//	        UPDATE shedlock SET lock_until = TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)),
//	          locked_at = UTC_TIMESTAMP(3), locked_by = ?
//	          WHERE name = ? AND lock_until <= UTC_TIMESTAMP(3) AND FITS
//	        then: SELECT locked_at of the row (the lease's identity)
//	extend: UPDATE shedlock SET lock_until = TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3))
//	          WHERE name = ? AND locked_by = ? AND LEASE AND lock_until > UTC_TIMESTAMP(3) AND FITS
//	unlock: UPDATE shedlock SET lock_until = IF(TIMESTAMPADD(MICROSECOND, ?, locked_at) > UTC_TIMESTAMP(3),
//	          TIMESTAMPADD(MICROSECOND, ?, locked_at), UTC_TIMESTAMP(3))
//	          WHERE name = ? AND locked_by = ? AND LEASE AND lock_until > UTC_TIMESTAMP(3)
//
//	FITS:   TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)) <= FROM_UNIXTIME(2147483647.999)
//	LEASE:  CAST(UNIX_TIMESTAMP(locked_at) * 1000 AS SIGNED) = ? (the locked_at read back)
//
// so Go instances and Java instances configured with usingDbTime() share job
// locks in one table: within the TIMESTAMP range the rows written are
// ShedLock's, byte for byte. This is checked on MariaDB 10.11, MySQL 9.7
// and TiDB 8.0 against ShedLock's statements as its source has them (not
// against ShedLock itself running): where a value has more fractional
// digits than the column's three, MySQL and TiDB round it and MariaDB
// truncates it, for ShedLock's statements and the Provider's alike. Besides
// them the package only reads (SELECT by primary key): the lease's
// locked_at after acquiring, and, to explain an unsuccessful statement, who
// holds the job, or whether a row changed 0 rows because MySQL counts
// changed rows, not matched ones.
//
// Like ShedLock, the Provider skips the INSERT for names whose row it has
// already seen; unlike ShedLock, it notices a deleted row and inserts it
// again.
//
// # Leases
//
// A Lease is one acquisition of the job's row, identified by the row's
// name, the Provider's locked_by and the locked_at the acquisition wrote,
// read back from the row right after acquiring (compared as stored, so the
// server's rounding of fractional seconds and the session's time_zone do
// not matter). One Provider can hold several leases of one job over time,
// since it may take its own expired row again; ShedLock's statements,
// which match name and locked_by only, let an old lease's unlock or extend
// act on the newer one. Here they do not:
//
//   - Who may write the row: an acquisition, only while the row's
//     lock_until has passed (database time); after that, only the lease it
//     made, through its extensions and its unlock, and only while the row
//     still carries its locked_at and its lock_until has not passed. A
//     lease that ran out, whether or not its row was taken again since (by
//     another instance, or by a newer lease of the same Provider), changes
//     nothing: its Extend and Unlock report ErrLeaseLost (ShedLock's
//     unlock, landing on a free row, would lock the job again until
//     locked_at + lockAtLeastFor). Every lock_until
//     an acquisition or an extension writes is at least 1 ms past the
//     row's locked_at, so an acquisition, which needs lock_until <= now,
//     writes a locked_at that no lease still able to send a statement has
//     (only a lease's applied unlock can leave lock_until = locked_at, and
//     that lease has nothing left to send), as long as the server's clock
//     does not step back. One Provider's acquisitions are serialised,
//     whatever the names, so the locked_at it reads back is its own
//     acquisition's, also for names the column's collation makes one row
//     (see Names). The cost: jobs due at the same tick take their locks
//     one after another, each in 2 or 3 round trips to the server, and a
//     Lock whose connection hangs holds up the Provider's other Locks for
//     up to the lock timeout (WithLockTimeout).
//   - When: Unlock is the lease's last statement. Once Unlock is called, no
//     extension is sent (Extend returns ErrUnlocked, the keep-alive
//     stops); Unlock sends the unlock only after every extension already
//     sent has been answered by the server (none is cut off, not even by
//     Extend's ctx: a statement whose connection is closed may still be
//     applied). So when Unlock returns nil, every statement of the lease
//     was applied before its unlock, and nothing of the lease lands after
//     it. If an extension is still unanswered after half the unlock
//     timeout, Unlock cuts it off, unlocks anyway (within the rest of the
//     timeout: Unlock returns within the unlock timeout) and returns an
//     error saying the extension may still land after the unlock (a
//     skipped run, never a second run at once).
//   - An unlock cut off by its own timeout may still land later; it then
//     acts on its lease only, never on a newer one.
//
// # The end of TIMESTAMP
//
// A TIMESTAMP column holds times up to 2038-01-19 03:14:07.999 UTC. ShedLock
// writes lock_until = now + lockAtMostFor whatever it is: past that end,
// INSERT IGNORE (or any statement in a session without a strict sql_mode)
// stores a zero lock_until with a mere warning, and the next instance takes
// the job while its holder still runs it — a LockAtMostFor of 15 years
// today, or of one year in 2037. The Provider refuses such a lease instead
// (FITS above: the statement writes nothing) and says so with
// ErrLeaseOutOfRange, for Lock and Run, for Extend and for the keep-alive,
// whose lease then ends at the lock_until it has. The end is computed by
// the server, from its own clock and in the session's time_zone (the zone
// lock_until is converted from), never from the application's clock. A
// lease is refused rather than capped at the end: a cap would silently
// shorten LockAtMostFor, and write a lock_until that ShedLock itself never
// writes. The bound is TIMESTAMP's classic one everywhere, also on servers
// whose TIMESTAMP reaches further (MariaDB 11.5 and later on 64-bit
// platforms).
//
// # Session settings
//
// The Provider runs short single-row statements on the application's pool
// and leaves its session settings alone. A server-wide statement time limit
// (MariaDB max_statement_time; MySQL's max_execution_time covers SELECTs
// only) can make one of them fail, with an error, never change a lease.
//
// # Time zones
//
// UTC_TIMESTAMP(3) is a DATETIME holding the UTC wall clock, and the columns
// are TIMESTAMP: the server converts a value stored into a TIMESTAMP column
// from the session's time_zone to UTC, and back when reading. ShedLock does
// not set the session time_zone (Connector/J leaves it at the server's
// default unless told otherwise), so it stores UTC wall-clock values as if
// they were in the session's zone, and compares them in the same zone. The
// Provider does the same: it never changes the session time_zone, and runs
// ShedLock's statements as they are. Within one session time_zone the
// comparisons are exact, whatever that zone is, and the rows are identical
// to ShedLock's; this package's tests check both with a +00:00 and a +05:00
// session.
//
// The consequence, shared with ShedLock: every instance using the table
// must run with the same session time_zone. A Go instance whose DSN sets
// time_zone='+00:00' next to a Java instance on a server whose default zone
// is +02:00 would read every lock_until two hours off. A zone with daylight
// saving time is also wrong for an hour a year (UTC wall-clock values that
// fall into the skipped local hour cannot be stored). The safe setting is a
// server whose time_zone is UTC (or SYSTEM on a UTC host), or time_zone
// '+00:00' forced on every client (go-sql-driver: time_zone=%27%2B00%3A00%27
// in the DSN; Connector/J: connectionTimeZone=UTC with
// forceConnectionTimeZoneToSession=true).
//
// # Names
//
// Job names are at most 64 characters. A longer name is refused with
// ErrNameTooLong before any statement runs (ShedLock's INSERT IGNORE
// truncates it, after which its UPDATE never matches and the job silently
// never runs). A name the table's column still mangles (a narrower column,
// a character set without the name's characters) is reported with
// ErrNameNotStorable. Names compare with the column's collation, which
// CreateTable leaves to the database's default. With the defaults, names
// compare case-insensitively and accent-insensitively ("Job", "job" and
// "JOB" are one job, and so are "cafe" and "café"); trailing spaces differ
// between servers: MariaDB's default utf8mb4_general_ci is PAD SPACE ("job"
// and "job " are one job), MySQL 8's utf8mb4_0900_ai_ci is NO PAD ("job"
// and "job " are two jobs). Instances sharing a table share its collation,
// so they agree with each other; avoid names that differ only in case,
// accents or trailing spaces.
//
// # Choosing locked_by
//
// Unlock and extend match on locked_by (and the lease's locked_at), so it
// must be unique per Provider among everything sharing the table. The default (hostname, process id and
// a random suffix per Provider) is; ShedLock's default, the bare hostname,
// is not when one host runs several processes.
//
// For gocron v2 schedulers, see the subpackage gocronlock. What an operator
// does about a job that seems stuck: [operations].
//
// [operations]: https://github.com/namedlock/mysql/blob/main/docs/operations.md#scheduled-jobs-schedlock
package schedlock
