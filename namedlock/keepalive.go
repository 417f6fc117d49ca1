package namedlock

import (
	"context"
	"sync"
	"time"
)

// keeper schedules the keep-alive: every interval, an ownership check
// ([session.check]) of each held lock. It only schedules; what is held and
// what a loss means belong to its owner, the Locker, through held and lost.
//
// One goroutine runs while something is held: start (at every server
// acquisition) starts it if it is not running, and it stops at the first
// tick that finds nothing held, or when bg ends (Close). Every tick it
// starts a check, in a goroutine of its own, for each held lock whose check
// is due, so that one check that hangs (up to the check timeout) delays no
// other. A live holder's session never idles longer than the interval, so
// the lease never reaps it.
type keeper struct {
	every   time.Duration // the keep-alive interval
	timeout time.Duration // bounds one check
	bg      context.Context
	held    func() []*session     // the sessions held now, not known lost; called without mu
	lost    func(*session, error) // a check found the session lost; called without mu
	wg      sync.WaitGroup        // the goroutine and its checks

	// mu guards running and kicked, and the keep-alive fields of every
	// session (nextCheck, checking). Lock order: Locker.mu before mu; held
	// and lost are never called under mu.
	mu      sync.Mutex
	running bool
	kicked  bool // start ran since the last tick looked at what is held
}

// tickFor returns the keep-alive scan period: a twentieth of the interval,
// within [5ms, 250ms], so that a loss is seen within the interval plus at
// most a twentieth of it (plus the round trip).
func tickFor(keepAlive time.Duration) time.Duration {
	return min(max(keepAlive/20, 5*time.Millisecond), 250*time.Millisecond)
}

// start schedules s's first check an interval from now and makes sure the
// goroutine runs. It must not be called once bg has ended.
func (k *keeper) start(s *session) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s.nextCheck = time.Now().Add(k.every)
	k.kicked = true
	if !k.running {
		k.running = true
		k.wg.Add(1)
		go k.run()
	}
}

// wait waits for the goroutine and its checks, once bg has ended.
func (k *keeper) wait() { k.wg.Wait() }

func (k *keeper) run() {
	defer k.wg.Done()
	t := time.NewTicker(tickFor(k.every))
	defer t.Stop()
	for {
		select {
		case <-k.bg.Done():
			k.stopped()
			return
		case now := <-t.C:
			if !k.tick(now, k.held()) {
				return
			}
		}
	}
}

// tick starts the checks due at now among held. It returns false, having
// marked the goroutine stopped, when nothing is held.
func (k *keeper) tick(now time.Time, held []*session) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(held) == 0 && !k.kicked {
		k.running = false
		return false
	}
	k.kicked = false
	for _, s := range held {
		if !s.expires.IsZero() && !now.Before(s.expires) {
			if !s.expiring {
				s.expiring = true
				k.wg.Add(1)
				go k.expire(s)
			}
			continue
		}
		if s.checking || now.Before(s.nextCheck) {
			continue
		}
		s.checking = true
		k.wg.Add(1)
		go k.checkOne(s)
	}
	return true
}

func (k *keeper) stopped() {
	k.mu.Lock()
	k.running = false
	k.mu.Unlock()
}

// expire reports s lost because it is past its expiry: the server may give
// the lock to another session from a margin later on, while an ownership
// check would still answer that s holds it (TiDB past its max-txn-ttl).
// The holder is told first, then the link is discarded.
func (k *keeper) expire(s *session) {
	defer k.wg.Done()
	loss := lost("held longer than the server keeps a lock alive (TiDB: performance.max-txn-ttl, less a margin), after which it may grant it to another session", nil)
	k.lost(s, loss)
	s.abandon(loss)
}

// checkOne runs one keep-alive check of s and schedules the next.
func (k *keeper) checkOne(s *session) {
	defer k.wg.Done()
	err := s.check(k.bg, k.timeout, time.Now())
	k.mu.Lock()
	s.checking = false
	s.nextCheck = time.Now().Add(k.every)
	k.mu.Unlock()
	if isLost(err) {
		k.lost(s, err)
	}
	// errReleased: released meanwhile; ErrClosed: Close releases it.
}
