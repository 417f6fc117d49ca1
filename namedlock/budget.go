package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"weak"
)

// connBudget counts the connections of one lock pool that the Lockers on it
// use, against the pool's limit (sql.DB.SetMaxOpenConns; pool.WithMaxConns),
// so that a caller that needs several at once can reserve them all before
// it takes any (DoMulti). A Locker's queue of a name (which exists while
// some caller is busy with the name: acquiring it at the server, holding
// it, releasing it; or while it is idle, kept for the DoMultis that
// claimed it; see queue) uses at most one connection at a time, and
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
//
// The limit is the pool's as read at each take and give, and every
// recheckEvery by each waiter: a raised one grants the waiters it fits, a
// lowered one fails a waiter for more units than it allows. A limit
// lowered below the units in use breaks the promise that a unit's
// connection is due; a DoMulti that holds locks does not wait for a
// connection then (lockConn).
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

// recheckEvery is how often a caller waiting for units, or a DoMulti
// waiting for a connection while it holds locks, looks at the pool's limit
// again: sql.DB.SetMaxOpenConns tells nobody when it changes it.
const recheckEvery = 100 * time.Millisecond

// errOverLimit: a waiter needs more units than the pool's limit, lowered
// while it waited, allows at all.
type errOverLimit struct{ n, limit int }

func (e errOverLimit) Error() string {
	return fmt.Sprintf("it needs %d of the lock pool's connections at once, more than its limit of %d (sql.DB.SetMaxOpenConns lowered it)", e.n, e.limit)
}

// take waits until n units are free and takes them, or returns ctx's error
// or an errOverLimit (taking none). limit returns the pool's limit now (0:
// no limit); it is read again every recheckEvery while the caller waits, so
// that a raised limit grants the waiters it now fits and a lowered one
// ends the waiter it no longer can (n above it). The ticker is the
// caller's, stopped before take returns.
func (b *connBudget) take(ctx context.Context, n int, limit func() int) error {
	capacity := limit()
	b.mu.Lock()
	b.setCapacityLocked(capacity)
	if capacity > 0 && n > capacity {
		b.mu.Unlock()
		return errOverLimit{n, capacity}
	}
	if b.fits(n) {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &unitWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	tick := time.NewTicker(recheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.ready:
			return nil
		case <-ctx.Done():
			return b.abandon(w, ctx.Err())
		case <-tick.C:
		}
		capacity := limit() // not under b.mu: it takes the pool's lock
		b.mu.Lock()
		b.setCapacityLocked(capacity)
		over := capacity > 0 && n > capacity
		b.mu.Unlock()
		if over {
			return b.abandon(w, errOverLimit{n, capacity})
		}
	}
}

// abandon takes w out of the waiters (giving back its units if they were
// granted meanwhile) and returns err.
func (b *connBudget) abandon(w *unitWaiter, err error) error {
	b.mu.Lock()
	select {
	case <-w.ready: // granted meanwhile: give them back
		b.used -= w.n
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
	return err
}

// setCapacityLocked records the pool's limit as seen now and, when it
// changed, grants the waiters a raised one fits. b.mu held.
func (b *connBudget) setCapacityLocked(capacity int) {
	if capacity == b.capacity {
		return
	}
	b.capacity = capacity
	b.grantLocked()
}

// tryTake takes n units if they are free now, and reports whether it did.
func (b *connBudget) tryTake(n, capacity int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setCapacityLocked(capacity)
	if !b.fits(n) {
		return false
	}
	b.used += n
	return true
}

// overCommitted reports whether more units are in use than the pool's
// limit, capacity, now allows (it was lowered under them), and how many
// are.
func (b *connBudget) overCommitted(capacity int) (used int, over bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setCapacityLocked(capacity)
	return b.used, capacity > 0 && b.used > capacity
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

// reservation is what a DoMulti reserved for its keys (see
// Locker.reserve): a unit for each key that had no local queue then, and a
// claim on the queue of each key that had one. An acquisition of the
// DoMulti settles its key's part when it reaches the key (arriveLocked):
// a claimed key's queue is still there, since a claimed queue that its
// busy party leaves stays, idle, with its unit, for the claimant to take
// over (Locker.advanceLocked); an unclaimed key's unit serves the queue
// the acquisition makes, or, if someone made one meanwhile, goes back to
// the budget at once. So the DoMulti never needs a unit it does not have.
// Used by the DoMulti's goroutine alone, one acquisition at a time; left
// and claims under Locker.mu.
type reservation struct {
	l       *Locker
	left    int               // units of the unclaimed keys not yet reached
	claims  map[string]*queue // by server name: claimed queues not yet reached
	holding int               // locks the DoMulti holds (see lockConn)
}

type reservationKey struct{}

// reservationOf returns the reservation ctx carries, or nil.
func reservationOf(ctx context.Context) *reservation {
	r, _ := ctx.Value(reservationKey{}).(*reservation)
	return r
}

// arriveLocked settles the part of the reservation for the key named name,
// whose queue is q (nil: none), as the DoMulti's acquisition of it begins.
// It reports whether the acquisition has the unit of a new queue. l.mu
// held.
func (r *reservation) arriveLocked(name string, q *queue) bool {
	if cq, ok := r.claims[name]; ok {
		delete(r.claims, name)
		cq.claims--
		return false // cq is q: it stayed for this caller
	}
	if r.left == 0 {
		return false
	}
	r.left--
	if q != nil {
		r.l.budget.give(1) // someone made the queue meanwhile: its unit serves
		return false
	}
	return true
}

// end gives back what the DoMulti did not use: the units of the keys it
// did not reach and its claims on their queues (an idle queue that no one
// else claims goes, with its unit).
func (r *reservation) end() {
	if r.left == 0 && len(r.claims) == 0 {
		return // every key reached
	}
	l := r.l
	l.mu.Lock()
	for name, q := range r.claims {
		q.claims--
		if q.claims == 0 && q.idle && l.queues[name] == q {
			l.removeLocked(q)
		}
	}
	r.claims = nil
	left := r.left
	r.left = 0
	l.mu.Unlock()
	l.budget.give(left)
}

// stranded returns an error when an acquisition of the DoMulti, which
// holds locks, must not wait for a connection of the pool: the pool's
// limit was lowered below the units its Lockers hold, so the connection a
// unit stands for may never come — the DoMulti itself may hold the ones
// the pool keeps open. nil: the wait is bounded by others' work.
func (r *reservation) stranded(key string) error {
	capacity := r.l.capacity()
	used, over := r.l.budget.overCommitted(capacity)
	if !over {
		return nil
	}
	return fail(key, "not acquired", fmt.Sprintf("the lock pool's limit was lowered to %d connections (sql.DB.SetMaxOpenConns) while its Lockers count %d in use, and this DoMulti holds %d lock(s): it does not wait for a connection that may never come", capacity, used, r.holding), ErrNotAcquired, ErrInvalidArgument)
}

// lockConn returns a connection of db for an acquisition whose caller's
// ctx is callerCtx, waiting within ctx. One of a DoMulti that holds locks
// (which every unit it waits with is counted for, so that the connection is
// due: see DoMulti) looks at the pool's limit before it waits and every
// recheckEvery while it does, and gives up with reservation.stranded's
// error once the limit is below the units in use.
func lockConn(callerCtx, ctx context.Context, db *sql.DB, key string) (*sql.Conn, error) {
	r := reservationOf(callerCtx)
	if r == nil || r.holding == 0 {
		return db.Conn(ctx)
	}
	for {
		if err := r.stranded(key); err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, recheckEvery)
		conn, err := db.Conn(wctx)
		cancel()
		if err == nil || ctxEnded(ctx) || !errors.Is(err, context.DeadlineExceeded) {
			return conn, err
		}
	}
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
// new queue will use from the budget, if one is free. false: none is free.
// l.mu held (the budget's lock is taken under it, never the other way
// round).
func (l *Locker) takeUnitLocked() bool {
	b := l.budget
	if b == nil {
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
	err := l.budget.take(wctx, 1, l.capacity)
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
