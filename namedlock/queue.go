package namedlock

import (
	"database/sql"
	"time"
)

// queue is the local state of one server lock name: who holds it, whether a
// caller is at the server for it, and who waits behind. A queue exists in
// Locker.queues exactly while some caller is busy with the name (acquiring
// at the server, holding, or releasing to the server), or while it is idle,
// kept for the DoMultis that claimed it (claims). Its fields are
// guarded by Locker.mu; its methods are called with Locker.mu held and run
// no statement (see the map of one lock's state in release.go).
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
	// claims counts the DoMultis that reserved no unit for the name because
	// this queue was busy, and that have not reached it yet (reservation).
	// While some have not, the queue stays when its busy party is done with
	// nobody behind it: idle (no holder, session or waiter), keeping its
	// unit for them; the first caller to arrive takes it over as its head.
	claims int
	idle   bool
}

// waiter is a caller queued behind the busy party of a queue.
type waiter struct {
	ch    chan grant // buffered 1: whoever pops the waiter sends exactly once
	key   string     // the caller's key
	early early      // the lock may come to it before its holder's COMMIT
	// head, if the caller asked for it, is closed once the waiter is first
	// in line (a DoTx at SERIALIZABLE begins its transaction then); told
	// records that it was.
	head chan struct{}
	told bool
}

// early says whether a waiter may be handed the lock before the holder's
// transaction has committed (Lock.handOffEarly), because the server itself
// will order the waiter's transaction after the holder's.
type early struct {
	kind earlyKind
	db   *sql.DB // earlySerialTx: the database of the waiter's transaction
}

// earlyKind is the reason a waiter may take the lock early.
type earlyKind uint8

const (
	// earlyNone: only after the holder's COMMIT (a Do, an Acquire, an
	// unfenced DoTx below SERIALIZABLE).
	earlyNone earlyKind = iota
	// earlyFencedTx: a fenced DoTx. Its mint, its transaction's first
	// statement, waits inside the server for the holder's fence row.
	earlyFencedTx
	// earlySerialTx: an unfenced DoTx at SERIALIZABLE on a server whose
	// serializable reads lock (MySQL, MariaDB), begun once first in line. Its
	// reads of what the holder wrote, and its writes of what the holder
	// read, wait inside the server for the holder's row locks.
	earlySerialTx
)

// grant is what a queued caller receives: a handed-over lock, the turn to
// acquire at the server itself (promoted), or an error (the Locker closed).
type grant struct {
	lock     *Lock
	promoted bool
	err      error
}

// lingerGrace is how long a lingering lock (queue.linger) waits, after its
// last holder's proof, for the holders proven by the same check to come
// back, so that they do not lose the race to the server release.
const lingerGrace = 50 * time.Microsecond

// push queues a caller for key behind the busy party.
// wantHead: the caller wants to be told when it is first in line
// (waiter.head).
func (q *queue) push(key string, e early, wantHead bool) *waiter {
	// Not pooled: a channel made inside a testing/synctest bubble must not
	// be used outside it.
	w := &waiter{ch: make(chan grant, 1), key: key, early: e}
	if wantHead {
		w.head = make(chan struct{})
	}
	q.waiters = append(q.waiters, w)
	q.tellHead()
	return w
}

// tellHead tells the first waiter, if it asked to be told, that it is
// first in line.
func (q *queue) tellHead() {
	if len(q.waiters) == 0 {
		return
	}
	if w := q.waiters[0]; w.head != nil && !w.told {
		w.told = true
		close(w.head)
	}
}

// remove takes w out of the queue unpopped; false if it was popped (its
// grant is then in, or on its way to, w.ch).
func (q *queue) remove(w *waiter) bool {
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			q.tellHead()
			return true
		}
	}
	return false
}

// pop removes and returns the first waiter, or nil.
func (q *queue) pop() *waiter {
	if len(q.waiters) == 0 {
		return nil
	}
	w := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	q.tellHead()
	return w
}

// hold makes k the holder of s.
func (q *queue) hold(k *Lock, s *session) {
	q.holder, q.sess = k, s
}

// mayHandOff reports whether q's session may pass to one more local caller
// without going back to the server: within the handoff bounds of cfg,
// neither lost nor closing, and not past its expiry.
func (q *queue) mayHandOff(cfg *config, closing bool) bool {
	s := q.sess
	return s != nil && !closing && !s.lost && s.handoffs < cfg.maxHandoffs &&
		time.Since(s.acquiredAt) < cfg.maxHandoffTime &&
		(s.expires.IsZero() || time.Now().Before(s.expires))
}

// handOff passes the held server lock to the first waiter as next, which
// the caller built for that waiter's key; false if nobody waits.
func (q *queue) handOff(lockFor func(key string) *Lock) bool {
	w := q.pop()
	if w == nil {
		return false
	}
	next := lockFor(w.key)
	q.sess.handoffs++
	q.hold(next, q.sess)
	w.ch <- grant{lock: next}
	return true
}

// startLinger keeps the server lock, unheld, for a caller that may arrive
// while earlier holders are being proven; the returned channel is closed if
// one takes it over.
func (q *queue) startLinger() chan struct{} {
	q.linger = make(chan struct{})
	q.holder = nil
	return q.linger
}

// takeLinger hands a lingering lock to the arriving caller k; false if the
// lock is not lingering.
func (q *queue) takeLinger(k *Lock) bool {
	if q.linger == nil {
		return false
	}
	close(q.linger)
	q.linger = nil
	q.sess.handoffs++
	q.hold(k, q.sess)
	return true
}

// detach ends q's hold of the server lock: q stays busy (so no local caller
// goes to the server) until advance.
func (q *queue) detach() {
	q.holder, q.sess, q.linger = nil, nil, nil
}

// advance is called when q's busy party is done without passing a held
// lock on: the first waiter, if any, is promoted to acquire at the server,
// and advance returns true; otherwise (or when closing, which fails every
// waiter with ErrClosed) it returns false and q should be removed.
func (q *queue) advance(closing bool) bool {
	q.detach()
	if !closing {
		if w := q.pop(); w != nil {
			w.ch <- grant{promoted: true}
			return true
		}
	}
	q.fail(ErrClosed)
	return false
}

// fail sends err to every waiter.
func (q *queue) fail(err error) {
	for _, w := range q.waiters {
		w.ch <- grant{err: err}
	}
	q.waiters = nil
}
