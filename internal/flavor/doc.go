// Package flavor holds what differs between the servers that the library
// and its tests talk to: how a server is recognised (Of, Detect), how it
// takes a GET_LOCK timeout (WaitArg), how it reports a deadlock (IsDeadlock)
// or a wait it ended itself (IsWaitKilled), which session variable limits
// how long a statement, a GET_LOCK wait included, may run
// (StatementTimeVar, NoStatementLimit), how long a lock may live at all
// (MaxHold), and which topologies make its named
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
//   - TiDB (VERSION() contains "TiDB"; as a TiDB build with unistore behaves):
//     GET_LOCK is a pessimistic lock on a row of mysql.advisory_locks held
//     by an internal transaction that is never committed. Whole seconds,
//     clamped to 1–3600 s: GET_LOCK(name, 0) waits 1 s for a held lock
//     (TryWaits; TryProbe answers at once instead); a KILL or KILL QUERY
//     does not end a wait, so waits go in slices of 1 s as on the embedded
//     server (WaitsIgnoreCancel); no deadlock detection (DetectsDeadlocks);
//     under contention a wait may fail with error 1105 "pessimistic lock
//     retry limit reached" (IsRetryLimit), which is a wait that timed out;
//     a lock lives at most performance.max-txn-ttl (MaxHold), after which
//     another session can be granted it while the holder's session still
//     answers as its owner; prepared GET_LOCK statements miscount the
//     lock's references (NeedsInterpolation).
//
// Unknown, the zero Flavor, is no server: a caller that has not detected one
// yet.
package flavor
