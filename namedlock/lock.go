package namedlock

import (
	"context"
	"errors"
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

	// guarded by l.mu
	state  lockState
	err    error
	freed  bool // Release has run (or Close took the lock)
	done   chan struct{}
	cancel context.CancelCauseFunc // Do's fn context
}

// Key returns the key the lock was acquired with.
func (k *Lock) Key() string { return k.key }

// Name returns the lock's name on the server, as IS_USED_LOCK and the
// process list show it ([keyfmt.Portable] of the key).
func (k *Lock) Name() string { return k.q.name }

// Done returns a channel that is closed when the lock is released, lost, or
// taken back by [Locker.Close].
func (k *Lock) Done() <-chan struct{} {
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
func (k *Lock) Err() error {
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	return k.err
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
// [ErrLockLost] when the lock had been lost (every later call too); an error
// when the release was not confirmed, in which case the connection was
// discarded and the server frees the lock as the session ends. A second
// Release returns [ErrNotHeld] (or ErrClosed / ErrLockLost); it never blocks
// or panics. Release on a nil *Lock returns ErrNotHeld.
func (k *Lock) Release(ctx context.Context) error {
	if k == nil {
		return ErrNotHeld
	}
	return k.release(ctx, true)
}

// release is Release; a nil ctx bounds the RELEASE_LOCK, if one is needed,
// by the release timeout alone (Do, DoTx, DoMulti, a grant given back), as
// a deadline on the connection's socket when it is known (see
// queryIntsUntil). A caller's ctx is used as given, through the driver's
// cancellation: one that cannot end leaves the release unbounded, as before,
// and one that can end may be cancelled early, which no deadline can
// express.
func (k *Lock) release(ctx context.Context, observe bool) error {
	l := k.l
	l.mu.Lock()
	if k.freed {
		err := k.err
		if k.state == stateReleased {
			err = ErrNotHeld
		}
		l.mu.Unlock()
		return err
	}
	k.freed = true
	l.stats.held.Add(-1)
	held := time.Since(k.acquired)
	q, s := k.q, k.sess
	if k.state == stateLost {
		err := k.err
		l.advanceLocked(q)
		l.mu.Unlock()
		return err
	}
	k.endLocked(stateReleased, ErrNotHeld)
	released := time.Now()
	handed := l.handoffLocked(q, s)
	var linger chan struct{}
	var proveErr error
	if !handed && s.handoffs > 0 && s.proving > 0 && l.handoffAllowed(s) {
		// Nobody waits, but earlier holders of this server lock wait in
		// prove and are likely back soon: keep the lock, unheld, while this
		// caller's own proof runs (and lingerGrace after it). A local
		// caller arriving meanwhile takes it over, as by a handoff.
		linger = make(chan struct{})
		s.holder, q.holder, q.linger = nil, nil, linger
	}
	if handed || linger != nil {
		s.proving++
		l.mu.Unlock()
		// The next caller has the lock without a round trip; this caller
		// returns once the session is proven to have held it until now.
		err := l.prove(s, released)
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
		if errors.Is(err, ErrLockLost) {
			k.state, k.err = stateLost, err
			l.stats.lost.Add(1)
		}
		if linger == nil || q.linger != linger {
			l.mu.Unlock()
			if observe {
				l.observe(Event{Key: k.key, Outcome: Released, Held: held, Err: err})
			}
			return err
		}
		// Nobody came: back to the server after all.
		q.linger, proveErr = nil, err
	}
	// Back to the server. The queue stays busy (holder nil) until then, so
	// no local caller goes to the server meanwhile.
	s.holder = nil
	q.holder, q.sess = nil, nil
	l.mu.Unlock()
	var err error
	if ctx == nil {
		err = s.release(context.Background(), l.cfg.releaseTimeout)
	} else {
		err = s.release(ctx, 0)
	}
	if proveErr != nil {
		err = proveErr // s was found lost (or the Locker closing) by prove
	}
	l.mu.Lock()
	if errors.Is(err, ErrLockLost) && k.state != stateLost {
		// Found lost by the release itself: Err and later Releases say so.
		k.state, k.err = stateLost, err
		l.stats.lost.Add(1)
	}
	l.advanceLocked(q)
	l.mu.Unlock()
	if observe {
		l.observe(Event{Key: k.key, Outcome: Released, Held: held, Err: err})
	}
	return err
}
