package namedlock

import (
	"errors"
	"time"
)

// The keep-alive schedules ownership checks; the check itself is
// [session.check]. It is one goroutine per Locker, started with the first
// held lock, which stops when a tick finds nothing held (the next held lock
// starts it again) and when the Locker closes. Every tick it starts a check,
// in a goroutine of its own, for each held lock whose check is due, so that
// one check that hangs (up to the check timeout) delays no other. A live
// holder's session never idles longer than the keep-alive interval, so the
// lease never reaps it.

// tickFor returns the keep-alive scan period: a twentieth of the interval,
// within [5ms, 250ms], so that a loss is seen within the interval plus at
// most a twentieth of it (plus the round trip).
func tickFor(keepAlive time.Duration) time.Duration {
	return min(max(keepAlive/20, 5*time.Millisecond), 250*time.Millisecond)
}

// startKeepAliveLocked starts the keep-alive goroutine if it is not
// running. l.mu held.
func (l *Locker) startKeepAliveLocked() {
	if l.keepAliveOn || l.closed {
		return
	}
	l.keepAliveOn = true
	l.wg.Add(1)
	go l.keepAlive()
}

func (l *Locker) keepAlive() {
	defer l.wg.Done()
	t := time.NewTicker(tickFor(l.cfg.keepAlive))
	defer t.Stop()
	for now := range t.C {
		if !l.scheduleChecks(now) {
			return
		}
	}
}

// scheduleChecks starts the checks due at now. It returns false, and marks
// the keep-alive stopped, when the Locker is closed or holds nothing.
func (l *Locker) scheduleChecks(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := false
	for _, q := range l.queues {
		s := q.sess
		if s == nil || s.lost {
			continue
		}
		held = true
		if s.checking || now.Before(s.nextCheck) {
			continue
		}
		s.checking = true
		l.wg.Add(1)
		go l.check(s)
	}
	if !held || l.closed {
		l.keepAliveOn = false
		return false
	}
	return true
}

// check runs one keep-alive check of s and records its outcome.
func (l *Locker) check(s *session) {
	defer l.wg.Done()
	err := s.check(l.bg, l.cfg.checkTimeout, time.Now())
	l.mu.Lock()
	s.checking = false
	s.nextCheck = time.Now().Add(l.cfg.keepAlive)
	l.mu.Unlock()
	if errors.Is(err, ErrLockLost) {
		l.lostFound(s, err)
	}
	// errReleased: released meanwhile; ErrClosed: Close releases it.
}

// lostFound marks s lost and tells its holder, if it still holds it.
func (l *Locker) lostFound(s *session, lost error) {
	l.mu.Lock()
	s.lost = true
	h := s.holder
	if h == nil || h.state != stateHeld {
		l.mu.Unlock()
		return
	}
	h.endLocked(stateLost, lost)
	held, key := time.Since(h.acquired), h.key
	l.stats.lost.Add(1)
	l.mu.Unlock()
	l.observe(Event{Key: key, Outcome: Lost, Held: held, Err: lost})
}
