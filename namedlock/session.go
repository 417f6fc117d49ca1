package namedlock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// session is one named lock held at the server on one pinned connection
// (its link), handed from local holder to local holder until it goes back
// to the server. Every statement on the link goes through a session method:
// the ownership check ([session.check], used by the keep-alive and by the
// proof after a handoff) and the release. Its fields are grouped below by
// the mutex that guards them; the map in release.go places them among the
// rest of one lock's state (its queue, its holder's Lock).
type session struct {
	name string
	link link
	// expires is when the server may give the lock to another session
	// whatever this one does, less a margin (link.expires); zero: never.
	// The keep-alive reports the lock lost then. Set once, at creation.
	expires time.Time
	// id is the server's connection id of the link's session
	// (link.sessionID), told to the observer ([Event].Session); 0: not
	// known. Set once, at creation.
	id int64

	// The statements on link run one at a time: a statement runs while its
	// caller holds the turn (busy, taken and given back under turnMu and
	// waited for on turnFree), which guards gone and lostErr. Lock order:
	// the turn before pmu. Locker.mu is never held together with either: no
	// statement runs under Locker.mu. (Not a plain sync.Mutex held across the
	// round trip: a goroutine waiting in sync.Cond.Wait is durably blocked
	// for testing/synctest, one waiting in Mutex.Lock is not.)
	turnMu   sync.Mutex
	turnFree sync.Cond // L is &turnMu
	busy     bool
	gone     bool  // link released or discarded
	lostErr  error // why link was discarded after a failed check or release

	// pmu guards the proof; it is never held across a statement.
	pmu       sync.Mutex
	provedAt  time.Time     // when the last statement that showed ownership was sent
	proofDone chan struct{} // closed when the proof check in flight ends

	// Guarded by Locker.mu.
	acquiredAt time.Time // when the server granted it
	handoffs   int       // local handoffs since then
	proving    int       // holders that let go of it and wait in prove
	lost       bool      // found lost: never handed on again
	// commits counts the COMMITs in flight of holders that handed the
	// session on early (Lock.handOffEarly at SERIALIZABLE): until they
	// have ended, it goes from holder to holder only by early handoffs
	// (Locker.awaitCommitsLocked). commitsDone is closed when commits drops
	// back to 0.
	commits     int
	commitsDone chan struct{}
	// earlyCommits are the DoTx calls that handed s on early and whose
	// COMMIT succeeded after the last statement that proved s held was
	// sent: a loss of s found now may have come during their COMMIT
	// (Locker.earlyCommitted, Locker.lostCommitsLocked).
	earlyCommits []earlyCommit
	tokenNext    uint64 // with fencing: the next token of the block minted at
	tokenLast    uint64 // the server acquisition, for the holders it is handed to

	// Guarded by keeper.mu.
	nextCheck time.Time // when the keep-alive checks it next
	checking  bool      // a keep-alive check is in flight
	expiring  bool      // the keep-alive found it past expires
}

// link is one pinned server connection holding one named lock. A session
// runs its methods one at a time.
type link interface {
	// owns runs the ownership check, bounded by deadline and ended by ctx.
	owns(ctx context.Context, deadline time.Time) (held bool, err error)
	// release runs RELEASE_LOCK, bounded by deadline (zero: by ctx alone).
	// nil: released, and the connection went back to the pool. An error
	// matching ErrLockLost: the session no longer held the lock. Any other
	// error: the release was not confirmed. On any error the connection
	// was discarded.
	release(ctx context.Context, deadline time.Time) error
	// discard closes the connection so that it is never reused: the server
	// frees its locks when it sees the session end.
	discard()
	// expires returns when the server may grant the lock to another
	// session although this one still holds it and answers as its owner
	// (TiDB, past its max-txn-ttl), less a margin; zero when the server
	// never does that.
	expires() time.Time
	// sessionID returns the server's connection id of the session that
	// holds the lock (CONNECTION_ID(), as IS_USED_LOCK names it), or 0 when
	// it is not known.
	sessionID() int64
}

// newSession returns the session of name held on link.
func newSession(name string, ln link) *session {
	s := &session{name: name, link: ln, expires: ln.expires(), id: ln.sessionID()}
	s.turnFree.L = &s.turnMu
	return s
}

// takeTurn waits for the statement turn.
func (s *session) takeTurn() {
	s.turnMu.Lock()
	for s.busy {
		s.turnFree.Wait()
	}
	s.busy = true
	s.turnMu.Unlock()
}

// endTurn gives the statement turn back.
func (s *session) endTurn() {
	s.turnMu.Lock()
	s.busy = false
	s.turnMu.Unlock()
	s.turnFree.Signal()
}

// nextTokenLocked takes the next fencing token of the session's block, or
// 0 when there is none left (the holder then mints). Locker.mu held.
func (s *session) nextTokenLocked() uint64 {
	if s.tokenNext == 0 || s.tokenNext > s.tokenLast {
		return 0
	}
	t := s.tokenNext
	s.tokenNext++
	return t
}

// commitBegunLocked counts a COMMIT in flight of a holder that handed s on
// early (Lock.handOffEarly). Locker.mu held.
func (s *session) commitBegunLocked() {
	if s.commits == 0 {
		s.commitsDone = make(chan struct{})
	}
	s.commits++
}

// commitEndedLocked counts one such COMMIT as ended. Locker.mu held.
func (s *session) commitEndedLocked() {
	s.commits--
	if s.commits == 0 {
		close(s.commitsDone)
		s.commitsDone = nil
	}
}

// earlyCommit is a COMMIT that succeeded at at, of a DoTx called with ctx
// on key, that handed its session on before the COMMIT.
type earlyCommit struct {
	ctx context.Context
	key string
	at  time.Time
}

// provedTime returns when the last statement that proved s held was sent.
func (s *session) provedTime() time.Time {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	return s.provedAt
}

// errReleased: the session was released before a check could run.
var errReleased = errors.New("namedlock: session already released")

// check proves on the link that the session still holds its lock at some
// moment after since; a statement sent after since that already showed it
// (another check, a confirmed release) is enough. It returns nil when
// proven; an error matching [ErrLockLost] when the lock is not held or the
// check failed or did not answer within timeout (the link is then
// discarded); an error matching [ErrClosed] when bg ended (the Locker is
// closing: nothing is known); errReleased when the link was released
// without a loss. The check is ended by bg.
func (s *session) check(bg context.Context, timeout time.Duration, since time.Time) error {
	deadline := time.Now().Add(timeout) // counting any wait for the turn
	s.takeTurn()
	defer s.endTurn()
	if s.provenSince(since) {
		return nil
	}
	if s.gone {
		if s.lostErr != nil {
			return s.lostErr
		}
		return errReleased
	}
	sent := time.Now()
	held, err := s.link.owns(bg, deadline)
	if err == nil && held {
		s.proved(sent)
		return nil
	}
	if err != nil && bg.Err() != nil {
		return fail("", "", "locker closed", ErrClosed, err)
	}
	var loss error
	switch {
	case err == nil:
		loss = lost("the server says another session (or none) holds it", nil)
	case errors.Is(err, context.DeadlineExceeded):
		loss = lost("its ownership check got no answer within "+timeout.String(), err)
	case isConnClosed(err):
		loss = lost(connClosed, err)
	default:
		loss = lost("its ownership check failed: "+err.Error(), err)
	}
	s.gone, s.lostErr = true, loss
	s.link.discard()
	return loss
}

// abandon discards the link of a session found lost without a statement
// (past its expiry), once any statement in flight has ended; loss is what
// later checks and releases report. A session already gone is left as it
// is.
func (s *session) abandon(loss error) {
	s.takeTurn()
	defer s.endTurn()
	if s.gone {
		return
	}
	s.gone, s.lostErr = true, loss
	s.link.discard()
}

// prove makes sure that the session held its lock at some moment after
// since, so that a holder who let go of it at since (by a handoff, which
// makes no round trip) ran its whole critical section under the lock: a
// session never gets a lost lock back. Callers that let go at about the
// same time share one check: a caller already proven returns at once, even
// while a check for later callers is in flight; one that the check in
// flight may prove waits for it; one check runs at a time. The check is
// bounded by timeout, like a keep-alive check (never by the releasing
// caller's ctx: a check cut short would break the next holder's lock).
func (s *session) prove(bg context.Context, timeout time.Duration, since time.Time) error {
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
		err := s.check(bg, timeout, since)
		if errors.Is(err, errReleased) {
			err = lost("its session ended before the handoff was proven", nil)
		}
		s.pmu.Lock()
		s.proofDone = nil
		s.pmu.Unlock()
		close(ch)
		return err
	}
}

// release runs RELEASE_LOCK on the link, bounded by timeout from now, or by
// ctx alone when timeout is 0. Only a confirmed release returns the
// connection to the pool (and proves that the lock was held until then);
// otherwise the link discards it, so a connection is never pooled while it
// may still hold the lock. A second release returns the first one's loss,
// or nil.
func (s *session) release(ctx context.Context, timeout time.Duration) error {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout) // counting any wait for the turn
	}
	s.takeTurn()
	defer s.endTurn()
	if s.gone {
		return s.lostErr // a failed check discarded the link first
	}
	s.gone = true
	sent := time.Now()
	err := s.link.release(ctx, deadline)
	switch {
	case err == nil:
		s.proved(sent) // held until now: earlier holders (handoffs) are covered
	case errors.Is(err, ErrLockLost):
		s.lostErr = err
	default:
		// Not confirmed: whether it was held until now is not known.
		why := err.Error()
		if f, ok := err.(*failure); ok {
			why = f.why
		}
		s.lostErr = lost(why, err)
	}
	return err
}

// proved records that the session held its lock when a statement sent at t
// answered.
func (s *session) proved(t time.Time) {
	s.pmu.Lock()
	if t.After(s.provedAt) {
		s.provedAt = t
	}
	s.pmu.Unlock()
}

// provenSince reports whether the session was proven to hold its lock after
// since.
func (s *session) provenSince(since time.Time) bool {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	return s.provedAt.After(since)
}
