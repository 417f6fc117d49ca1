package namedlock

import (
	"context"
	"database/sql"
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
	ctx, cancel := context.WithTimeout(l.bg, l.cfg.checkTimeout)
	defer cancel()
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		l.checked(s, nil)
		return
	}
	var owned sql.NullInt64
	err := s.conn.QueryRowContext(ctx, sqlOwnership, s.name).Scan(&owned)
	var lost error
	switch {
	case l.bg.Err() != nil:
		// Closing: Close releases the lock; this is not a loss.
	case err != nil:
		lost = lostError(s.name, "ownership check failed: "+err.Error())
	case !owned.Valid || owned.Int64 != 1:
		lost = lostError(s.name, "ownership check: the session no longer holds it")
	}
	if lost != nil {
		s.gone, s.lostErr = true, lost
		discard(s.conn)
	}
	s.mu.Unlock()
	l.checked(s, lost)
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
