package namedlock

import (
	"context"
	"sync/atomic"
	"time"
)

type lockState int

const (
	stateHeld lockState = iota
	stateReleased
	stateLost
	stateClosed
)

// Lock is a held named lock, returned by [Locker.Acquire] and
// [Locker.TryAcquire]. Its methods are safe for concurrent use. The lock
// lives on one pinned server connection (or, after a handoff, on the same
// connection passed to the next local caller); losing that connection loses
// the lock, and the holder is told through [Lock.Done] and [Lock.Err].
type Lock struct {
	l        *Locker
	q        *queue
	sess     *session
	key      string
	acquired time.Time
	token    atomic.Uint64 // the fencing token; 0 without fencing

	// Guarded by l.mu.
	state  lockState
	err    error
	freed  bool // Release has run (or Close took the lock)
	done   chan struct{}
	cancel context.CancelCauseFunc // Do's fn context

	// The acquisition that began the hold, for the event that ends it;
	// recorded by acquire only with an observer. Guarded by l.mu.
	obsCtx     context.Context
	obsWait    time.Duration
	obsHandoff bool
}

// closedChan is the closed channel Done returns for a nil *Lock.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Key returns the key the lock was acquired with; "" for a nil *Lock (as
// TryAcquire returns for a held key).
func (k *Lock) Key() string {
	if k == nil {
		return ""
	}
	return k.key
}

// Name returns the lock's name on the server, as IS_USED_LOCK and the
// process list show it: [keyfmt.Portable] of the key; "" for a nil *Lock.
func (k *Lock) Name() string {
	if k == nil {
		return ""
	}
	return k.q.name
}

// Token returns the lock's fencing token: 0 without fencing ([WithFencing]);
// with it, a number strictly greater than the token of every earlier holder
// of the same key. Locks from Acquire, TryAcquire, Do, TryDo and DoMulti get
// a token minted outside any transaction, never handed out twice; in DoTx it
// is minted inside the transaction (0 until then), and a transaction that
// rolls back leaves its token to be minted again for the next holder. A nil
// *Lock's token is 0.
func (k *Lock) Token() uint64 {
	if k == nil {
		return 0
	}
	return k.token.Load()
}

// Done returns a channel that is closed when the lock is released, lost, or
// taken back by [Locker.Close]. For a nil *Lock (as TryAcquire returns for
// a held key) it returns a closed channel: a lock never held is not held.
func (k *Lock) Done() <-chan struct{} {
	if k == nil {
		return closedChan
	}
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	if k.done == nil {
		k.done = make(chan struct{})
		if k.state != stateHeld {
			close(k.done)
		}
	}
	return k.done
}

// Err returns nil while the lock is held, an error matching [ErrLockLost]
// once it was found lost (even after Release), [ErrClosed] once
// [Locker.Close] took it back, and [ErrNotHeld] after a normal Release.
// On a nil *Lock (as TryAcquire returns for a held key) it returns
// ErrNotHeld.
func (k *Lock) Err() error {
	if k == nil {
		return ErrNotHeld
	}
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	return k.err
}

// closedMeanwhile reports whether Close took k back (before its holder
// had it: during the fencing mint).
func (k *Lock) closedMeanwhile() bool {
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	return k.state == stateClosed
}

// endLocked moves a held lock to its final state. l.mu must be held.
func (k *Lock) endLocked(state lockState, err error) {
	if k.state != stateHeld {
		return
	}
	k.state, k.err = state, err
	if k.done != nil {
		close(k.done)
	}
	if k.cancel != nil && state != stateReleased {
		k.cancel(err)
	}
}

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
func (k *Lock) release(ctx context.Context, timeout time.Duration, observe bool) error {
	l := k.l
	l.mu.Lock()
	if !k.freed || k.state == stateClosed {
		// Not let go of by its holder yet (Close may have taken it): it
		// returns only once the COMMITs it was handed ahead of have.
		l.awaitCommitsLocked(k.sess)
	}
	if k.freed {
		err := k.err
		if k.state == stateReleased {
			err = fail(k.key, "not held", "already released", ErrNotHeld)
		}
		l.mu.Unlock()
		return err
	}
	held := k.freeLocked()
	if k.state == stateLost {
		err := k.err
		l.advanceLocked(k.q)
		l.mu.Unlock()
		return err
	}
	ev := k.holdEventLocked(Released, held, nil)
	k.endLocked(stateReleased, ErrNotHeld)
	done, err := k.passOnLocked() // l.mu released if done
	if !done {
		err = k.releaseToServer(ctx, timeout, err)
	}
	if observe {
		ev.Err = err
		l.observe(ev)
	}
	return err
}

// holdEventLocked is the event that ends k's hold (Released or Lost), with
// what acquire recorded of the acquisition that began it. l.mu held.
func (k *Lock) holdEventLocked(o Outcome, held time.Duration, err error) Event {
	return Event{Key: k.key, Outcome: o, Wait: k.obsWait, Held: held, Handoff: k.obsHandoff, Session: k.sess.id, Err: err, Context: k.obsCtx}
}

// freeLocked records that k's holder let go of it (Release ran, once) and
// returns how long it was held. l.mu held.
func (k *Lock) freeLocked() time.Duration {
	k.freed = true
	k.l.stats.held.Add(-1)
	return time.Since(k.acquired)
}

// nextHolder is the Lock that a handoff of k's session gives the waiter for
// key. l.mu held.
func (k *Lock) nextHolder(key string) *Lock { return k.l.newLock(k.q, k.sess, key) }

// passOnLocked passes k's server lock to the next local waiter, or keeps it
// lingering for one, when the handoff bounds allow it, and then waits for
// the proof that the session held the lock until k let go. done reports
// that the lock stays with this process; otherwise it must go back to the
// server (err is then a loss the proof found, if any). Called with l.mu
// held; returns with it released when done, still held otherwise.
func (k *Lock) passOnLocked() (done bool, err error) {
	l, q, s := k.l, k.q, k.sess
	released := time.Now()
	handed, linger := false, chan struct{}(nil)
	if q.mayHandOff(&l.cfg, l.closed) {
		handed = q.handOff(k.nextHolder)
		if !handed && s.handoffs > 0 && s.proving > 0 {
			// Nobody waits, but earlier holders of this server lock wait
			// in prove and are likely back soon: keep the lock, unheld,
			// while this caller's own proof runs (and lingerGrace after).
			linger = q.startLinger()
		}
	}
	if !handed && linger == nil {
		return false, nil // l.mu still held: releaseToServer goes on
	}
	s.proving++
	l.mu.Unlock()
	return k.afterPassOn(released, linger)
}

// afterPassOn is what a holder that passed its lock on at released (to a
// waiter, or lingering) does next: it waits for the proof that the session
// held the lock until then. See passOnLocked. Called without l.mu, after
// s.proving was counted up; returns with l.mu held only when not done.
func (k *Lock) afterPassOn(released time.Time, linger chan struct{}) (done bool, err error) {
	l, q, s := k.l, k.q, k.sess
	// The next caller has the lock without a round trip; this caller
	// returns once the session is proven to have held it until now.
	err = s.prove(l.bg, l.cfg.checkTimeout, released)
	if isLost(err) {
		l.lostFound(s, err)
		err = forKey(k.key, err)
	}
	if linger != nil && err == nil {
		t := time.NewTimer(lingerGrace)
		select {
		case <-linger:
		case <-t.C:
		}
		t.Stop()
	}
	l.mu.Lock()
	s.proving--
	if isLost(err) {
		k.state, k.err = stateLost, err
		l.stats.lost.Add(1)
	}
	if linger == nil || q.linger != linger {
		l.mu.Unlock()
		return true, err
	}
	// Nobody came: back to the server after all, with l.mu held.
	return false, err
}

// releaseToServer gives k's session back to the server (toServerLocked),
// bounded by timeout (0: by ctx alone). proveErr is a loss already found by
// a proof. Called with l.mu held; returns with it released.
func (k *Lock) releaseToServer(ctx context.Context, timeout time.Duration, proveErr error) error {
	err := forKey(k.key, k.l.toServerLocked(ctx, k.q, k.sess, timeout, k))
	if proveErr != nil {
		err = proveErr // s was found lost (or the Locker closing) by prove
	}
	return err
}

// lostFound marks s lost and tells its current holder, if any: its Done
// closes, its Err and Release report err, and Do cancels fn's ctx.
func (l *Locker) lostFound(s *session, loss error) {
	proved := s.provedTime()
	l.mu.Lock()
	s.lost = true
	evs := l.lostCommitsLocked(s, proved, loss)
	defer func() {
		for _, ev := range evs {
			l.observe(ev)
		}
	}()
	q := l.queues[s.name]
	if q == nil || q.sess != s || q.holder == nil || q.holder.state != stateHeld {
		l.mu.Unlock()
		return
	}
	h := q.holder
	loss = forKey(h.key, loss)
	h.endLocked(stateLost, loss)
	ev := h.holdEventLocked(Lost, time.Since(h.acquired), loss)
	l.stats.lost.Add(1)
	l.mu.Unlock()
	l.observe(ev)
}

// lostCommitsLocked counts, as s is found lost (loss), the COMMITs of
// early handoffs of s that succeeded after the last statement that proved
// s held was sent (at proved): the loss may have come before or during
// them. It returns the Lost events to tell their calls. l.mu held.
func (l *Locker) lostCommitsLocked(s *session, proved time.Time, loss error) []Event {
	var evs []Event
	for _, c := range s.earlyCommits {
		if c.at.After(proved) {
			l.stats.lostCommits.Add(1)
			evs = append(evs, Event{Key: c.key, Outcome: Lost, Session: s.id, Err: forKey(c.key, loss), Context: c.ctx})
		}
	}
	s.earlyCommits = nil
	return evs
}

// earlyCommitted is called once the COMMIT of a DoTx that handed k on
// early (called with ctx) succeeded and the handoff's proof is done. A loss
// found by that proof, or of k's session found by anyone since, is counted
// in Stats.LostCommits (and told to the observer with ctx, if the proof did
// not tell it); otherwise the COMMIT is recorded on the session, so that a
// loss found later, before a check sent after this moment proved the
// session held, is counted for it as well.
func (l *Locker) earlyCommitted(ctx context.Context, k *Lock) {
	if isLost(k.Err()) {
		l.stats.lostCommits.Add(1) // the proof found it, and told the observer
		return
	}
	s := k.sess
	proved := s.provedTime()
	at := time.Now()
	l.mu.Lock()
	if s.lost {
		l.mu.Unlock()
		l.stats.lostCommits.Add(1)
		l.observe(Event{Key: k.key, Outcome: Lost, Session: s.id, Err: forKey(k.key, lost("found lost before this transaction's COMMIT returned, after it was handed on", nil)), Context: ctx})
		return
	}
	kept := s.earlyCommits[:0]
	for _, c := range s.earlyCommits {
		if c.at.After(proved) {
			kept = append(kept, c)
		}
	}
	s.earlyCommits = append(kept, earlyCommit{ctx: ctx, key: k.key, at: at})
	l.mu.Unlock()
}

// beginCommit counts the COMMIT that k's holder, a DoTx that did not hand
// k on early, is about to send (session.commits), so that Close gives the
// lock back only once that COMMIT has returned; ended must be called as
// soon as it has. When k is no longer held (lost, or taken by Close) it
// returns k's error instead: the transaction must be rolled back.
func (k *Lock) beginCommit() (ended func(), err error) {
	l, s := k.l, k.sess
	l.mu.Lock()
	defer l.mu.Unlock()
	if k.state != stateHeld {
		return nil, k.err
	}
	s.commitBegun()
	return func() {
		l.mu.Lock()
		s.commitEnded()
		l.mu.Unlock()
	}, nil
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
	ev := k.holdEventLocked(Released, k.freeLocked(), nil)
	k.endLocked(stateReleased, ErrNotHeld)
	released := time.Now()
	q.handOff(k.nextHolder)
	s.proving++
	if e.kind == earlySerialTx {
		s.commitBegun()
		ended = func() {
			l.mu.Lock()
			s.commitEnded()
			l.mu.Unlock()
		}
	}
	l.mu.Unlock()
	return func() error {
		_, err := k.afterPassOn(released, nil) // no linger: always done
		ev.Err = err
		l.observe(ev)
		return err
	}, ended
}
