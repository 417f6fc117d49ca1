package namedlock

import (
	"context"
	"sync"
	"time"
)

// The release path: what becomes of a held lock once its holder lets go
// of it (Release, the end of a Do or DoTx, a DoTx's early handoff) or
// Close takes it back, until it is with its next local holder or back at
// the server. It reads top to bottom: the ways in, each deciding under
// l.mu what becomes of the lock — release (letGoLocked), a DoTx's early
// handoff (handOffEarly), Close (takeBackLocked); then carryOut, which
// carries out a holder's decision, with afterPassOn, the proof after a
// lock was passed on; last, the way back to the server (toServerLocked,
// releaseAtServer), which Close's giveBack takes as well.
//
// The rule for Locker.mu: decide under l.mu, then act without it. What
// happens to the lock — handed to the next local waiter, lingering for
// one, back to the server, or nothing more — is decided in one critical
// section under l.mu, together with every change of shared state that
// decision makes, and recorded in a letGo; then it is carried out without
// l.mu (the proof, the linger's grace, RELEASE_LOCK), which is taken again
// only for another such critical section. A function whose name ends in
// Locked, and every method of queue, is called with l.mu held and returns
// with it held; every other function on the path is called without it and
// returns without it. (awaitCommitsLocked waits for COMMITs by letting go
// of l.mu and taking it back, as sync.Cond.Wait does.)
//
// One lock's state, and what guards it:
//
//   - Locker (locker.go), under l.mu: queues (a queue per name some caller
//     is busy with), closed and closeDone, stmts and drained (the
//     statements Close waits for).
//   - queue (queue.go), every field under l.mu: the local holder, the
//     session it holds (or that lingers, or is being given back), the
//     waiters, linger, and the DoMultis' claims.
//   - Lock (lock.go): l, q, sess, key and acquired are set when it is made
//     and never change; token is atomic; state, err, freed, done, cancel
//     and what the observer is told of its acquisition are under l.mu.
//   - session (session.go): name, link and expires never change; under
//     l.mu, what the local holders share (acquiredAt, handoffs, proving,
//     lost, the COMMITs counted on it, the token block); under its
//     statement turn, whether the link is gone and why; under pmu, the
//     proof (provedAt, proofDone); under keeper.mu, the keep-alive's
//     schedule (nextCheck, checking, expiring).
//
// Lock order: batchSet.mu, then l.mu, then keeper.mu or a connBudget's
// mu. l.mu is never held together with a session's turn or pmu: no
// statement runs under it.

// Release gives the lock back. It returns nil when the server confirmed the
// release, or when the lock went straight to a local waiter and its session
// was then proven to still hold it (one ownership check, shared by the
// holders that let go meanwhile and bounded by the check timeout, unless a
// keep-alive check or release already proved it); an error matching
// [ErrLockLost] when the lock had been lost; an error when the release was
// not confirmed, in which case the connection was closed and the server
// frees the lock when it sees the session end.
//
// Release is idempotent: only the first call lets go of the lock. Every
// later call has no effect — no statement, never blocks or panics — and
// returns [ErrNotHeld] (after a loss, the loss again; after [Locker.Close],
// ErrClosed), which a caller may ignore, as in a deferred Release after an
// explicit one. Release on a nil *Lock returns ErrNotHeld.
//
// ctx bounds the RELEASE_LOCK statement, when one is needed: not a handoff
// to a waiter of this Locker, whose proof is bounded by the check timeout
// ([WithCheckTimeout]). If ctx ends before the server answers (or has ended
// already), the release is not confirmed: the connection is closed, so the
// lock is still freed, by the server, as soon as it sees the session end.
// A nil ctx panics, before anything changes.
func (k *Lock) Release(ctx context.Context) error {
	if k == nil {
		return ErrNotHeld
	}
	if ctx == nil {
		panic("namedlock: Release with a nil Context")
	}
	return k.release(ctx, 0, true)
}

// releaseWithin is Release for Do, DoTx, DoMulti and a grant given back: a
// RELEASE_LOCK, if one is needed, is bounded by timeout from when it
// starts, as a deadline on the connection's socket when it is known, which
// spares the driver's per-statement goroutine (see stmt.go).
func (k *Lock) releaseWithin(timeout time.Duration, observe bool) error {
	return k.release(context.Background(), timeout, observe)
}

// release lets go of k: to the next local waiter (a handoff), to a caller
// that may arrive while earlier holders are proven (a linger), or back to
// the server; see Release. timeout 0 bounds a RELEASE_LOCK by ctx alone.
// observe: the event that ends the hold goes to the observer.
func (k *Lock) release(ctx context.Context, timeout time.Duration, observe bool) error {
	l := k.l
	l.mu.Lock()
	p := k.letGoLocked()
	l.mu.Unlock()
	return k.carryOut(ctx, timeout, p, observe)
}

// letGo is what becomes of a lock that its holder let go of: decided, and
// begun, under l.mu (Lock.letGoLocked, Lock.handOffEarly), then carried
// out without it (Lock.carryOut).
type letGo struct {
	way letGoWay
	err error // letGoNone: the release's result
	// ended: this release ended the hold, and ev is the event that ends
	// it (its Err set once the release is done).
	ended bool
	ev    Event
	// released is when the holder let go; what the proof of a handoff or
	// a linger proves the session held the lock until.
	released time.Time
	// linger, for letGoLinger, is closed if a caller takes the lock over.
	linger chan struct{}
}

// letGoWay is where a lock that its holder let go of goes.
type letGoWay uint8

const (
	// letGoNone: nowhere, nothing is left to do: it was let go of already,
	// or lost (err says which).
	letGoNone letGoWay = iota
	// letGoServer: back to the server. toServerLocked has run;
	// releaseAtServer follows.
	letGoServer
	// letGoHandOff: to the next local waiter, who holds it already; the
	// proof that the session held it until then follows.
	letGoHandOff
	// letGoLinger: kept, unheld, for a caller arriving while earlier
	// holders of the session are proven; the proof follows, then a grace
	// for such a caller, then the server if none came.
	letGoLinger
)

// letGoLocked decides what becomes of k as its holder lets go of it, and
// makes the changes that decision needs: k is freed and released, and its
// session handed to the next local waiter, left lingering, or detached to
// go back to the server (toServerLocked). A passed-on session counts k in
// proving until carryOut's proof ends. l.mu held.
func (k *Lock) letGoLocked() letGo {
	l, q, s := k.l, k.q, k.sess
	if !k.freed || k.state == stateClosed {
		// Not let go of by its holder yet (Close may have taken it): it
		// returns only once the COMMITs it was handed ahead of have.
		l.awaitCommitsLocked(s)
	}
	if k.freed {
		err := k.err
		if k.state == stateReleased {
			err = fail(k.key, "not held", "already released", ErrNotHeld)
		}
		return letGo{err: err}
	}
	held := k.freeLocked()
	if k.state == stateLost {
		l.advanceLocked(q)
		return letGo{err: k.err}
	}
	p := k.endHoldLocked(held)
	p.way = letGoServer
	if q.mayHandOff(&l.cfg, l.closed) {
		if q.handOff(k.nextHolderLocked) {
			p.way = letGoHandOff
		} else if s.handoffs > 0 && s.proving > 0 {
			// Nobody waits, but earlier holders of this server lock wait
			// in prove and are likely back soon: keep the lock, unheld,
			// while this caller's own proof runs (and lingerGrace after).
			p.way, p.linger = letGoLinger, q.startLinger()
		}
	}
	if p.way == letGoServer {
		l.toServerLocked(q, s)
		return p
	}
	s.proving++
	return p
}

// endHoldLocked ends the hold of k, freed by its holder after held: k is
// released (its Done closes), and the letGo returned carries the event
// that ends the hold and the moment it ended. l.mu held.
func (k *Lock) endHoldLocked(held time.Duration) letGo {
	ev := k.holdEventLocked(Released, held, nil)
	k.endLocked(stateReleased, ErrNotHeld)
	return letGo{ended: true, ev: ev, released: time.Now()}
}

// freeLocked records that k's holder let go of it (Release ran, once) and
// returns how long it was held. l.mu held.
func (k *Lock) freeLocked() time.Duration {
	k.freed = true
	k.l.stats.held.Add(-1)
	return time.Since(k.acquired)
}

// holdEventLocked is the event that ends k's hold (Released or Lost), with
// what acquire recorded of the acquisition that began it. l.mu held.
func (k *Lock) holdEventLocked(o Outcome, held time.Duration, err error) Event {
	return Event{Key: k.key, Outcome: o, Wait: k.obsWait, Held: held, Handoff: k.obsHandoff, Session: k.sess.id, Err: err, Context: k.obsCtx}
}

// nextHolderLocked is the Lock that a handoff of k's session gives the
// waiter for key. l.mu held.
func (k *Lock) nextHolderLocked(key string) *Lock {
	return k.l.newHolderLocked(k.q, k.sess, key)
}

// handOffEarly passes k at once to the first local waiter if that waiter
// may take it early as e says (and the handoff bounds allow it), and
// returns the rest of the release, to be run later (it waits for the proof
// and reports the release); nil when it did not hand k on. ended, not nil
// at SERIALIZABLE, must be called exactly once, as soon as the holder's
// COMMIT (or ROLLBACK) has returned.
//
// A fenced DoTx calls it, with earlyFencedTx, once its own mint has locked
// the key's fence row: the next fenced DoTx then begins and waits at its
// own mint, inside the server, until this transaction ends, and reads what
// it wrote. Every other holder of a fenced Locker's lock mints as well
// (a token of a session's block is never handed out after a fenced DoTx
// held it: its mint ends the block), and so does every holder of another
// fenced instance: each waits at the fence row in the same way.
//
// A DoTx at SERIALIZABLE calls it, with earlySerialTx and its database,
// once fn has returned: the next one, on the same database and begun once
// first in line, reads only after this transaction ends what this one
// wrote. Only such a DoTx is ordered by the server; so the COMMIT is
// counted on the session (session.commits) until ended is called, and
// neither a holder of the session nor Close lets it go other than by
// another early handoff until every COMMIT counted there has returned
// (Locker.awaitCommitsLocked; the session stays under the keep-alive
// meanwhile): a Do, an Acquire, a DoTx of another kind, a caller taking
// over a linger, another instance at the server get the lock only after
// every COMMIT of the chain of early handoffs that came before them,
// unless the session is lost meanwhile. Either way the lock can go before
// the COMMIT, as InnoDB lets a row lock go.
func (k *Lock) handOffEarly(e early) (finish func() error, ended func()) {
	l, q, s := k.l, k.q, k.sess
	l.mu.Lock()
	if k.freed || k.state != stateHeld || len(q.waiters) == 0 || q.waiters[0].early != e || !q.mayHandOff(&l.cfg, l.closed) {
		l.mu.Unlock()
		return nil, nil
	}
	p := k.endHoldLocked(k.freeLocked())
	p.way = letGoHandOff
	q.handOff(k.nextHolderLocked)
	s.proving++
	if e.kind == earlySerialTx {
		s.commitBegunLocked()
		ended = func() {
			l.mu.Lock()
			s.commitEndedLocked()
			l.mu.Unlock()
		}
	}
	l.mu.Unlock()
	return func() error { return k.carryOut(context.Background(), 0, p, true) }, ended
}

// takenBack is a server lock that Close took back from its queue q, to
// give back to the server (Locker.giveBack).
type takenBack struct {
	q   *queue
	s   *session
	key string // the key of the session's holder (its name if none)
}

// takeBackLocked is Close's decision for every queue, the way in to the
// release path for what no holder let go of: waiters fail with ErrClosed;
// holders' holds end (ErrClosed), with the events that end them for the
// observer (taken; a lost one was reported); each session a queue has
// (held, or lingering) is to go to the server (give), and its queue keeps
// it until toServerLocked; an idle queue kept for claimants, who will see
// closed, goes. l.mu held.
func (l *Locker) takeBackLocked() (give []takenBack, taken []Event) {
	for name, q := range l.queues {
		q.fail(ErrClosed)
		key := name
		if h := q.holder; h != nil {
			key = h.key
			if l.cfg.observer != nil && h.state == stateHeld { // a lost one was reported
				taken = append(taken, h.holdEventLocked(Released, time.Since(h.acquired), ErrClosed))
			}
			h.endLocked(stateClosed, ErrClosed)
			h.freed = true
			l.stats.held.Add(-1)
		}
		if s := q.sess; s != nil {
			// Close gives it back (toServerLocked); q keeps it until then.
			q.holder, q.linger = nil, nil
			give = append(give, takenBack{q, s, key})
		} else if q.idle { // kept for claimants, who will see closed
			l.removeLocked(q)
		}
		// A queue without a session has its head at the server, or
		// releasing to it (a statement Close waits for), or not yet there
		// (a DoTx at SERIALIZABLE beginning): the head sees closed, gives
		// back what it got and removes the queue.
	}
	return give, taken
}

// carryOut does, without l.mu, what was decided for k as its holder let
// go of it (p), and returns the release's error: for a lock passed on,
// the proof's loss, if any; for one given back, the server's answer. A
// RELEASE_LOCK is bounded by timeout (0: by ctx alone). observe: the event
// that ends the hold, if this release ended it, goes to the observer.
func (k *Lock) carryOut(ctx context.Context, timeout time.Duration, p letGo, observe bool) error {
	var err error
	switch p.way {
	case letGoNone:
		return p.err // let go of already, or lost: no hold ends here
	case letGoServer:
		err = forKey(k.key, k.l.releaseAtServer(ctx, k.q, k.sess, timeout, k))
	case letGoHandOff, letGoLinger:
		err = k.afterPassOn(ctx, timeout, p)
	}
	if observe && p.ended {
		p.ev.Err = err
		k.l.observe(p.ev)
	}
	return err
}

// afterPassOn is what a holder that passed its lock on (p: to a waiter,
// or lingering) does next: it waits for the proof that the session held
// the lock until it let go, then, lingering, for a caller to take the lock
// over, at most lingerGrace; if none did, the lock goes back to the server
// after all (releaseAtServer, bounded by timeout, 0: by ctx alone). It
// returns the loss the proof found, if any, or else the server's answer.
func (k *Lock) afterPassOn(ctx context.Context, timeout time.Duration, p letGo) error {
	l, s := k.l, k.sess
	// The next caller has the lock without a round trip; this caller
	// returns once the session is proven to have held it until now.
	err := s.prove(l.bg, l.cfg.checkTimeout, p.released)
	if isLost(err) {
		l.lostFound(s, err)
		err = forKey(k.key, err)
	}
	if p.linger != nil && err == nil {
		t := time.NewTimer(lingerGrace)
		select {
		case <-p.linger:
		case <-t.C:
		}
		t.Stop()
	}
	l.mu.Lock()
	back := k.provenLocked(err, p.linger)
	l.mu.Unlock()
	if !back {
		return err
	}
	serr := forKey(k.key, l.releaseAtServer(ctx, k.q, s, timeout, k))
	if err != nil {
		return err // s was found lost (or the Locker closing) by prove
	}
	return serr
}

// provenLocked records that k's proof ended, with err: k no longer waits
// in prove, and a loss is k's. It reports whether the lock, left
// lingering by k (linger, nil if handed on), goes back to the server
// after all because nobody took it over; toServerLocked has then run.
// l.mu held.
func (k *Lock) provenLocked(err error, linger chan struct{}) (back bool) {
	l, q := k.l, k.q
	k.sess.proving--
	if isLost(err) {
		k.state, k.err = stateLost, err
		l.stats.lost.Add(1)
	}
	if linger == nil || q.linger != linger {
		return false // handed on, taken over, or taken back by Close
	}
	l.toServerLocked(q, k.sess)
	return true
}

// toServerLocked begins giving s, q's server lock, back to the server:
// once no COMMIT that s was handed ahead of is in flight (q keeps s
// meanwhile, so the keep-alive goes on checking it and a loss is found),
// it detaches s from q, which stays busy, with no holder, until
// releaseAtServer advances it (so no local caller goes to the server
// meanwhile), and counts the RELEASE_LOCK among the statements Close
// waits for. releaseAtServer must follow, without l.mu. l.mu held.
func (l *Locker) toServerLocked(q *queue, s *session) {
	l.awaitCommitsLocked(s)
	q.detach()
	l.stmts++
}

// awaitCommitsLocked waits until no COMMIT that s was handed ahead of
// (Lock.handOffEarly) is in flight: only then may s's lock go anywhere but
// to an early waiter. It is not bounded by any ctx: each of those COMMITs
// is bounded only by its own connection, and the lock must not go before
// it has returned. l.mu held, and held again when it returns; it lets go
// of l.mu while it waits, as sync.Cond.Wait does.
func (l *Locker) awaitCommitsLocked(s *session) {
	for s.commits > 0 {
		ch := s.commitsDone
		l.mu.Unlock()
		<-ch
		l.mu.Lock()
	}
}

// releaseAtServer gives s, q's server lock, back to the server once
// toServerLocked ran for it: it runs RELEASE_LOCK, bounded by timeout (0:
// by ctx alone), then lets q's next waiter go to the server, or removes
// q. k, if not nil, is the holder that let go: a loss the release finds
// is recorded on it. Lock.release and Close both give a lock back this
// way.
func (l *Locker) releaseAtServer(ctx context.Context, q *queue, s *session, timeout time.Duration, k *Lock) error {
	err := s.release(ctx, timeout)
	proved := s.provedTime()
	l.mu.Lock()
	var evs []Event
	if isLost(err) {
		s.lost = true // a COMMIT of an early handoff returning now is counted
		evs = l.lostCommitsLocked(s, proved, err)
		if k != nil && k.state != stateLost {
			// Found lost by the release itself: Err and later Releases say so.
			k.state, k.err = stateLost, forKey(k.key, err)
			l.stats.lost.Add(1)
		}
	} else {
		s.earlyCommits = nil // held until its release: after their COMMITs
	}
	l.stmtDoneLocked()
	l.advanceLocked(q)
	l.mu.Unlock()
	for _, ev := range evs {
		l.observe(ev)
	}
	return err
}

// giveBack gives every lock that Close took back (give) to the server, all
// at once, each RELEASE_LOCK bounded by the release timeout, and returns
// their errors.
func (l *Locker) giveBack(give []takenBack) []error {
	errs := make([]error, len(give))
	var wg sync.WaitGroup
	for i, h := range give {
		wg.Go(func() {
			l.mu.Lock()
			l.toServerLocked(h.q, h.s)
			l.mu.Unlock()
			errs[i] = forKey(h.key, l.releaseAtServer(context.Background(), h.q, h.s, l.cfg.releaseTimeout, nil))
		})
	}
	wg.Wait()
	return errs
}
