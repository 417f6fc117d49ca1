// Package namedlock provides distributed mutual exclusion on MySQL and
// MariaDB named locks (GET_LOCK / RELEASE_LOCK).
//
// Several instances of a service that share one database use a [Locker] to
// make sure a critical section on one entity runs in one place at a time.
// The Locker lives on a dedicated lock pool ([pool.Open]), never on the
// application's own pool:
//
//	lockDB, err := pool.Open(dsn)
//	if err != nil { ... }
//	locker, err := namedlock.New(lockDB)
//	if err != nil { ... }
//	defer locker.Close()
//	err = locker.Do(ctx, keyfmt.Key("order", 7), func(ctx context.Context) error {
//		return settle(ctx, appDB, 7) // ctx is cancelled if the lock is lost
//	})
//
// # Which call
//
//   - [Locker.Do] runs fn while holding the key's lock, waiting for it;
//     [Locker.TryDo] runs it only if the key is free now, and reports
//     whether it ran ("held elsewhere" is not an error).
//   - [Locker.Acquire] returns a [Lock] to release yourself;
//     [Locker.TryAcquire] returns (nil, nil) when the key is held.
//   - [Locker.DoTx] runs fn in a transaction on the application's *sql.DB
//     and commits before it releases the lock. It returns nil exactly when
//     the transaction committed. [WithFencing] and [WithSerializableHandoff]
//     choose its mode for a Locker. Package namedlock/sqlxlock offers the
//     same for sqlx.
//   - [Locker.DoBatch] and [NewMerger] run the sections queued for a hot key
//     in one transaction, committed once; they need [WithFencing].
//   - [Locker.DoMulti] takes several keys in one canonical order.
//
// # The contract in brief
//
// A nil error from an acquisition means this process holds the lock: no
// other Locker, in any process, holds the same key on the same server until
// it is released or lost. Each held lock pins one connection of the lock
// pool; losing the session loses the lock, and the holder is told:
// [Lock.Done] closes, [Lock.Err] returns [ErrLockLost], and Do cancels fn's
// context with that cause. The keep-alive ([WithKeepAlive]) checks
// ownership, and a check that fails or does not answer within
// [WithCheckTimeout] is a loss. The lease ([pool.WithLease]) bounds how
// long the server keeps the locks of a vanished host. A wait that ctx ends
// returns an error matching both [ErrNotAcquired] and ctx.Err(), and the
// waiting session is killed so that it cannot be granted the lock later.
//
// Goroutines of one Locker waiting for the same key queue in the process;
// only the first waits at the server, and a released lock is handed to the
// next local waiter without a round trip, within the bounds of
// [WithHandoff], before it goes back to the server for other instances.
//
// A named lock alone is not a fencing token: a paused process may act after
// its lock is gone. [WithFencing] gives each holder a token
// ([Lock.Token], [TokenFromContext]) checked by the database: a fenced
// DoTx's transaction holds the key's fence row, and [CheckFenced] turns a
// stale conditional write into [ErrStaleToken].
//
// The full text, with what each fault looks like to the holder and how fast
// it is seen, is in [guarantees]; DoTx's modes and the hot-key calls in
// [transactions]; what differs on MySQL, MariaDB, TiDB and the embedded
// server in [servers]; metrics and stuck locks in [operations].
//
// # Errors
//
// Every error matches, with [errors.Is], the sentinels that say what
// happened ([ErrNotAcquired], [ErrLockLost], …) and the errors that caused
// it: ctx.Err() and the context's cause for a wait that ctx ended, the
// server's error (reachable with [errors.As] as a *mysql.MySQLError). Its
// text is one line that names the caller's key once:
//
//	namedlock: lock "order:7" lost: the lock's connection was closed by the server (killed?)
//	namedlock: lock "order:7" not acquired: the wait timed out (context deadline exceeded)
//
// Misuse — a nil fn, a nil database, DoTx given the lock pool — returns
// [ErrInvalidArgument] (an empty key [ErrInvalidKey], which matches it too)
// before anything is locked, counted or sent; a nil ctx panics, as it does
// in the standard library.
//
// # Lock names
//
// The server lock of key is named [keyfmt.Portable](key), so that a key
// means the same lock on every supported server. A portable key
// (keyfmt.Key("product", 42) is "product:42") is its own server name;
// [Lock.Name] returns the name, and a program that takes the same lock with
// plain SQL uses GET_LOCK(keyfmt.Portable(key), ...).
//
// [guarantees]: https://github.com/namedlock/mysql/blob/main/docs/guarantees.md
// [transactions]: https://github.com/namedlock/mysql/blob/main/docs/transactions.md
// [servers]: https://github.com/namedlock/mysql/blob/main/docs/servers.md
// [operations]: https://github.com/namedlock/mysql/blob/main/docs/operations.md
package namedlock
