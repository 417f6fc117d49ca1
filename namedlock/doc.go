// Package namedlock provides distributed mutual exclusion on MySQL and
// MariaDB named locks (GET_LOCK / RELEASE_LOCK).
//
// Several instances of a service that share one database use a [Locker] to
// make sure a critical section on one entity runs in one place at a time:
//
//	db, err := pool.Open(dsn)              // the dedicated lock pool
//	...
//	locker, err := namedlock.New(db)
//	...
//	defer locker.Close()
//	err = locker.Do(ctx, keyfmt.Key("product", 42), func(ctx context.Context) error {
//		return decrementStock(ctx, 42)     // on the application's primary pool
//	})
//
// # How a lock is held
//
// Each held lock pins one connection of the lock pool; GET_LOCK and
// RELEASE_LOCK run on that connection only, and the lock is that session's.
// Losing the connection loses the lock, and the holder is told:
// [Lock.Done] closes, [Lock.Err] returns [ErrLockLost], and Do cancels fn's
// context with that cause. While a lock is held, its connection proves every
// keep-alive interval ([WithKeepAlive], default 2 s) that it still owns the
// lock (IS_USED_LOCK(name) = CONNECTION_ID()); a check that fails, answers
// anything but 1, or does not answer within the check timeout
// ([WithCheckTimeout], default 3 s) is a loss. A slow answer within the
// timeout is not.
//
// Lock connections get a session wait_timeout equal to the lock pool's lease
// ([pool.WithLease], default 30 s): when a holder's host vanishes without closing
// its sockets, the server frees its locks within the lease instead of the
// default 8 hours. The keep-alive keeps a live holder's session from idling
// that long, and keep-alive + check timeout < lease (validated) means a
// holder cut off from the server is told before the server can grant its
// lock to anyone else.
//
// # Waiting
//
// Goroutines of one Locker waiting for the same key queue in the process;
// only the first of them waits at the server. When a holder releases while
// others of its process wait, the server lock is handed to the next of them
// without a round trip, at most [DefaultMaxHandoffs] times in a row and for
// at most [DefaultMaxHandoffTime] ([WithHandoff]); then it goes back to the
// server so other instances get their turn. A holder that handed the lock on
// returns from Release once one ownership check, shared with the holders
// before it, proves the session still held the lock after its release.
//
// A DoTx hands the lock on after its COMMIT, so that the next holder sees
// what it wrote. Two kinds hand it on earlier, to a waiter of their own
// kind, because the server itself then orders the two transactions: a
// fenced DoTx once its mint holds the key's fence row (see Fencing), and a
// DoTx of a Locker [WithSerializableHandoff] on MySQL or MariaDB, begun at
// SERIALIZABLE while it was first in line, once fn has returned (see
// [Locker.DoTx]). Both are explicit choices of the Locker, never a side
// effect of an isolation level, and exclude each other. On one hot key this
// is what lets the next transaction start while the last one's COMMIT is on
// its way, as transactions queued on a row lock do. A lock handed on with
// the serializable handoff goes to no other kind of holder (nor back to the server,
// also by Close) before every COMMIT it was handed ahead of has returned,
// unless it is lost meanwhile: another instance may then take it at the
// server first, as after any loss during an unfenced COMMIT. A COMMIT that
// returned an error on the client's side counts as returned.
//
// In every mode DoTx returns nil exactly when its transaction committed:
// a loss found during or after a COMMIT that succeeded is counted in
// [Stats].LostCommits and told to the observer, not returned, and a COMMIT
// that got no answer returns [ErrCommitUnknown] (it may have committed).
// Any other error means nothing was committed, so a caller may retry.
// DoTx takes a *sql.DB and gives fn a *sql.Tx; the subpackage sqlxlock
// gives fn a *sqlx.Tx, so that this package does not import sqlx.
//
// A wait that ends because ctx ended returns an error matching both
// [ErrNotAcquired] and ctx.Err(). The driver only closes its socket on
// cancellation and the server would keep the session waiting (and could even
// grant it the lock), so the Locker also kills that session (KILL
// CONNECTION) from a control connection outside the lock pool, and discards
// the connection. The session id it kills, and the one the keep-alive
// compares with, is the id the server gives the session as a lock's
// holder (IS_USED_LOCK), which must be what CONNECTION_ID() answers: on a
// pool whose sessions set pseudo_thread_id (a DSN parameter can), it is
// not, and no lock is taken there (an error matching ErrNotAcquired says
// why; [pool.Open] refuses such a DSN). Sub-second deadlines work on MySQL too, where GET_LOCK's
// timeout is whole seconds: the last partial second is cut by ctx.
//
// # TiDB
//
// TiDB's GET_LOCK is a pessimistic lock of a transaction that is never
// committed, and the Locker follows its rules (learned at the first
// acquisition): a KILL cannot end a wait there, so waits go in slices of
// 1 s and a cancelled one lingers at the server until its slice ends; error
// 1105 "pessimistic lock retry limit reached" is a slice that timed out;
// TiDB detects no deadlocks (take several keys with [Locker.DoMulti]);
// TryAcquire asks with a NOWAIT probe of mysql.advisory_locks, which needs
// the SELECT and UPDATE privileges on that table, and otherwise falls back
// to GET_LOCK(name, 0), which waits 1 s for a held lock; a lock lives at
// most performance.max-txn-ttl, after which TiDB may grant it to another
// session while the holder's still answers as its owner, so the keep-alive
// reports it lost before that (a tenth of max-txn-ttl earlier, 1 s to
// 1 min). The limit is read from @@tidb_config at the first acquisition; if
// that read fails, the acquisition fails with [ErrNotAcquired] and the next
// one reads it again (1 h, TiDB's default, is assumed only when TiDB
// refuses to say, as under its security enhanced mode). A lock pool that
// sends prepared statements is refused ([ErrNeedsInterpolation]).
//
// What TiDB cannot tell the Locker: a lock can end long before
// max-txn-ttl, unseen. The pessimistic lock behind GET_LOCK lives about
// 20 s unless the TiDB instance's client refreshes it (every 10 s), and
// that refresh stops for good after a timestamp fetch from PD that fails
// through its retries, or more than 10 failed heartbeats to TiKV in a row
// (client-go's keepAlive); the lock then expires and another session can
// be granted it, while the holder's IS_USED_LOCK and RELEASE_LOCK, which
// TiDB answers from the session's memory, still answer 1. No ownership
// check can detect it, so on TiDB a loss is reported only when the session
// or the hold limit ends it. Use fencing on TiDB ([WithFencing], a fenced
// [Locker.DoTx] or [CheckFenced] writes): the named lock keeps callers
// queued, and the fence row is what keeps two holders' writes apart.
//
// # Releasing
//
// RELEASE_LOCK must answer 1. Any other answer, an error or a timeout
// discards the connection, so a connection that may still hold a lock never
// goes back to the pool; the server frees the lock when the session ends.
// Release is idempotent: only the first call lets go of the lock; a later
// call has no effect and returns [ErrNotHeld] (or the loss, or ErrClosed),
// which a caller may ignore.
//
// # Errors
//
// Every error matches, with [errors.Is], the sentinels that say what
// happened ([ErrNotAcquired], [ErrLockLost], …) and the errors that caused
// it: ctx.Err() and the context's cause for a wait that ctx ended, the
// server's error (reachable with [errors.As] as a *mysql.MySQLError). Its
// text is one line that names the caller's key once and says what happened
// in words, for a log line:
//
//	namedlock: lock "order:7" lost: the lock's connection was closed by the server (killed?)
//	namedlock: lock "order:7" not acquired: the wait timed out (context deadline exceeded)
//
// Misuse — a nil fn, a nil database, [Locker.DoTx] given the lock pool —
// returns [ErrInvalidArgument] (an empty key [ErrInvalidKey], which matches
// it too) before anything is locked, counted or sent; a nil ctx panics, as
// it does in the standard library, just as early. A pool from pool.Open
// keeps the driver's own log lines (a broken connection) off the process's
// stderr: a lost lock is reported by its error alone.
//
// # What a lock is not
//
// A named lock alone is not a fencing token. A process that pauses (GC,
// swap, a stopped VM) after its last check may act after its lock is gone
// and granted elsewhere; detection is bounded, not instantaneous. Named
// locks live in one server's memory: they are not replicated, are lost on
// failover, and are node-local on Galera (pool.Open refuses wsrep_on=ON).
//
// # Fencing
//
// [WithFencing] adds what the lock alone cannot give: a fencing token per
// holder, checked by the database itself. A fence table in the
// application's database ([CreateFenceTable], once) holds one row per lock
// name; each new holder, from the server or by a handoff, increments its
// counter in one statement (INSERT … ON DUPLICATE KEY UPDATE token =
// LAST_INSERT_ID(token + 1)), so tokens of one key strictly increase in the
// order the lock was held. [Lock.Token] and [TokenFromContext] return it.
//
// In [Locker.DoTx] the mint is the transaction's first statement. It then
// holds the fence row's lock until COMMIT or ROLLBACK, so a second fenced
// transaction on the same key waits at its own mint until the first has
// ended, and then reads everything it wrote: two fenced DoTx on one key
// never interleave, even when the named lock was lost and granted
// elsewhere, even when the old holder ignores its cancelled ctx and commits
// late. The named lock keeps callers queued cheaply; the fence row keeps
// them correct. So a fenced DoTx hands the named lock to a fenced DoTx of
// the same Locker waiting for the key as soon as its own mint is done (that
// one waits at its mint, inside the server, for the COMMIT); any other next
// holder gets the lock only after the COMMIT. On TiDB, whose transactions
// read from a snapshot taken at their first statement, before the mint
// waited, a fenced DoTx must ask for READ COMMITTED, where each statement
// reads the latest commit; it refuses any other level, the default
// (REPEATABLE READ there) included, before anything runs, with
// [ErrFencing] and [ErrInvalidArgument], since a single snapshot can miss a
// write committed while the mint waited; and it refuses a session in optimistic
// transaction mode ([ErrFencing]), where the mint would wait for nobody.
// The one cost: a stale transaction that stays open holds the
// next holder back, until the server's innodb_lock_wait_timeout (50 s by
// default) fails the waiting mint with [ErrFenceWait]. Fencing costs every
// Do and Acquire of the Locker one durable write on the application's
// database, its mint ([WithFencing]).
//
// For work that is not one transaction on that database (a call to another
// service, a file in object storage, a row written later), use the token of
// Do or Acquire, minted in autocommit and never handed out twice, and make
// the write itself conditional: the protected row carries the last token,
// and the write is UPDATE … SET fence = token WHERE … AND fence < token
// ([CheckFenced] turns "no row changed" into [ErrStaleToken]). A token
// minted inside a DoTx that rolled back is minted again for the next
// holder, so do not stamp DoTx tokens on writes outside its transaction.
//
// Without fencing nothing changes: no table, no extra statement.
//
// # Batching: many critical sections, one commit
//
// On one hot key every caller of DoTx pays its own durable COMMIT, one
// after another. [Locker.DoBatch] and a [Merger] pay one per group: the
// callers of a key queued in this process when its lock comes are run
// together, in one transaction on the fence's database, committed once.
// Both are always fenced (one mint per group, one token per request), and
// the lock goes to no one else before the group's COMMIT has returned.
//
// Which to use: DoBatch takes a critical section written for DoTx
// unchanged; each runs in a savepoint of its own, so one section's error
// or panic undoes only its own work. It saves the COMMITs, and pays off
// where a COMMIT costs much (MySQL with its default durability; many
// callers). A Merger's fn is written for a group: it gets every request at
// once and can serve them with one read, one write and one multi-row
// insert; that is where the large gains are, on every server. The README's
// Performance section has the figures.
//
// # Lock names
//
// The server lock of key is named [keyfmt.Portable](key), the one mapping
// applied, so that a key means the same lock on MySQL 8 (case-insensitive,
// 64 characters), MariaDB (case-sensitive, 192 bytes) and the embedded
// go-mysql-server. A portable key (keyfmt.Key("product", 42) is
// "product:42") is its own server name; [Lock.Name] returns the name, and a
// program that takes the same lock with plain SQL uses
// GET_LOCK(keyfmt.Portable(key), ...).
//
// # Inside the package
//
// locker.go takes locks (the local queue first, then the server) and closes
// the Locker; queue.go is one name's local queue and its handoff rules, with
// no SQL; lock.go is the held Lock and its release (handoff, linger, proof,
// server); session.go is one held server lock: the ownership check and the
// release, serialized on its pinned connection; keepalive.go schedules the
// checks. server.go is the only door to the server (GET_LOCK, its waits and
// RELEASE_LOCK on a pinned connection), behind the small backend and link
// interfaces that the ordering tests fake; stmt.go runs its statements on
// the driver connection; killer.go ends the sessions of cancelled waits.
// fence.go mints fencing tokens; do.go and dotx.go wrap critical sections
// (serialtx.go is DoTx with the serializable handoff, handing its lock on
// before its COMMIT; the subpackage sqlxlock reaches DoTx through
// internal/txhook); group.go runs the groups of batch.go (DoBatch) and
// merger.go (Merger): a worker per busy key takes the lock, mints, runs the
// sections in their callers' goroutines and commits; event.go and
// stats.go are what an observer and Stats see (the metrics adapters live in
// the subpackages promlock and otellock, so that this one imports neither).
package namedlock
