package namedlock

import (
	"context"
	"sync"
	"time"
)

// queue is the local state of one server lock name: who holds it, whether a
// caller is at the server for it, and who waits behind. A queue exists in
// Locker.keys exactly while some caller is busy with the name (acquiring at
// the server, holding, or releasing to the server); all fields are guarded
// by Locker.mu.
type queue struct {
	name    string
	holder  *Lock    // the local holder, nil while the head acquires or releases
	sess    *session // the server lock while held by holder (or lingering)
	waiters []*waiter
	// linger is non-nil while sess is held with no local holder, after a
	// release that found no waiter while earlier holders were still being
	// proven (see Lock.release); a caller arriving meanwhile takes the lock
	// over, as by a handoff, and closes linger.
	linger chan struct{}
}

// waiter is a caller queued behind the busy party of a queue.
type waiter struct {
	ch  chan grant // buffered 1: whoever pops the waiter sends exactly once
	key string     // the caller's key
}

// waiters are pooled: once its caller has received its grant, or removed it
// from the queue unpopped, nothing refers to a waiter any more.
var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan grant, 1)} }}

func putWaiter(w *waiter) {
	w.key = ""
	waiterPool.Put(w)
}

// grant is what a queued caller receives: a handed-over lock, the turn to
// acquire at the server itself (promoted), or an error (the Locker closed).
type grant struct {
	lock     *Lock
	promoted bool
	err      error
}

// acquireQueued returns a held lock, whether it came by handoff, or an error.
func (l *Locker) acquireQueued(ctx context.Context, key, name string, try bool) (*Lock, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, notAcquired(ctx, key, nil)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, false, ErrClosed
	}
	q := l.keys[name]
	if q != nil && q.linger != nil && l.handoffAllowed(q.sess) {
		s := q.sess
		close(q.linger)
		q.linger = nil
		s.handoffs++
		k := &Lock{l: l, q: q, sess: s, key: key, acquired: time.Now()}
		s.holder, q.holder = k, k
		l.mu.Unlock()
		return k, true, nil
	}
	if q == nil {
		q = &queue{name: name}
		l.keys[name] = q
		l.mu.Unlock()
		k, err := l.acquireAtServer(ctx, q, key, try)
		return k, false, err
	}
	if try {
		l.mu.Unlock()
		return nil, false, notAcquired(ctx, key, nil)
	}
	w := waiterPool.Get().(*waiter)
	w.key = key
	q.waiters = append(q.waiters, w)
	l.stats.queued.Add(1)
	l.mu.Unlock()

	select {
	case g := <-w.ch:
		putWaiter(w)
		return l.received(ctx, q, key, g)
	case <-ctx.Done():
	}
	l.mu.Lock()
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			l.stats.queued.Add(-1)
			l.mu.Unlock()
			putWaiter(w)
			return nil, false, notAcquired(ctx, key, nil)
		}
	}
	l.mu.Unlock()
	// Popped concurrently: the grant is in the channel. Give it back.
	g := <-w.ch
	putWaiter(w)
	switch {
	case g.lock != nil:
		l.stats.held.Add(1) // release counts it down again
		// nil: bounded by the release timeout.
		_ = g.lock.release(nil, false)
	case g.promoted:
		l.mu.Lock()
		l.advanceLocked(q)
		l.mu.Unlock()
	}
	return nil, false, notAcquired(ctx, key, nil)
}

// received handles the grant a queued caller was sent.
func (l *Locker) received(ctx context.Context, q *queue, key string, g grant) (*Lock, bool, error) {
	switch {
	case g.err != nil:
		return nil, false, g.err
	case g.lock != nil:
		return g.lock, true, nil
	}
	k, err := l.acquireAtServer(ctx, q, key, false)
	return k, false, err
}

// acquireAtServer is run by the head of q: it takes the server lock on a
// pinned connection, then installs itself as q's holder.
func (l *Locker) acquireAtServer(ctx context.Context, q *queue, key string, try bool) (*Lock, error) {
	// Close ends a wait at the server (or for a pool connection) at once.
	// A ctx that can never end needs no merging: l.closing alone will do,
	// without a context and a registration with l.closing per acquisition.
	sctx, cancel := l.closing, context.CancelCauseFunc(func(error) {})
	stop := func() bool { return true }
	if ctx.Done() != nil {
		sctx, cancel = context.WithCancelCause(ctx)
		stop = context.AfterFunc(l.closing, func() { cancel(ErrClosed) })
	}
	s, err := l.serverAcquire(ctx, sctx, key, q.name, try)
	stop()
	cancel(nil)
	l.mu.Lock()
	if err != nil && l.closed && ctx.Err() == nil {
		err = ErrClosed
	}
	if err == nil && l.closed {
		l.mu.Unlock()
		_ = s.release(context.Background(), l.cfg.releaseTimeout)
		l.mu.Lock()
		err = ErrClosed
	}
	if err != nil {
		l.advanceLocked(q)
		l.mu.Unlock()
		return nil, err
	}
	now := time.Now()
	s.acquiredAt = now
	s.nextCheck = now.Add(l.cfg.keepAlive)
	k := &Lock{l: l, q: q, sess: s, key: key, acquired: now}
	s.holder = k
	q.holder, q.sess = k, s
	l.startKeepAliveLocked()
	l.mu.Unlock()
	return k, nil
}

// advanceLocked is called when q's busy party is done without passing a
// held lock on: the first waiter, if any, gets the turn to acquire at the
// server; otherwise q is removed.
func (l *Locker) advanceLocked(q *queue) {
	q.holder, q.sess, q.linger = nil, nil, nil
	if len(q.waiters) > 0 && !l.closed {
		w := q.waiters[0]
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		l.stats.queued.Add(-1)
		w.ch <- grant{promoted: true}
		return
	}
	for _, w := range q.waiters {
		w.ch <- grant{err: ErrClosed}
	}
	l.stats.queued.Add(-int64(len(q.waiters)))
	q.waiters = nil
	if l.keys[q.name] == q {
		delete(l.keys, q.name)
	}
}

// lingerGrace is how long a lingering lock (queue.linger) waits, after its
// last holder's proof, for the holders proven by the same check to come
// back; measured here, without it they lose the race to the server release.
const lingerGrace = 50 * time.Microsecond

// handoffAllowed reports whether s may pass to one more local caller
// without going back to the server: within the handoff bounds, and neither
// lost nor closing. l.mu held.
func (l *Locker) handoffAllowed(s *session) bool {
	return !l.closed && !s.lost && s.handoffs < l.cfg.maxHandoffs &&
		time.Since(s.acquiredAt) < l.cfg.maxHandoffTime
}

// handoffLocked passes k's held server lock to the first waiter of q when
// the handoff bounds allow it, and reports whether it did.
func (l *Locker) handoffLocked(q *queue, s *session) bool {
	if len(q.waiters) == 0 || !l.handoffAllowed(s) {
		return false
	}
	w := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	l.stats.queued.Add(-1)
	s.handoffs++
	next := &Lock{l: l, q: q, sess: s, key: w.key, acquired: time.Now()}
	s.holder = next
	q.holder = next
	w.ch <- grant{lock: next}
	return true
}
