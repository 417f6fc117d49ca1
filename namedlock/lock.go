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
	// Set when made, never changed. Who guards the rest of one lock's
	// state (this Lock, its queue, its session): the map in release.go.
	l        *Locker
	q        *queue
	sess     *session
	key      string
	acquired time.Time

	// The fencing token (0 without fencing), read without a lock: set
	// when made, or by a mint that follows (acquire, DoTx, a DoBatch group).
	token atomic.Uint64

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
	s.commitBegunLocked()
	return func() {
		l.mu.Lock()
		s.commitEndedLocked()
		l.mu.Unlock()
	}, nil
}
