package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/namedlock/mysql/internal/lockconn"
	"github.com/namedlock/mysql/keyfmt"
)

// Locker takes named locks on one lock pool. It is safe for concurrent use by
// multiple goroutines. Create one per process and lock pool with [New], and
// [Locker.Close] it when done: Close releases what it holds and stops its
// goroutines.
//
// Goroutines of one Locker that want the same key queue in-process; only the
// head of that queue holds or waits for a server connection, so one process
// never parks more than one connection per key in GET_LOCK. A Locker is not
// re-entrant: a goroutine that holds a key and acquires it again waits for
// itself until its ctx ends.
type Locker struct {
	srv  backend // the server (server.go); a fake in the ordering tests
	cfg  config
	pool *sql.DB // the lock pool; nil on a fake backend

	// mu guards queues, closed, closeDone, stmts and drained, the fields
	// of every queue, the state of every Lock, and the fields of every
	// session marked as guarded by Locker.mu (the map in release.go). Lock
	// order: mu, then keeper.mu; mu is never held together with a
	// session's turn or pmu (no statement runs under mu), and the
	// backend's own locks are never taken under mu. The release path's
	// rule for it is in release.go.
	mu     sync.Mutex
	queues map[string]*queue // by server lock name
	closed bool
	// closeDone is made by the first Close and closed when it returns.
	closeDone chan struct{}
	// stmts counts the acquisitions at the server (srv.take, and the
	// release of a lock granted once Close had begun) and the RELEASE_LOCKs
	// in flight; a new one is counted only while the Locker is not closed
	// (or by Close itself). drained, made by Close while stmts > 0, is
	// closed when it drops to 0 (stmtDoneLocked).
	stmts   int
	drained chan struct{}

	closing context.Context         // cancelled (cause ErrClosed) as Close starts: ends server waits
	closeIt context.CancelCauseFunc //
	bg      context.Context         // cancelled once Close has released everything: ends checks
	bgStop  context.CancelFunc      //
	keeper  keeper                  // the keep-alive
	stats   counters
	serial  serialDBs   // business databases whose serializable reads lock (serialtx.go)
	budget  *connBudget // the lock pool's connections in use (budget.go); nil on a fake backend
	batch   batchSet    // DoBatch's and Mergers' group queues (group.go)
}

// New returns a Locker on db, which should come from [pool.Open] (a
// dedicated lock pool; its lease, [pool.WithLease], is the Locker's). It
// returns an error matching [ErrInvalidOption] when an option or the
// combination of options is out of range (the keep-alive interval plus
// check timeout must be shorter than the pool's lease; a nil Option;
// [WithFencing] on the lock pool itself), and one matching
// [ErrInvalidArgument] when db is nil. New does no I/O.
//
// A db that does not come from pool.Open works too: its connections get
// [pool.DefaultLease] as their session wait_timeout (one SET SESSION per
// connection, at its first lock), switch the server's statement time limit
// off before each wait at the server (one SET SESSION per wait; pool.Open
// does it once per connection), and statements bounded by the library's
// own timeouts are bounded by contexts rather than socket deadlines.
func New(db *sql.DB, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fail("", "", "invalid argument: New: nil *sql.DB", ErrInvalidArgument)
	}
	srv := newServer(db)
	cfg, err := newConfig(opts, srv.lease)
	if err != nil {
		return nil, err
	}
	if f := cfg.fence; f != nil && sameDB(f.db, db) {
		return nil, fmt.Errorf("%w: WithFencing: db is the lock pool; the fence table belongs in the application's database, beside the data it protects", ErrInvalidOption)
	}
	l := newLocker(srv, cfg)
	l.pool = db
	l.budget = budgetOf(db)
	return l, nil
}

// sameDB reports whether a and b are one pool: the same *sql.DB, or two
// opened on the same lock pool connector.
func sameDB(a, b *sql.DB) bool {
	if a == b {
		return true
	}
	ca := lockconn.Of(a)
	return ca != nil && ca == lockconn.Of(b)
}

// newLocker returns a Locker on backend b with a validated cfg.
func newLocker(b backend, cfg config) *Locker {
	bg, stop := context.WithCancel(context.Background())
	closing, closeIt := context.WithCancelCause(context.Background())
	l := &Locker{
		srv:     b,
		cfg:     cfg,
		queues:  make(map[string]*queue),
		bg:      bg,
		bgStop:  stop,
		closing: closing,
		closeIt: closeIt,
	}
	l.keeper = keeper{every: cfg.keepAlive, timeout: cfg.checkTimeout, bg: bg, held: l.held, lost: l.lostFound}
	return l
}

// Acquire takes the lock named by key, waiting until it is granted or ctx
// ends. A nil error means the lock is held until [Lock.Release] (or until it
// is lost: watch [Lock.Done]). key may be any non-empty string; the server
// lock is named [keyfmt.Portable](key), the only mapping applied.
//
// A wait that ends because ctx ended returns an error matching both
// [ErrNotAcquired] and ctx.Err(); the server-side wait is ended at once and
// its connection discarded, so no session of this process keeps waiting.
// An empty key returns an error matching [ErrInvalidKey]; after
// [Locker.Close], ErrClosed. A nil ctx panics, before anything is counted.
func (l *Locker) Acquire(ctx context.Context, key string) (*Lock, error) {
	return l.acquire(ctx, key, false, true, early{kind: earlyNone}, nil)
}

// TryAcquire takes the lock named by key if it is free now. When key is
// held (by another session, or taken or being taken or given back by
// another caller of this Locker, as [Locker.TryDo] details) it
// returns nil and a nil error at once, without waiting for the holder: a
// held key is an answer, not a failure. It still waits for a pool
// connection, within ctx; every other failure (ctx, the pool, the server,
// an empty key, Close) is an error, as for [Locker.Acquire]. The observer
// sees a held key as a [NotAcquired] event, and [Stats] counts it as not
// acquired.
//
// Every method of the nil *Lock is safe: Release and Err return
// [ErrNotHeld], Done a closed channel, Token 0, Key and Name "". So
//
//	lock, err := locker.TryAcquire(ctx, key)
//	if err != nil || lock == nil {
//		return err // nil: someone else has it
//	}
//	defer lock.Release(ctx)
func (l *Locker) TryAcquire(ctx context.Context, key string) (*Lock, error) {
	k, err := l.acquire(ctx, key, true, true, early{kind: earlyNone}, nil)
	if err != nil && errors.Is(err, errHeld) {
		return nil, nil
	}
	return k, err
}

// Held reports whether the lock named by key is held now by any session of
// the server: another process's, or one of this Locker's (a lock it holds,
// or is handing on or giving back). When a caller of this Locker holds the
// key (an Acquire's Lock not yet released, a Do, TryDo, DoTx or DoMulti
// whose fn runs, including the caller asking from inside its own fn, a
// DoBatch group), or the Locker keeps its lock to hand on, Held answers
// true at once, without a statement or a connection. Otherwise it asks
// the server, IS_USED_LOCK of [keyfmt.Portable](key), on a connection of
// the lock pool borrowed for that one statement (it may wait for one,
// within ctx, when every connection of the pool is taken); it takes no
// lock, waits for none, and counts nothing in [Stats]. The answer may
// have changed by the time it returns: to run
// something only if the key is free, use [Locker.TryDo], which takes the
// lock in the same step. On TiDB the server answers for a lock that
// another session holds after 1 s.
//
// An empty key returns an error matching [ErrInvalidKey]; after
// [Locker.Close], ErrClosed; a failed statement, an error (matching
// ctx.Err() when ctx ended first). A nil ctx panics.
func (l *Locker) Held(ctx context.Context, key string) (bool, error) {
	if ctx == nil {
		panic("namedlock: nil Context")
	}
	if key == "" {
		return false, errEmptyKey
	}
	name := keyfmt.Portable(key)
	l.mu.Lock()
	closed := l.closed
	local := false
	if q := l.queues[name]; q != nil {
		local = (q.holder != nil && q.holder.state == stateHeld) || q.linger != nil
	}
	l.mu.Unlock()
	if closed {
		return false, ErrClosed
	}
	if local {
		return true, nil
	}
	return l.srv.used(ctx, key, name)
}

// acquire takes key's lock: from a local holder or a lingering lock when it
// can, otherwise at the server, after the callers of this Locker queued for
// the same name before it. With fencing, mint gives the new holder its
// token (outside any transaction: DoTx mints its own inside). e says
// whether the lock may come to this caller before the COMMIT of a DoTx
// holding it; atHead, if not nil, runs (in this goroutine) once the caller
// is first in line for the key: before it waits at the server, or while it
// waits behind a local holder.
func (l *Locker) acquire(ctx context.Context, key string, try, mint bool, e early, atHead func()) (*Lock, error) {
	if ctx == nil {
		panic("namedlock: nil Context")
	}
	if key == "" {
		return nil, errEmptyKey
	}
	if f := l.cfg.fence; f != nil {
		if err := f.verify(ctx); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	l.stats.waiting.Add(1)
	name := keyfmt.Portable(key)
	wctx, stop := waitCtx(ctx)
	k, handoff, err := l.take(wctx, key, name, try, e, atHead)
	stop()
	if err == nil && mint && l.cfg.fence != nil && k.Token() == 0 {
		err = l.mintFor(ctx, k)
		if err == nil && k.closedMeanwhile() {
			err = ErrClosed // Close took it back during the mint
		}
	}
	l.stats.waiting.Add(-1)
	wait := time.Since(start)
	l.stats.waitNanos.Add(int64(wait))
	if err != nil {
		if errors.As(err, new(errCancelledWait)) {
			l.stats.cancelledWaits.Add(1)
		}
		l.stats.notAcquired.Add(1)
		l.observe(Event{Key: key, Outcome: NotAcquired, Wait: wait, Err: err, Context: ctx})
		return nil, err
	}
	l.stats.acquired.Add(1)
	if handoff {
		l.stats.handoffs.Add(1)
	} else {
		l.stats.serverAcquired.Add(1)
	}
	if l.cfg.observer != nil {
		l.mu.Lock()
		k.obsCtx, k.obsWait, k.obsHandoff = ctx, wait, handoff
		l.mu.Unlock()
		l.observe(Event{Key: key, Outcome: Acquired, Wait: wait, Handoff: handoff, Session: k.sess.id, Context: ctx})
	}
	return k, nil
}

// mintFor gives k, just taken from the server, its token: it mints, in one
// autocommit statement on the fence's database, a block of tokens, one for
// k and one for each holder the session may be handed to (WithHandoff's
// count), so that a handoff takes its token from the block without a
// statement (newHolderLocked). Tokens stay strictly increasing across
// holders: a block is minted above every token minted before it, and the
// holders of one session take its block in order. If the mint fails, k is
// given back and the error matches ErrNotAcquired.
func (l *Locker) mintFor(ctx context.Context, k *Lock) error {
	f := l.cfg.fence
	n := uint64(l.cfg.maxHandoffs) + 1
	tok, err := f.mint(ctx, f.db, k.key, k.q.name, n)
	if err == nil {
		l.mu.Lock()
		k.token.Store(tok)
		k.sess.tokenNext, k.sess.tokenLast = tok+1, tok+n-1
		l.mu.Unlock()
		return nil
	}
	_ = k.releaseWithin(l.cfg.releaseTimeout, false)
	if errors.Is(err, ErrNotAcquired) {
		return err
	}
	return notAcquired(ctx, k.key, err)
}

// take returns a held lock, and whether it came by handoff, or an error.
// e: whether it may come before a holder's COMMIT; atHead: see acquire.
func (l *Locker) take(ctx context.Context, key, name string, try bool, e early, atHead func()) (*Lock, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, notAcquired(ctx, key, nil)
	}
	l.mu.Lock()
	a := l.arriveLocked(ctx, key, name, try, e, atHead != nil, false)
	l.mu.Unlock()
	if a.needUnit {
		// No connection of the pool is free for a new queue: wait for
		// one outside any queue (budget.go), then look again.
		if err := l.waitUnit(ctx, key); err != nil {
			return nil, false, err
		}
		l.mu.Lock()
		a = l.arriveLocked(ctx, key, name, try, e, atHead != nil, true)
		l.mu.Unlock()
	}
	switch {
	case a.err != nil:
		return nil, false, a.err
	case a.k != nil:
		return a.k, true, nil
	case a.w != nil:
		return l.awaitTurn(ctx, a.q, a.w, key, atHead)
	}
	if atHead != nil {
		atHead()
	}
	k, err := l.takeAtServer(ctx, a.q, key, try)
	return k, false, err
}

// arrival is where a caller arriving for a name stands, as
// Locker.arriveLocked found it.
type arrival struct {
	q        *queue  // the name's queue: the caller is its head, unless w is set
	w        *waiter // the caller, queued in q behind its busy party
	k        *Lock   // a lingering lock the caller took over
	needUnit bool    // no queue, and no unit free for one: wait for a unit
	err      error
}

// arriveLocked finds where a caller of take arriving for name stands and
// puts it there: the head of a new queue, or of one kept idle for it; the
// holder of a lingering lock it takes over; or queued behind the busy
// party (a try gets heldElsewhere instead). A new queue needs a unit of
// the pool's connections: the caller's reservation's, or one free now;
// with neither, it reports needUnit. unit: the caller waited for a unit
// and has it (reservation already settled); it serves a new queue or goes
// back. l.mu held.
func (l *Locker) arriveLocked(ctx context.Context, key, name string, try bool, e early, wantHead, unit bool) arrival {
	if l.closed {
		if unit {
			l.budget.give(1)
		}
		return arrival{err: ErrClosed}
	}
	q := l.queues[name]
	switch {
	case unit && q != nil:
		l.budget.give(1) // someone made the queue meanwhile: its unit serves
	case !unit:
		if r := reservationOf(ctx); r != nil {
			unit = r.arriveLocked(name, q)
		}
		if q == nil && !unit && !l.takeUnitLocked() {
			return arrival{needUnit: true}
		}
	}
	switch {
	case q == nil:
		q = &queue{name: name}
		l.queues[name] = q
	case q.idle:
		// Kept, with its unit, for the DoMultis that claimed it: this
		// caller is its head now.
		q.idle = false
	case q.linger != nil && q.mayHandOff(&l.cfg, l.closed):
		k := l.newHolderLocked(q, q.sess, key)
		q.takeLinger(k)
		return arrival{k: k}
	case try:
		return arrival{err: heldElsewhere(key, true)}
	default:
		return arrival{q: q, w: q.push(key, e, wantHead)}
	}
	return arrival{q: q}
}

// awaitTurn waits, queued in q as w, for what the party before it passes
// on: its lock (a handoff), the turn to take the lock at the server, or an
// error (Close); or for ctx to end, which takes w out of q. atHead, if not
// nil, runs once w is first in line.
func (l *Locker) awaitTurn(ctx context.Context, q *queue, w *waiter, key string, atHead func()) (*Lock, bool, error) {
	head := w.head // nil unless atHead is set; set to nil once told
	for {
		select {
		case g := <-w.ch:
			switch {
			case g.err != nil:
				return nil, false, g.err
			case g.lock != nil:
				return g.lock, true, nil
			}
			k, err := l.takeAtServer(ctx, q, key, false)
			return k, false, err
		case <-head:
			head = nil
			atHead()
		case <-ctx.Done():
			l.leaveQueue(q, w)
			return nil, false, notAcquired(ctx, key, nil)
		}
	}
}

// leaveQueue takes w, whose ctx ended, out of q. When w was popped
// meanwhile, what it was passed is given back: a lock is released, the
// turn to go to the server passes on.
func (l *Locker) leaveQueue(q *queue, w *waiter) {
	l.mu.Lock()
	removed := q.remove(w)
	l.mu.Unlock()
	if removed {
		return
	}
	// Popped concurrently: the grant is in the channel. Give it back.
	g := <-w.ch
	switch {
	case g.lock != nil:
		_ = g.lock.releaseWithin(l.cfg.releaseTimeout, false)
	case g.promoted:
		l.mu.Lock()
		l.advanceLocked(q)
		l.mu.Unlock()
	}
}

// takeAtServer is run by the head of q: it takes the server lock on a
// pinned connection, then installs itself as q's holder.
func (l *Locker) takeAtServer(ctx context.Context, q *queue, key string, try bool) (*Lock, error) {
	l.mu.Lock()
	if l.closed {
		// Close ran while the head was not yet at the server (a DoTx at
		// SERIALIZABLE beginning its transaction): it did not wait for it.
		l.advanceLocked(q)
		l.mu.Unlock()
		return nil, ErrClosed
	}
	l.stmts++ // Close waits for the take (and a release after it)
	l.mu.Unlock()
	// Close ends a wait at the server (or for a pool connection) at once.
	// A ctx that can never end needs no merging: l.closing alone will do,
	// without a context and a registration with l.closing per acquisition.
	sctx, cancel := l.closing, context.CancelCauseFunc(func(error) {})
	stop := func() bool { return true }
	if ctx.Done() != nil {
		sctx, cancel = context.WithCancelCause(ctx)
		stop = context.AfterFunc(l.closing, func() { cancel(ErrClosed) })
	}
	ln, err := l.srv.take(ctx, sctx, key, q.name, try)
	stop()
	cancel(nil)
	var s *session
	if err == nil {
		s = newSession(q.name, ln)
	}
	l.mu.Lock()
	if err != nil && l.closed && ctx.Err() == nil {
		err = ErrClosed
	}
	if err == nil && l.closed {
		l.mu.Unlock()
		_ = s.release(context.Background(), l.cfg.releaseTimeout)
		l.mu.Lock()
		err = ErrClosed
	}
	l.stmtDoneLocked()
	if err != nil {
		l.advanceLocked(q)
		l.mu.Unlock()
		return nil, err
	}
	s.acquiredAt = time.Now()
	k := l.newHolderLocked(q, s, key)
	q.hold(k, s)
	l.keeper.start(s)
	l.mu.Unlock()
	return k, nil
}

// newHolderLocked returns a held Lock on s for key, with the next token of
// s's block when fencing (0 for a server acquisition: acquire mints), and
// counts it held: every caller installs it as q's holder in the same
// critical section, and Close and the release (freeLocked) count it down
// under l.mu too, so Stats.Held never counts a holder twice or one that
// is gone. l.mu held.
func (l *Locker) newHolderLocked(q *queue, s *session, key string) *Lock {
	l.stats.held.Add(1)
	k := &Lock{l: l, q: q, sess: s, key: key, acquired: time.Now()}
	if l.cfg.fence != nil {
		k.token.Store(s.nextTokenLocked())
	}
	return k
}

// advanceLocked is called when q's busy party is done without passing a
// held lock on: the first waiter gets the turn to acquire at the server, or
// q is removed, unless DoMultis claimed it: it then stays, idle, until
// they reach it. l.mu held.
func (l *Locker) advanceLocked(q *queue) {
	if q.advance(l.closed) || l.queues[q.name] != q {
		return
	}
	if q.claims > 0 && !l.closed {
		q.idle = true
		return
	}
	l.removeLocked(q)
}

// removeLocked removes q, whose busy party is done, and gives its unit
// back. l.mu held.
func (l *Locker) removeLocked(q *queue) {
	delete(l.queues, q.name)
	l.budget.give(1) // its connection is back in the pool, or discarded
}

// stmtDoneLocked counts down a statement counted in l.stmts. l.mu held.
func (l *Locker) stmtDoneLocked() {
	l.stmts--
	if l.stmts == 0 && l.drained != nil {
		close(l.drained)
		l.drained = nil
	}
}

// held returns the sessions held now (or lingering, or waiting to be given
// back: toServerLocked) and not known lost: what the keep-alive checks.
func (l *Locker) held() []*session {
	l.mu.Lock()
	defer l.mu.Unlock()
	var held []*session
	for _, q := range l.queues {
		if s := q.sess; s != nil && !s.lost {
			held = append(held, s)
		}
	}
	return held
}

// Stats returns a snapshot of the Locker's state and counters.
func (l *Locker) Stats() Stats {
	c := &l.stats
	return Stats{
		Held:               int(c.held.Load()),
		Waiting:            int(c.waiting.Load()),
		Queued:             l.queued(),
		Acquired:           c.acquired.Load(),
		NotAcquired:        c.notAcquired.Load(),
		Lost:               c.lost.Load(),
		Handoffs:           c.handoffs.Load(),
		ServerAcquisitions: c.serverAcquired.Load(),
		CancelledWaits:     c.cancelledWaits.Load(),
		WaitDuration:       time.Duration(c.waitNanos.Load()),
		ObserverPanics:     c.observerPanics.Load(),
		LostCommits:        c.lostCommits.Load(),
		FencedCommits:      c.fencedCommits.Load(),
		FenceWaitTimeouts:  c.fenceWaitTimeouts.Load(),
		FenceWaitDuration:  time.Duration(c.fenceWaitNanos.Load()),
	}
}

// queued counts the callers queued locally behind another caller.
func (l *Locker) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, q := range l.queues {
		n += len(q.waiters)
	}
	return n
}

// observe delivers e to the observer, if any. A panic of the observer is
// recovered and counted (Stats.ObserverPanics): observe is called in the
// middle of an acquisition, a release, a loss or Close, which must go on
// as if the observer had returned, or a lock would be left held with no
// holder that knows of it.
func (l *Locker) observe(e Event) {
	if l.cfg.observer == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			l.stats.observerPanics.Add(1)
		}
	}()
	l.cfg.observer(e)
}

// Close releases every lock the Locker holds (their holders see [Lock.Done]
// close and [Lock.Err] return [ErrClosed]; Do cancels fn's context with that
// cause), fails waiting callers with [ErrClosed], stops the Locker's
// goroutines and waits for them. It does not close the *sql.DB. A later
// Close, or one concurrent with it, returns ErrClosed once the first has
// returned.
//
// When any Close returns, no server lock of this Locker is held, and none
// is being acquired or released: Close ends every GET_LOCK in flight (a
// wait's session is killed, as for a cancelled wait; Close runs the KILLs
// queued, within 2 s in all), waits for the acquisitions at the server to
// end — releasing a lock granted meanwhile — and for a RELEASE_LOCK begun
// before Close (bounded by [WithReleaseTimeout], or by the ctx given to
// [Lock.Release]). A caller not yet at the server is not waited for (a
// DoTx at SERIALIZABLE beginning its transaction, first in line, on the
// application's pool): it gets ErrClosed without going there. On TiDB,
// where a KILL cannot end a wait, a wait given up on stays at the server
// until its 1 s slice ends (see TiDB). A KILL returns before the server
// has ended the killed session: a wait the server granted in the moment
// before its KILL (its holder let go as Close began) can leave the lock
// held by that dying session for the few milliseconds the server takes to
// end it after Close returned; no caller of this Locker holds it, and the
// server frees it by itself. Before Close releases a lock whose holder,
// a DoTx that is not fenced, has sent its COMMIT, or a lock that a DoTx
// with [WithSerializableHandoff] handed on before its COMMIT, it waits for
// that COMMIT to return (bounded only by the connection it runs on), while
// the keep-alive goes on checking the lock: the lock goes to no one else
// before those COMMITs, unless it is lost meanwhile (another instance may
// then take it first; Close's error matches [ErrLockLost]). A fenced
// DoTx's lock is released without that wait: its fence row, held until
// its transaction ends, orders every fenced holder after it.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		done := l.closeDone
		l.mu.Unlock()
		<-done // the first Close's guarantee holds when this one returns
		return ErrClosed
	}
	l.closed = true
	l.closeDone = make(chan struct{})
	defer close(l.closeDone)
	give, taken := l.takeBackLocked()
	l.mu.Unlock()
	for _, ev := range taken {
		l.observe(ev)
	}
	l.closeIt(ErrClosed) // callers waiting at the server give up
	l.batch.closeAndWait()
	errs := l.giveBack(give)
	l.awaitStatements()
	l.bgStop()
	l.keeper.wait()
	l.srv.close()
	return joinErrors(errs...)
}

// awaitStatements waits, once Close has begun (no new statement is
// counted then but Close's own), until no statement counted in l.stmts is
// in flight.
func (l *Locker) awaitStatements() {
	l.mu.Lock()
	var drained chan struct{}
	if l.stmts > 0 {
		drained = make(chan struct{})
		l.drained = drained
	}
	l.mu.Unlock()
	if drained != nil {
		<-drained
	}
}
