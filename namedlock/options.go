package namedlock

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/namedlock/mysql/internal/sqlident"
)

// Defaults of a [Locker]; each has an option to change it.
const (
	// DefaultKeepAlive is how often a held lock's connection proves that it
	// still owns the lock ([WithKeepAlive]).
	DefaultKeepAlive = 2 * time.Second
	// DefaultCheckTimeout bounds one ownership check ([WithCheckTimeout]). A
	// check that has not answered by then counts as a loss.
	DefaultCheckTimeout = 3 * time.Second
	// DefaultMaxHandoffs is how many times in a row a held server lock may be
	// handed to a local waiter before it goes back to the server
	// ([WithHandoff]). What handoffs buy one process on a hot key, and how
	// two instances share that key under these bounds, is measured by
	// BenchmarkHotKey and BenchmarkTwoInstances (docs/performance.md;
	// bench.sh runs them, WithHandoff tries other bounds).
	DefaultMaxHandoffs = 256
	// DefaultMaxHandoffTime is how long a server lock may be kept by handoffs
	// before it goes back to the server ([WithHandoff]): the longest turn
	// one instance takes while others wait, whatever the count.
	DefaultMaxHandoffTime = 10 * time.Millisecond
	// DefaultReleaseTimeout bounds the RELEASE_LOCK that Do, DoTx and Close run
	// after the critical section ([WithReleaseTimeout]).
	DefaultReleaseTimeout = 5 * time.Second
)

// Option configures a [Locker]. An option out of range makes [New] fail
// with an error matching [ErrInvalidOption].
type Option func(*config) error

type config struct {
	keepAlive      time.Duration
	checkTimeout   time.Duration
	maxHandoffs    int
	maxHandoffTime time.Duration
	releaseTimeout time.Duration
	observer       func(Event)
	fence          *fenceTable   // nil without fencing
	serialHandoff  bool          // WithSerializableHandoff
	batchMax       int           // WithBatchLimits; 0: the default
	batchTime      time.Duration //
}

func defaultConfig() config {
	return config{
		keepAlive:      DefaultKeepAlive,
		checkTimeout:   DefaultCheckTimeout,
		maxHandoffs:    DefaultMaxHandoffs,
		maxHandoffTime: DefaultMaxHandoffTime,
		releaseTimeout: DefaultReleaseTimeout,
	}
}

// newConfig applies opts to the defaults and validates the result against
// the lock pool's lease: the keep-alive must detect a dead session before
// the server's lease can hand the lock to someone else.
func newConfig(opts []Option, lease time.Duration) (config, error) {
	c := defaultConfig()
	for _, opt := range opts {
		if opt == nil {
			return c, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := opt(&c); err != nil {
			return c, err
		}
	}
	if c.fence != nil && c.serialHandoff {
		return c, fmt.Errorf("%w: WithFencing and WithSerializableHandoff are two ways to hand a DoTx's lock on before its COMMIT: choose one", ErrInvalidOption)
	}
	// Compared without adding, so huge values cannot overflow past the check.
	if c.keepAlive >= lease || c.checkTimeout >= lease-c.keepAlive {
		return c, fmt.Errorf("%w: keep-alive %v + check timeout %v must be shorter than the lock pool's lease %v (pool.WithLease), or a vanished holder's lock could be granted elsewhere before the holder is told",
			ErrInvalidOption, c.keepAlive, c.checkTimeout, lease)
	}
	return c, nil
}

// WithKeepAlive sets how often a held lock's pinned connection runs its
// ownership check (IS_USED_LOCK(name) = CONNECTION_ID()). A loss is detected
// within about d plus the round trip (an operator's KILL, a restart), or d
// plus the check timeout (a network that stops answering). d must be
// positive, and d + check timeout shorter than the lock pool's lease
// ([pool.WithLease]).
func WithKeepAlive(d time.Duration) Option {
	return positive("WithKeepAlive", d, func(c *config) { c.keepAlive = d })
}

// WithCheckTimeout bounds one ownership check. An answer slower than d is a
// loss; a slow answer within d is not. d must be positive.
func WithCheckTimeout(d time.Duration) Option {
	return positive("WithCheckTimeout", d, func(c *config) { c.checkTimeout = d })
}

// WithHandoff bounds handoffs: when a holder releases while goroutines of
// this Locker wait for the same key, the still-held server lock passes to the
// next of them directly, at most maxCount times in a row and for at most
// maxTime since the server granted it; then it is released to the server so
// that other instances get their turn. A lock released with nobody waiting,
// while earlier holders of it are still being proven, stays unheld for that
// proof (about one round trip): a caller of this Locker arriving meanwhile
// takes it over, which counts as a handoff. WithHandoff(0, 0) disables
// handoff.
func WithHandoff(maxCount int, maxTime time.Duration) Option {
	return func(c *config) error {
		if maxCount < 0 || maxTime < 0 {
			return fmt.Errorf("%w: WithHandoff(%d, %v): must not be negative", ErrInvalidOption, maxCount, maxTime)
		}
		c.maxHandoffs, c.maxHandoffTime = maxCount, maxTime
		return nil
	}
}

// WithReleaseTimeout bounds the RELEASE_LOCK run by Do, DoTx, DoMulti and
// Close. A release that does not answer in time discards its connection, so
// the server frees the lock when it sees the session end. d must be positive.
func WithReleaseTimeout(d time.Duration) Option {
	return positive("WithReleaseTimeout", d, func(c *config) { c.releaseTimeout = d })
}

// WithObserver registers fn to be called, synchronously, on every
// acquisition, failed acquisition, release and loss — a hook for metrics
// (wait time, hold time, outcome) that keeps the library free of any metrics
// package. fn must be fast, safe for concurrent use, and must not call the
// Locker. A panic in fn is recovered and counted in [Stats].ObserverPanics:
// the acquisition, release or loss it was told of goes on as if fn had
// returned (fn must not call runtime.Goexit, which cannot be recovered).
func WithObserver(fn func(Event)) Option {
	return func(c *config) error { c.observer = fn; return nil }
}

// WithFencing makes every holder of every key get a fencing token
// ([Lock.Token], [TokenFromContext]) minted in the fence table named table
// (name or schema.name) of db, the application's database, which must
// already exist ([CreateFenceTable]; it is never created implicitly, and a
// missing table is reported before the first lock is taken). A token is
// strictly greater than the token of any earlier holder of the same key,
// whether the lock came from the server or by a handoff. [Locker.DoTx] on db
// then mints the token inside its transaction, as its first statement,
// which makes the database itself keep stale holders from committing, and
// hands the lock to the next fenced DoTx as soon as its mint is done: see
// "Fenced" in DoTx's documentation and "Fencing" in the package's.
//
// Its cost is paid by every holder of the Locker, whether or not its
// writes check the token: each Do, TryDo, DoMulti, Acquire and TryAcquire
// that takes a lock from the server mints a block of tokens, one durable
// (autocommit) write on the application's database, before fn runs
// (holders the lock is then handed to take theirs from the block), and
// each DoTx runs one more statement, the mint, inside its transaction,
// where it waits while an earlier holder's transaction holds the key's
// fence row. Use a second Locker without fencing for keys whose holders do
// not need tokens. WithFencing and [WithSerializableHandoff] exclude each
// other ([ErrInvalidOption]).
func WithFencing(db *sql.DB, table string) Option {
	return func(c *config) error {
		f, err := newFence(db, table)
		if err != nil {
			return err
		}
		c.fence = f
		return nil
	}
}

// WithSerializableHandoff makes every [Locker.DoTx] of the Locker run its
// transaction at SERIALIZABLE and hand its lock to the next such DoTx of the
// Locker on the same key and database as soon as fn returns, before its
// COMMIT: on MySQL and MariaDB, whose serializable transactions lock what
// they read, the server then orders the two transactions where their rows
// meet. See "Serializable handoff" in DoTx's documentation for the
// guarantees and for what every other holder of the key waits for.
//
// What it costs: every DoTx of the Locker runs at SERIALIZABLE, where every
// plain SELECT is a locking read, so transactions that conflict without
// the lock's help (another key, another process) wait for each other and
// may end in deadlock errors, which roll the transaction back (DoTx returns
// the error; the call can be run again); the first caller waiting for a key
// begins its transaction while it waits, holding one connection of the
// application's pool per key; fn must read through its tx. A DoTx asking
// for another isolation level than the default or SERIALIZABLE, and one on
// a server whose serializable reads do not lock (TiDB, which refuses
// SERIALIZABLE or runs it as a snapshot), is refused with an error matching
// [ErrInvalidArgument]. WithSerializableHandoff and [WithFencing] exclude
// each other ([ErrInvalidOption]): New fails when both are given.
func WithSerializableHandoff() Option {
	return func(c *config) error { c.serialHandoff = true; return nil }
}

// newFence validates table and returns a fence on db.
func newFence(db *sql.DB, table string) (*fenceTable, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: WithFencing: nil *sql.DB", ErrInvalidOption)
	}
	quoted, err := sqlident.Quote(table)
	if err != nil {
		return nil, fmt.Errorf("%w: WithFencing: %w", ErrInvalidOption, err)
	}
	return &fenceTable{db: db, table: table, quoted: quoted}, nil
}

// positive returns an option that applies set when d is positive and
// fails with ErrInvalidOption, naming the option, otherwise.
func positive(option string, d time.Duration, set func(*config)) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: %s(%v): must be positive", ErrInvalidOption, option, d)
		}
		set(c)
		return nil
	}
}
