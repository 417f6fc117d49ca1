// Package flavor holds what differs between the servers that the library
// and its tests talk to: how a server is recognised (Of, Detect), how it
// takes a GET_LOCK timeout (WaitArg), how it reports a deadlock (IsDeadlock)
// or a wait it ended itself (IsWaitKilled), which session variable limits
// how long a statement, a GET_LOCK wait included, may run
// (StatementTimeVar, NoStatementLimit), and which topologies make its named
// locks untrustworthy (CheckTopology: Galera, Group Replication in
// multi-primary mode).
//
// The kinds, and what matters about each here (from the servers' sources and
// probes of MariaDB 10.11, go-mysql-server and a TiDB build):
//
//   - MariaDB (VERSION() contains "MariaDB"): GET_LOCK takes fractional
//     seconds; a negative timeout answers NULL instead of waiting; a wait
//     ends when its client disconnects (polled every second) or is KILLed;
//     a KILL QUERY or the session's max_statement_time makes it answer NULL
//     (or fail with 1317 / 1969); deadlocks fail with error 1213.
//   - MySQL (Oracle MySQL, and any server not recognised as another kind:
//     Percona Server, ...): GET_LOCK takes whole seconds (0.3 becomes 0); a
//     wait ends on disconnect or KILL; KILL QUERY fails it with error 1317,
//     the session's max_execution_time with 3024; deadlocks fail with error
//     3058. (Read from the server's source and manual: no MySQL runs here.)
//   - Embedded (go-mysql-server, @@version_comment "Dolt"; package
//     internal/embedded runs one in-process): whole seconds; a wait ignores
//     disconnect and KILL and ends only at its timeout or when the lock is
//     granted; no deadlock detection.
//   - TiDB (VERSION() contains "TiDB"): treated like MySQL for timeouts. What
//     was measured on it: the timeout is clamped to 1–3600 s (0 waits 1 s), a
//     KILL does not end a wait, and there is no deadlock detection.
//     WaitsIgnoreCancel is still false for it: what a client's disconnect
//     does to its wait was not measured.
//
// Unknown, the zero Flavor, is no server: a caller that has not detected one
// yet.
package flavor
