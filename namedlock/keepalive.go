package namedlock

import (
	"database/sql"
	"fmt"
	"time"
)

// The keep-alive is one goroutine per Locker, started with the first held
// lock and stopped by Close. Every tick it starts an ownership check, in a
// goroutine of its own, for each held lock whose check is due, so that one
// check that hangs (up to the check timeout) delays no other. A lock is lost
// when its check fails, answers anything but 1, or has not answered within
// the check timeout; a live holder's session never idles longer than the
// keep-alive interval, so the lease never reaps it.

// tickFor returns the keep-alive scan period: a twentieth of the interval,
// within [5ms, 250ms], so that a loss is seen within the interval plus at
// most a twentieth of it (plus the round trip).
func tickFor(keepAlive time.Duration) time.Duration {
	return min(max(keepAlive/20, 5*time.Millisecond), 250*time.Millisecond)
}

// startKeepAliveLocked starts the keep-alive goroutine once. l.mu held.
func (l *Locker) startKeepAliveLocked() {
	if l.ticker || l.closed {
		return
	}
	l.ticker = true
	l.wg.Add(1)
	go l.keepAlive()
}

func (l *Locker) keepAlive() {
	defer l.wg.Done()
	t := time.NewTicker(tickFor(l.cfg.keepAlive))
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case now := <-t.C:
			l.mu.Lock()
			for _, q := range l.keys {
				s := q.sess
				if s == nil || s.lost || s.checking || now.Before(s.nextCheck) {
					continue
				}
				s.checking = true
				l.wg.Add(1)
				go l.check(s)
			}
			l.mu.Unlock()
		}
	}
}

// check proves on s's own connection that s still owns its lock.
func (l *Locker) check(s *session) {
	defer l.wg.Done()
	deadline := time.Now().Add(l.cfg.checkTimeout) // counting any wait for s.mu
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		l.checked(s, nil)
		return
	}
	sent := time.Now()
	var answer [1]sql.NullInt64
	// Bounded by the check timeout, and ended by Close (l.bg).
	_, err := queryIntsUntil(l.bg, deadline, s.nc, s.conn, answer[:], sqlOwnership, s.arg)
	owned := answer[0]
	var lost error
	switch {
	case l.bg.Err() != nil:
		// Closing: Close releases the lock; this is not a loss.
	case err != nil:
		lost = lostError(s.name, "ownership check failed: "+err.Error())
	case !owned.Valid || owned.Int64 != 1:
		lost = lostError(s.name, "ownership check: the session no longer holds it")
	default:
		s.proved(sent)
	}
	if lost != nil {
		s.gone, s.lostErr = true, lost
		discard(s.conn)
	}
	s.mu.Unlock()
	l.checked(s, lost)
}

// prove makes sure that s still held its lock at some moment after since,
// so that a holder who let go of it at since (by a handoff, which makes no
// round trip) ran its whole critical section under the lock: a session never
// gets a lost lock back. A statement sent after since that showed ownership
// (a keep-alive check, a later holder's RELEASE_LOCK answering 1) is enough;
// otherwise prove runs the ownership check itself, bounded by the check
// timeout like a keep-alive check (not by the releasing caller's ctx: a
// check cut short would break the next holder's lock). Callers that let go
// at about the same time share one check. A failed or false check is a
// loss: the connection is discarded, the current holder is told, and prove
// returns an error matching ErrLockLost.
//
// A caller already proven returns at once, even while a check for later
// callers is in flight; one that a check in flight may prove waits for it
// (the connection is busy until then anyway); one check runs at a time.
func (l *Locker) prove(s *session, since time.Time) error {
	for {
		s.pmu.Lock()
		if s.provedAt.After(since) {
			s.pmu.Unlock()
			return nil
		}
		if ch := s.proofDone; ch != nil {
			s.pmu.Unlock()
			<-ch
			continue
		}
		ch := make(chan struct{})
		s.proofDone = ch
		s.pmu.Unlock()
		err := l.proveOnce(s, since)
		s.pmu.Lock()
		s.proofDone = nil
		s.pmu.Unlock()
		close(ch)
		return err
	}
}

// proved records that s held its lock when a statement sent at t answered.
func (s *session) proved(t time.Time) {
	s.pmu.Lock()
	if t.After(s.provedAt) {
		s.provedAt = t
	}
	s.pmu.Unlock()
}

// provenSince reports whether s was proven to hold its lock after since.
func (s *session) provenSince(since time.Time) bool {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	return s.provedAt.After(since)
}

// proveOnce is prove's ownership check, run by one caller at a time.
func (l *Locker) proveOnce(s *session, since time.Time) error {
	s.mu.Lock()
	if s.provenSince(since) {
		s.mu.Unlock()
		return nil
	}
	if s.gone {
		err := s.lostErr
		s.mu.Unlock()
		if err == nil {
			err = lostError(s.name, "its session ended before its ownership was proven")
		}
		return err
	}
	sent := time.Now()
	var answer [1]sql.NullInt64
	// Bounded by the check timeout, and ended by Close (l.bg).
	_, err := queryIntsUntil(l.bg, sent.Add(l.cfg.checkTimeout), s.nc, s.conn, answer[:], sqlOwnership, s.arg)
	owned := answer[0]
	if err == nil && owned.Valid && owned.Int64 == 1 {
		s.proved(sent)
		s.mu.Unlock()
		return nil
	}
	if err != nil && l.bg.Err() != nil {
		// Closing: Close releases the lock; whether it was held until now
		// is not known.
		s.mu.Unlock()
		return fmt.Errorf("%w: ownership of %q at handoff not proven: %w", ErrClosed, s.name, err)
	}
	lost := lostError(s.name, "ownership check at handoff: the session no longer holds it")
	if err != nil {
		lost = lostError(s.name, "ownership check at handoff failed: "+err.Error())
	}
	s.gone, s.lostErr = true, lost
	discard(s.conn)
	s.mu.Unlock()
	l.lostFound(s, lost)
	return lost
}

// checked records a check's outcome and tells the holder of a loss.
func (l *Locker) checked(s *session, lost error) {
	l.mu.Lock()
	s.checking = false
	if lost == nil {
		s.nextCheck = time.Now().Add(l.cfg.keepAlive)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.lostFound(s, lost)
}

// lostFound marks s lost and tells its holder, if it still holds it.
func (l *Locker) lostFound(s *session, lost error) {
	l.mu.Lock()
	s.lost = true
	h := s.holder
	var held time.Duration
	var key string
	if h != nil && h.state == stateHeld {
		h.endLocked(stateLost, lostError(h.key, lost.Error()))
		held, key = time.Since(h.acquired), h.key
		l.stats.lost.Add(1)
	} else {
		h = nil
	}
	l.mu.Unlock()
	if h != nil {
		l.observe(Event{Key: key, Outcome: Lost, Held: held, Err: lost})
	}
}
