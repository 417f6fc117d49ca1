// Package holders tells who holds named locks on a MySQL-compatible server,
// for an operator in an incident ("the nightly job did not run: who holds
// its lock, since when, from which host?"). It only reads, except [Kill].
//
// [Lookup] takes keys, maps each to its server name exactly as a
// namedlock.Locker does ([keyfmt.Portable], which leaves a server name as it
// is, so a name that [List] or the process list shows may be given as a
// key), asks IS_USED_LOCK which
// connection holds it, and describes that connection's session from
// information_schema.PROCESSLIST: user, host, command, state, time in that
// state and the statement it runs. It works on every server the library
// supports, except that TiDB answers IS_USED_LOCK from another session with
// 1, not the holder's id: the lock is then known to be held, not by whom.
//
// [List] lists every user-level lock held on the server, where the server
// can tell:
//
//   - MySQL 8: performance_schema.metadata_locks, OBJECT_TYPE = 'USER LEVEL
//     LOCK' (performance_schema on, as it is by default).
//   - MariaDB: information_schema.METADATA_LOCK_INFO, which only the
//     metadata_lock_info plugin provides. Without it List fails with
//     [ErrCannotList] and says how to load it: INSTALL SONAME
//     'metadata_lock_info' (once, as a user with the INSERT privilege on
//     mysql.plugin), or plugin_load_add = metadata_lock_info in the
//     server's configuration.
//   - TiDB and go-mysql-server: no table lists user-level locks; List fails
//     with ErrCannotList. Lookup works (on TiDB without the holder's id).
//
// Seeing another user's session in the process list needs the PROCESS
// privilege; without it a holder's session is not described (Holder.Session
// is nil). [Kill] ends a holder's session (KILL CONNECTION, which needs the
// CONNECTION_ADMIN or SUPER privilege for another user's), after checking
// that the same connection still holds the lock; the server then frees every
// lock of that session, and the Locker that held it reports ErrLockLost.
//
// The command cmd/namedlock is these functions for a terminal.
package holders
