// Package pool opens the dedicated connection pool that named locks live on.
//
// A MySQL named lock (GET_LOCK) belongs to the session that took it, and a
// session is one connection. The lock pool is therefore a resource of its own
// and must never be the application's primary pool:
//
//   - Starvation. A held lock pins a connection for as long as the critical
//     section runs. If lock holders and business queries shared one pool, N
//     holders whose critical sections need a business connection would wait
//     for one another once the pool is exhausted, and the process would hang.
//     With a separate, bounded lock pool, holders can only exhaust the lock
//     pool, and a full lock pool makes lock waits wait, never business queries.
//   - Accidental release. The driver does not reset a session when a
//     connection returns to the pool, so a pooled connection that still holds
//     a lock would hand that lock to whatever business code borrows it next,
//     and a RELEASE_LOCK or a lost connection there would silently drop it.
//   - Different settings. Lock connections need interpolated parameters (one
//     round trip per statement), no read timeout shorter than the longest
//     wait, no statement time limit (a server-wide max_statement_time or
//     max_execution_time would cut every long wait), and a short session
//     wait_timeout (the lease) so that the server frees the locks of a
//     vanished host quickly. Business connections want none of that.
//
// Open it once per process and give it to the Locker; keep the
// application's own *sql.DB for business queries:
//
//	lockDB, err := pool.Open("app:secret@tcp(db:3306)/app?tls=true", pool.WithMaxConns(32))
//	if err != nil { ... }
//	locker, err := namedlock.New(lockDB)
//
// [Open] parses the DSN with the driver's own parser, enforces those
// settings, pings the server, checks that named locks really work there and
// refuses servers where they cannot be trusted (Galera or Percona XtraDB
// Cluster with wsrep_on=ON, Group Replication in multi-primary mode).
// [OpenConfig] does the same from a *mysql.Config, for what a DSN cannot
// carry (a *tls.Config, a dial function, an auth token fetched before each
// connection), without changing the caller's Config.
//
// Errors never contain the password, by construction rather than by
// scrubbing: no message quotes the DSN. A message is one line made of fixed
// text and the fields it names on purpose (network, address, user, and the
// database when that is the problem); a driver error whose text could hold
// DSN text (most DSN parse errors) is replaced by a message that says what
// is wrong, and the others stay in the chain for [errors.As]. Open's errors
// match a sentinel saying what kind of failure it is: [ErrInvalidOption],
// [ErrInvalidDSN], [ErrUnreachable], [ErrRefused] (the server answered: a
// wrong password is not "cannot reach") or [ErrUnsupportedServer]; one that
// ended because its ctx did matches ctx's error instead.
//
// Which servers are supported and why the others are refused: [servers].
//
// [servers]: https://github.com/namedlock/mysql/blob/main/docs/servers.md
package pool
