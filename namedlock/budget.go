package namedlock

import (
	"context"
	"database/sql"
	"runtime"
	"sync"
	"weak"
)

// connBudget counts the connections of one lock pool that the Lockers on it
// use, against the pool's limit (sql.DB.SetMaxOpenConns; pool.WithMaxConns),
// so that a caller that needs several at once can reserve them all before
// it takes any (DoMulti). A Locker's queue of a name (which exists while
// some caller is busy with the name: acquiring it at the server, holding
// it, releasing it; see queue) uses at most one connection at a time, and
// counts one unit for its whole life: taken before the queue is made, given
// back when it is removed, by which time its connection is back in the
// pool or discarded. The unit passes with the queue, from holder to
// holder by handoff and to the waiter promoted to acquire at the server,
// so no caller first in a queue ever waits for one: a caller waits for a
// unit before it makes a queue, in no queue and holding nothing, and the
// callers queued behind a busy party need none. The units in use never
// exceed the limit, so a caller that has one never waits long for a
// connection: only for what uses the pool outside the Lockers.
//
// Units are granted in order of arrival to every waiter they fit (first
// fit): a caller that needs n waits until n are free at once, and callers
// that need fewer are not held up behind it. Its wait is bounded by its
// ctx, never by the others: while single acquisitions keep all but fewer
// than n units in use, it waits. (Holding later callers behind it instead
// would let one DoMulti, waiting with no deadline behind long-held locks,
// stop every acquisition of the pool although connections are free.)
type connBudget struct {
	mu       sync.Mutex
	used     int
	capacity int // the pool's limit as last seen; 0: none
	waiters  []*unitWaiter
}

// unitWaiter is a caller waiting for n units; ready is closed once they
// are its.
type unitWaiter struct {
	n     int
	ready chan struct{}
}

// budgets holds the budget of every lock pool that has a Locker, by pool:
// Lockers on one *sql.DB share its connections, hence one budget. An entry
// goes when its pool is garbage collected.
var budgets sync.Map // weak.Pointer[sql.DB] -> *connBudget

// budgetOf returns db's budget.
func budgetOf(db *sql.DB) *connBudget {
	key := weak.Make(db)
	if b, ok := budgets.Load(key); ok {
		return b.(*connBudget)
	}
	b, loaded := budgets.LoadOrStore(key, new(connBudget))
	if !loaded {
		runtime.AddCleanup(db, func(k weak.Pointer[sql.DB]) { budgets.Delete(k) }, key)
	}
	return b.(*connBudget)
}

// take waits until n units are free and takes them, or returns ctx's error
// (taking none). capacity is the pool's limit now (0: no limit; n must not
// exceed a limit).
func (b *connBudget) take(ctx context.Context, n, capacity int) error {
	b.mu.Lock()
	b.capacity = capacity
	b.grantLocked() // those that fit a raised limit first
	if b.fits(n) {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &unitWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	select {
	case <-w.ready: // granted meanwhile: give them back
		b.used -= n
	default:
		for i, x := range b.waiters {
			if x == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
	}
	b.grantLocked() // what w gave back may fit others
	b.mu.Unlock()
	return ctx.Err()
}

// tryTake takes n units if they are free now, and reports whether it did.
func (b *connBudget) tryTake(n, capacity int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.capacity = capacity
	b.grantLocked()
	if !b.fits(n) {
		return false
	}
	b.used += n
	return true
}

// give gives n units back; nothing on a nil budget.
func (b *connBudget) give(n int) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.grantLocked()
	b.mu.Unlock()
}

// fits reports whether n more units fit. b.mu held.
func (b *connBudget) fits(n int) bool {
	return b.capacity <= 0 || b.used+n <= b.capacity
}

// grantLocked grants units to the waiters they fit, in order of arrival.
// b.mu held.
func (b *connBudget) grantLocked() {
	kept := b.waiters[:0]
	for _, w := range b.waiters {
		if b.fits(w.n) {
			b.used += w.n
			close(w.ready)
			continue
		}
		kept = append(kept, w)
	}
	clear(b.waiters[len(kept):])
	b.waiters = kept
}

// reservation is the units a DoMulti reserved for its keys; each of its
// acquisitions that makes a queue takes one from it instead of from the
// budget. Used by the DoMulti's goroutine alone, one acquisition at a
// time.
type reservation struct{ left int }

type reservationKey struct{}

// reservationOf returns the reservation ctx carries, or nil.
func reservationOf(ctx context.Context) *reservation {
	r, _ := ctx.Value(reservationKey{}).(*reservation)
	return r
}

// capacity is the lock pool's limit of open connections now (0: none, or
// no pool).
func (l *Locker) capacity() int {
	if l.pool == nil {
		return 0
	}
	return l.pool.Stats().MaxOpenConnections
}

// takeUnitLocked takes, without waiting, the unit of the connection that a
// new queue will use: from the caller's reservation (ctx, a DoMulti's) when
// it has one left, otherwise from the budget if one is free. false: none
// is free. l.mu held (the budget's lock is taken under it, never the other
// way round).
func (l *Locker) takeUnitLocked(ctx context.Context) bool {
	b := l.budget
	if b == nil {
		return true
	}
	if r := reservationOf(ctx); r != nil && r.left > 0 {
		r.left--
		return true
	}
	return b.tryTake(1, l.capacity())
}

// waitUnit waits, within ctx and until Close, for the unit of a new
// queue's connection and takes it. Its error is the acquisition's: ctx's
// (ErrNotAcquired), or ErrClosed.
func (l *Locker) waitUnit(ctx context.Context, key string) error {
	wctx, cancel := l.closing, context.CancelCauseFunc(func(error) {})
	stop := func() bool { return true }
	if ctx.Done() != nil {
		wctx, cancel = context.WithCancelCause(ctx)
		stop = context.AfterFunc(l.closing, func() { cancel(ErrClosed) })
	}
	err := l.budget.take(wctx, 1, l.capacity())
	stop()
	cancel(nil)
	if err == nil {
		return nil
	}
	if ctx.Err() == nil {
		return ErrClosed
	}
	return notAcquired(ctx, key, nil)
}
