// Package embedded runs go-mysql-server (github.com/dolthub/go-mysql-server)
// in-process, as a stand-in MySQL server for tests and demos on machines that
// have no real one.
//
// Start listens on a free port of 127.0.0.1 (never on other interfaces) and
// serves one empty in-memory database, "test", to any user, root included,
// without a password; Close stops it and every goroutine it started. Tables
// can be created and used (CREATE TABLE, INSERT, UPDATE, SELECT); they live in
// memory and vanish with the Server. Servers in one process share
// go-mysql-server's global system variables (SET GLOBAL), nothing else.
//
//	s, err := embedded.Start()
//	if err != nil { ... }
//	defer s.Close()
//	db, err := sql.Open("mysql", s.DSN()+"?interpolateParams=true")
//
// # Named locks
//
// GET_LOCK, RELEASE_LOCK, IS_USED_LOCK, IS_FREE_LOCK and CONNECTION_ID work
// over github.com/go-sql-driver/mysql, with or without interpolateParams:
// two connections exclude each other, a session re-acquiring its own lock is
// counted and needs as many releases, RELEASE_LOCK answers 1 (released),
// 0 (held by another session) or NULL (nobody holds it), IS_USED_LOCK answers
// the holder's CONNECTION_ID() or NULL, and closing or KILLing an idle
// session releases all its locks. It differs from MySQL and MariaDB in ways a
// test must not depend on (all checked by this package's tests):
//
//   - Timeouts are rounded to whole seconds: GET_LOCK(name, 0.3) does not
//     wait, GET_LOCK(name, 0.6) waits 1 s. A negative timeout waits forever.
//   - Names compare case-sensitively (like MariaDB, unlike MySQL), any length;
//     an empty name is a valid one (GET_LOCK with "" returns 1); only NULL
//     arguments give NULL.
//   - A waiting GET_LOCK ignores everything but its timeout and the release of
//     the lock. A client that gives up (context cancelled, socket closed)
//     leaves the session waiting and listed in the process list; when the
//     lock is released, the abandoned session may hold it for a moment before
//     it notices its client is gone. KILL QUERY does not end the wait (the
//     statement then returns 0 or fails with error 1105 "context canceled").
//     KILL cuts the client's socket at once, but the session stays until its
//     wait ends. The wait polls every 100 µs, so it costs CPU.
//   - There is no deadlock detection.
//
// # Statements the library runs
//
//   - SHOW VARIABLES LIKE 'wsrep_on': works, returns no row (not Galera).
//   - SELECT @@session.wait_timeout: works, 28800.
//   - SET SESSION wait_timeout = 30: works and reads back, but is not
//     enforced: an idle session is never closed by the server.
//   - SELECT VERSION(): "8.0.31" (@@version_comment is "Dolt"); nothing in it
//     tells go-mysql-server from MySQL.
//   - KILL <id>: works on an idle session (closes it, releases its locks); on a
//     session waiting in GET_LOCK see above. KILL of an unknown id is not an
//     error. KILL QUERY <id> is accepted but does not end a GET_LOCK wait.
//   - SHOW GLOBAL STATUS: works (about 650 rows, mostly zeros).
//   - DO <expr> is a syntax error (1105): use SELECT GET_LOCK(...).
//   - SHOW PROCESSLIST and information_schema.PROCESSLIST work.
//
// # Closing
//
// Close stops accepting, closes every client connection and waits for the
// goroutines serving them. Closing a connection releases its locks, so a
// waiting GET_LOCK whose holder is another connection of the same server is
// granted and ends at once. Only sessions that wait on each other with long
// timeouts (a deadlock, which the server does not detect) can outlive Close:
// it then gives up after CloseTimeout and returns an error wrapping ErrBusy.
//
// go-mysql-server logs through logrus' standard logger; Start lowers it to
// error level once, so that tests are not flooded with a line per connection.
package embedded
