package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/namedlock/mysql/keyfmt"
)

// Locker takes named locks on one lock pool. It is safe for concurrent use by
// multiple goroutines. Create one per process and lock pool with [New], and
// [Locker.Close] it when done: Close releases what it holds and stops its
// goroutines.
//
// Goroutines of one Locker that want the same key queue in-process; only the
// head of that queue holds or waits for a server connection, so one process
// never parks more than one connection per key in GET_LOCK. A Locker is not
// re-entrant: a goroutine that holds a key and acquires it again waits for
// itself until its ctx ends.
type Locker struct {
	db    *sql.DB
	cfg   config
	lease int64 // session wait_timeout, whole seconds

	mu     sync.Mutex
	keys   map[string]*queue // by server lock name
	closed bool
	ticker bool // the keep-alive goroutine runs

	stop    chan struct{}   // closed by Close: stops the Locker's goroutines
	bg      context.Context // cancelled by Close: bounds checks and kills
	bgStop  context.CancelFunc
	closing context.Context // cancelled (cause ErrClosed) as Close starts: ends server waits
	closeIt context.CancelCauseFunc
	wg      sync.WaitGroup // the Locker's goroutines: keep-alive, checks, killer
	killer  killer
	flavor  atomic.Int32
	stats   counters
	conns   knownConns
	closeMu sync.Mutex
}

// New returns a Locker on db, which should come from [pool.Open] (a
// dedicated lock pool). It panics if an option is out of range, as
// [regexp.MustCompile] does on a bad pattern; use [NewLocker] to get an error
// instead. New does no I/O.
func New(db *sql.DB, opts ...Option) *Locker {
	l, err := NewLocker(db, opts...)
	if err != nil {
		panic(err)
	}
	return l
}

// NewLocker is [New] that returns an error, matching [ErrInvalidOption], when
// an option or the combination of options is out of range (the keep-alive
// interval plus check timeout must be shorter than the lease).
func NewLocker(db *sql.DB, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalidOption)
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	bg, stop := context.WithCancel(context.Background())
	closing, closeIt := context.WithCancelCause(context.Background())
	l := &Locker{
		db:     db,
		cfg:    cfg,
		lease:  int64((cfg.lease + time.Second - 1) / time.Second),
		keys:   make(map[string]*queue),
		stop:   make(chan struct{}),
		bg:     bg,
		bgStop: stop,

		closing: closing,
		closeIt: closeIt,
	}
	l.killer.l = l
	return l, nil
}

// Acquire takes the lock named by key, waiting until it is granted or ctx
// ends. A nil error means the lock is held until [Lock.Release] (or until it
// is lost: watch [Lock.Done]). key may be any non-empty string; it is mapped
// to a portable server name by [keyfmt.Portable].
//
// A wait that ends because ctx ended returns an error matching both
// [ErrNotAcquired] and ctx.Err(); the server-side wait is ended at once and
// its connection discarded, so no session of this process keeps waiting.
func (l *Locker) Acquire(ctx context.Context, key string) (*Lock, error) {
	return l.acquire(ctx, key, false)
}

// TryAcquire takes the lock named by key if it is free now, and otherwise
// returns an error matching [ErrNotAcquired] without waiting for the holder.
// It still waits for a pool connection, within ctx.
func (l *Locker) TryAcquire(ctx context.Context, key string) (*Lock, error) {
	return l.acquire(ctx, key, true)
}

func (l *Locker) acquire(ctx context.Context, key string, try bool) (*Lock, error) {
	if key == "" {
		return nil, fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	start := time.Now()
	name := keyfmt.Portable(key)
	l.stats.waiting.Add(1)
	k, handoff, err := l.acquireQueued(ctx, key, name, try)
	l.stats.waiting.Add(-1)
	wait := time.Since(start)
	l.stats.waitNanos.Add(int64(wait))
	if err != nil {
		l.stats.notAcquired.Add(1)
		l.observe(Event{Key: key, Outcome: NotAcquired, Wait: wait, Err: err})
		return nil, err
	}
	l.stats.acquired.Add(1)
	l.stats.held.Add(1)
	if handoff {
		l.stats.handoffs.Add(1)
	} else {
		l.stats.serverAcquired.Add(1)
	}
	l.observe(Event{Key: key, Outcome: Acquired, Wait: wait, Handoff: handoff})
	return k, nil
}

func (l *Locker) observe(e Event) {
	if l.cfg.observer != nil {
		l.cfg.observer(e)
	}
}

// Close releases every lock the Locker holds (their holders see [Lock.Done]
// close and [Lock.Err] return [ErrClosed]; Do cancels fn's context with that
// cause), fails waiting callers with [ErrClosed], stops the Locker's
// goroutines and waits for them. It does not close the *sql.DB. A second
// Close returns ErrClosed.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	var sessions []*session
	for _, q := range l.keys {
		for _, w := range q.waiters {
			w.ch <- grant{err: ErrClosed}
		}
		l.stats.queued.Add(-int64(len(q.waiters)))
		q.waiters = nil
		if h := q.holder; h != nil {
			h.endLocked(stateClosed, ErrClosed)
			h.freed = true
			l.stats.held.Add(-1)
			q.holder = nil
		}
		q.linger = nil
		if q.sess != nil {
			q.sess.holder = nil
			sessions = append(sessions, q.sess)
			q.sess = nil
			delete(l.keys, q.name)
		}
		// A queue whose head is still at the server stays: the head sees
		// closed, gives back what it got and removes the queue.
	}
	close(l.stop)
	l.mu.Unlock()
	l.closeIt(ErrClosed) // callers waiting at the server give up

	errs := make([]error, len(sessions))
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Go(func() {
			errs[i] = s.release(context.Background(), l.cfg.releaseTimeout)
		})
	}
	wg.Wait()
	l.bgStop()
	l.wg.Wait()
	l.killer.close()
	return errors.Join(errs...)
}
