package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
)

// Groups: the callers of DoBatch (or of one Merger) queued for one key in
// this process are run together, under the key's named lock, in one
// transaction that is committed once. A worker goroutine per busy key
// (owned by the Locker, awaited by Close) takes the lock, begins the
// transaction, takes the callers queued at that moment (at most the
// group's bounds), mints one fencing token per caller in one statement,
// lets each caller run its section in its own goroutine, in queue order,
// and commits. The lock stays with the worker for the next group while
// callers are queued and the handoff bounds allow it (never past a local
// caller of another kind waiting for the key, nor past WithHandoff's
// bounds: then it goes back to the server, where other instances wait);
// it is let go of only after the COMMIT has returned.

// Defaults of the group bounds ([WithBatchLimits]).
// The defaults of WithBatchLimits; the paired measurements behind them are
// in docs/transactions.md (Hot keys).
const (
	// DefaultBatchMaxSections is the most callers one group takes.
	DefaultBatchMaxSections = 256
	// DefaultBatchMaxTime is how long a group goes on starting sections
	// after its first one started; the callers it did not reach go to the
	// next group.
	DefaultBatchMaxTime = 20 * time.Millisecond
)

// WithBatchLimits bounds the groups of [Locker.DoBatch] and of a [Merger]:
// at most maxSections callers per group, and no section started after
// maxTime from the group's first one (the callers not reached go first
// into the next group). The bounds keep the group's row locks, and the
// fence row, held for a short time. Both must be positive.
func WithBatchLimits(maxSections int, maxTime time.Duration) Option {
	return func(c *config) error {
		if maxSections <= 0 || maxTime <= 0 {
			return fmt.Errorf("%w: WithBatchLimits(%d, %v): both must be positive", ErrInvalidOption, maxSections, maxTime)
		}
		c.batchMax, c.batchTime = maxSections, maxTime
		return nil
	}
}

// batchLimits returns the group bounds of cfg.
func (c *config) batchLimits() (int, time.Duration) {
	n, t := c.batchMax, c.batchTime
	if n <= 0 {
		n = DefaultBatchMaxSections
	}
	if t <= 0 {
		t = DefaultBatchMaxTime
	}
	return n, t
}

// ErrSectionEndedTx: a section of a group ended the group's transaction
// (it committed or rolled back through the *sql.Tx, ran COMMIT, ROLLBACK
// or a statement that commits implicitly such as DDL, or a statement of it
// failed in a way the server ends the transaction for, such as a
// deadlock). The group stops right after that section: every caller of
// the group that had not returned gets an error matching it. What that
// section and the sections before it wrote may have been committed; the
// sections after it did not run. A group whose connection broke is not
// reported with it: nothing of it was committed, and its callers get the
// connection's error.
var ErrSectionEndedTx = errors.New("namedlock: a section ended the group's transaction")

// batchSet is the Locker's group queues. Its fields are guarded by mu.
// Lock order: mu, then Locker.mu.
type batchSet struct {
	mu     sync.Mutex
	queues map[groupKey]*groupQueue
	closed bool
	wg     sync.WaitGroup // the workers
}

// closeAndWait refuses new callers and waits for the workers (Close has
// ended their waits for the lock and taken their locks back).
func (b *batchSet) closeAndWait() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}

// groupKey names a group queue: the key, and whose queue it is (nil for
// DoBatch, the *Merger for a Merger).
type groupKey struct {
	owner any
	key   string
}

// groupQueue is one key's callers waiting to be taken into a group, and
// the state of its worker.
type groupQueue struct {
	gk      groupKey
	pending []*member
	// stopWait, while the worker waits for the lock, ends that wait (the
	// last pending caller left).
	stopWait context.CancelFunc
	// wake, while the worker waits for a caller after a group, is closed
	// by the next one to queue.
	wake chan struct{}
}

// memberState is where a caller of a group queue is.
type memberState uint8

const (
	memberQueued memberState = iota // pending, or in a group not yet at it
	memberGone                      // its ctx ended before its turn: it left
	memberTurned                    // its turn came: it waits for the outcome
)

// member is one caller of DoBatch or Merger.Do.
type member struct {
	ctx   context.Context
	key   string
	req   any           // Merger: the request
	state memberState   // guarded by batchSet.mu
	ch    chan groupMsg // buffered 1: a turn, then (or only) the outcome
	back  chan sectionEnd
}

// groupMsg is what the worker tells a member: its turn (run its section,
// or, for a Merger, the group's fn), or the outcome.
type groupMsg struct {
	turn *groupTurn
	err  error // the outcome: nil when committed
	res  any   // Merger: the member's result
}

// groupTurn is a member's turn: its section runs in tx, under ctx.
type groupTurn struct {
	tx      *sql.Tx
	ctx     context.Context
	members []*member // Merger: the requests fn handles
}

// sectionEnd is how a member's turn ended.
type sectionEnd struct {
	err      error
	panicked bool  // fn panicked or called runtime.Goexit
	skipped  bool  // its ctx had ended before the section started
	res      []any // Merger: the results
}

func newMember(ctx context.Context, key string, req any) *member {
	return &member{ctx: ctx, key: key, req: req, ch: make(chan groupMsg, 1), back: make(chan sectionEnd, 1)}
}

// unqueueLocked moves m, if it is still queued, to state to (memberGone:
// it left; memberTurned: its turn came), and reports whether it did:
// whichever of its caller and the worker comes first decides. b.mu, the
// batchSet's, must be held.
func (m *member) unqueueLocked(to memberState) bool {
	if m.state != memberQueued {
		return false
	}
	m.state = to
	return true
}

// groupRunner says how a group's members are run: one section each
// (DoBatch), or one fn for all (Merger).
type groupRunner struct {
	db    *sql.DB
	call  string
	merge bool
}

// enqueue queues m on gk's group queue, starting its worker if it has
// none. It returns ErrClosed after Close.
func (l *Locker) enqueue(gk groupKey, m *member, r groupRunner) error {
	b := &l.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if b.queues == nil {
		b.queues = make(map[groupKey]*groupQueue)
	}
	gq := b.queues[gk]
	if gq == nil {
		gq = &groupQueue{gk: gk}
		b.queues[gk] = gq
		b.wg.Add(1)
		go l.groupWorker(gq, r)
	}
	gq.pending = append(gq.pending, m)
	if gq.wake != nil {
		close(gq.wake)
		gq.wake = nil
	}
	return nil
}

// leave takes m out of its queue when its ctx ended before its turn:
// true if it left, false if its turn has come (it must wait for it).
func (l *Locker) leave(gq *groupQueue, m *member) bool {
	b := &l.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	if !m.unqueueLocked(memberGone) {
		return false
	}
	for i, x := range gq.pending {
		if x == m {
			gq.pending = append(gq.pending[:i], gq.pending[i+1:]...)
			break
		}
	}
	if len(gq.pending) == 0 && gq.stopWait != nil {
		gq.stopWait()
	}
	return true
}

// await waits for m's turn or outcome; when ctx ends first, m leaves the
// queue and await returns ErrNotAcquired with ctx's error.
func (l *Locker) await(gk groupKey, m *member) (groupMsg, error) {
	select {
	case g := <-m.ch:
		return g, nil
	case <-m.ctx.Done():
	}
	b := &l.batch
	b.mu.Lock()
	gq := b.queues[gk]
	b.mu.Unlock()
	if gq != nil && l.leave(gq, m) {
		return groupMsg{}, notAcquired(m.ctx, m.key, nil)
	}
	return <-m.ch, nil
}

// groupWorker runs gq's groups until nobody is queued.
func (l *Locker) groupWorker(gq *groupQueue, r groupRunner) {
	b := &l.batch
	defer b.wg.Done()
	var k *Lock
	for {
		if k == nil {
			wctx, stop := context.WithCancel(context.Background())
			b.mu.Lock()
			if len(gq.pending) == 0 {
				delete(b.queues, gq.gk)
				b.mu.Unlock()
				stop()
				return
			}
			gq.stopWait = stop
			b.mu.Unlock()
			var err error
			k, err = l.acquire(wctx, gq.gk.key, false, false, early{kind: earlyFencedTx}, nil)
			b.mu.Lock()
			gq.stopWait = nil
			stopped := wctx.Err() != nil
			b.mu.Unlock()
			stop()
			if err != nil {
				k = nil
				if !stopped || errors.Is(err, ErrClosed) {
					l.failPending(gq, err)
				}
				continue
			}
		}
		if k.Err() != nil { // lost (or taken by Close) between two groups
			_ = l.releaseAll([]*Lock{k})
			k = nil
			continue
		}
		l.runGroup(gq, k, r)
		if !l.awaitArrival(gq) || !l.keepForGroup(k) {
			_ = l.releaseAll([]*Lock{k})
			k = nil
		}
	}
}

// groupGrace is how long a worker holding the lock waits, after a group,
// for a caller to queue before it lets the lock go: the callers of the
// group just committed are on their way back, and a new group without
// them would be small.
const groupGrace = 200 * time.Microsecond

// awaitArrival reports whether a caller is queued in gq, waiting up to
// groupGrace for one.
func (l *Locker) awaitArrival(gq *groupQueue) bool {
	b := &l.batch
	b.mu.Lock()
	if len(gq.pending) > 0 {
		b.mu.Unlock()
		return true
	}
	wake := make(chan struct{})
	gq.wake = wake
	b.mu.Unlock()
	t := time.NewTimer(groupGrace)
	select {
	case <-wake:
	case <-t.C:
	}
	t.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	gq.wake = nil
	return len(gq.pending) > 0
}

// failPending fails every pending caller of gq with err.
func (l *Locker) failPending(gq *groupQueue, err error) {
	b := &l.batch
	b.mu.Lock()
	ms := gq.pending
	gq.pending = nil
	for _, m := range ms {
		m.state = memberTurned
	}
	b.mu.Unlock()
	for _, m := range ms {
		m.ch <- groupMsg{err: err}
	}
}

// keepForGroup keeps k for the worker's next group, as a handoff to
// itself, when the handoff bounds allow it and no other local caller
// waits for the key.
func (l *Locker) keepForGroup(k *Lock) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := k.q
	if k.freed || k.state != stateHeld || len(q.waiters) > 0 || !q.mayHandOff(&l.cfg, l.closed) {
		return false
	}
	q.sess.handoffs++
	return true
}

// takeGroup takes the next group from gq: at most max callers still
// queued, in queue order.
func (l *Locker) takeGroup(gq *groupQueue, max int) []*member {
	b := &l.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(max, len(gq.pending))
	g := append([]*member(nil), gq.pending[:n]...)
	gq.pending = append(gq.pending[:0], gq.pending[n:]...)
	return g
}

// putBack returns the members of g not reached by their group to the
// front of gq's queue.
func (l *Locker) putBack(gq *groupQueue, g []*member) {
	b := &l.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	var keep []*member
	for _, m := range g {
		if m.state == memberQueued {
			keep = append(keep, m)
		}
	}
	gq.pending = append(keep, gq.pending...)
}

// turn gives m its turn, unless it left: false if it did.
func (l *Locker) turn(m *member) bool {
	b := &l.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	return m.unqueueLocked(memberTurned)
}

// endRest gives err to the members of g still queued (not reached).
func (l *Locker) endRest(g []*member, err error) {
	for _, m := range g {
		if l.turn(m) {
			m.ch <- groupMsg{err: err}
		}
	}
}

// groupTx is one group's transaction and what its sections did.
type groupTx struct {
	l     *Locker
	k     *Lock
	r     groupRunner
	tx    *sql.Tx
	first uint64 // the group's first token; last = first+n-1
	n     uint64
	// ok are the members whose section succeeded, waiting for the COMMIT;
	// res their results (Merger).
	ok  []*member
	res []any
	sp  int // savepoints set
	// broke is set when a section's error says the connection broke:
	// database/sql then ends the transaction itself (sql.ErrTxDone).
	broke bool
	// proven is the wait for the proof started beside the group's fn
	// (Merger) or the RELEASE SAVEPOINT of its last section (DoBatch), nil
	// if none was.
	proven func() error
}

// runGroup runs one group of gq under k, which it keeps held: it begins
// the group's transaction and mints its tokens (beginGroup), runs the
// group's fn (Merger) or sections (DoBatch), waits for the proof that k is
// still held, then commits or rolls back and gives the members waiting
// the outcome (end).
func (l *Locker) runGroup(gq *groupQueue, k *Lock, r groupRunner) {
	gctx, cancel := l.sectionContext(context.Background(), []*Lock{k})
	defer cancel(context.Canceled)
	gt, g := l.beginGroup(gctx, gq, k, r)
	if gt == nil {
		return
	}
	var gerr error // the group cannot commit
	if r.merge {
		gt.proven = gt.prove() // beside fn
		gerr = gt.runMerged(gctx, g)
	} else {
		gerr = gt.runSections(gctx, gq, g)
	}
	gt.end(gt.checkHeld(gerr))
}

// beginGroup begins the transaction of gq's next group, under k, takes the
// group (at most the group bound of the callers queued), and mints one
// token per member in one statement on gctx. It returns nil when there is
// nothing to run: the BEGIN failed (every pending caller gets its error),
// nobody is queued any more, or the mint failed (the group's members get
// its error, with the loss or Close that made it fail).
func (l *Locker) beginGroup(gctx context.Context, gq *groupQueue, k *Lock, r groupRunner) (*groupTx, []*member) {
	f := l.cfg.fence
	tx, err := r.db.BeginTx(context.Background(), f.groupTxOptions())
	if err != nil {
		l.failPending(gq, fail(gq.gk.key, "", r.call+": begin: "+err.Error(), err))
		return nil, nil
	}
	maxN, _ := l.cfg.batchLimits()
	g := l.takeGroup(gq, maxN)
	if len(g) == 0 {
		_ = tx.Rollback()
		return nil, nil
	}
	gt := &groupTx{l: l, k: k, r: r, tx: tx, n: uint64(len(g))}
	l.mu.Lock()
	k.sess.tokenNext = 0 // the mint below moves the counter past the session's block
	l.mu.Unlock()
	gt.first, err = f.mintBlockInTx(gctx, tx, gq.gk.key, k.q.name, gt.n)
	if err != nil {
		_ = tx.Rollback()
		if cause := context.Cause(gctx); gctx.Err() != nil && cause != nil {
			err = alsoMatching(err, cause)
		}
		l.endRest(g, err)
		return nil, nil
	}
	k.token.Store(gt.first + gt.n - 1)
	return gt, g
}

// runSections runs the sections of g, a DoBatch group, one at a time in
// queue order. No section starts after the group's time bound (the
// members not reached go back to the front of gq's queue, for the next
// group) nor once gctx ended (the lock lost, or taken by Close: they get
// that error). A section's error that stops the group (its transaction is
// gone) goes to the members not reached and is returned.
func (gt *groupTx) runSections(gctx context.Context, gq *groupQueue, g []*member) error {
	l := gt.l
	_, maxT := l.cfg.batchLimits()
	start := time.Now()
	for i, m := range g {
		if i > 0 && time.Since(start) > maxT {
			l.putBack(gq, g[i:])
			return nil
		}
		if gctx.Err() != nil {
			// The lock was lost or Close took it: start no more
			// sections (the proof rolls the group back).
			l.endRest(g[i:], fail(m.key, "not acquired", "the group's lock was lost (or the Locker closed) before this section started", ErrNotAcquired, context.Cause(gctx)))
			return nil
		}
		if err := gt.section(gctx, m, gt.first+uint64(i), i == len(g)-1); err != nil {
			l.endRest(g[i+1:], err)
			return err
		}
	}
	return nil
}

// checkHeld waits for the proof that the lock is still held — the one
// started beside the group's fn or its last section's RELEASE SAVEPOINT,
// or, when none was and the group would commit, one started now — and
// returns gerr, or, when the group would have committed and the proof
// failed, the loss: the group is rolled back instead.
func (gt *groupTx) checkHeld(gerr error) error {
	proven := gt.proven
	if proven == nil && gerr == nil && len(gt.ok) > 0 {
		proven = gt.prove()
	}
	if proven == nil {
		return gerr
	}
	if err := proven(); err != nil && gerr == nil && len(gt.ok) > 0 {
		return fail(gt.k.key, "", gt.r.call+": the lock was lost before the group's COMMIT, which was rolled back instead: "+err.Error(), ErrLockLost, err)
	}
	return gerr
}

// end ends the group's transaction: rolled back when gerr says it cannot
// commit (the members waiting for the outcome get gerr) or when no
// section succeeded, committed otherwise (they get the COMMIT's outcome).
func (gt *groupTx) end(gerr error) {
	switch {
	case gerr != nil:
		_ = gt.tx.Rollback()
		gt.deliver(gerr)
	case len(gt.ok) == 0:
		_ = gt.tx.Rollback()
	default:
		gt.deliver(gt.commit(gt.k.key))
	}
}

// prove starts a check that the lock's session holds the lock now, in a
// goroutine of its own, and returns the wait for its result: a group
// whose lock is found lost before its COMMIT is rolled back.
func (gt *groupTx) prove() func() error {
	since := time.Now()
	ch := make(chan error, 1)
	go func() { ch <- gt.k.sess.check(gt.l.bg, gt.l.cfg.checkTimeout, since) }()
	return func() error { return <-ch }
}

// section runs m's section, with token tok, in the group's transaction,
// under its own savepoint, released once the section succeeded: that
// RELEASE SAVEPOINT (or the ROLLBACK TO SAVEPOINT of a failed section)
// fails when the section ended the transaction, so the group stops there,
// before a later section runs outside it. The proof of the lock starts
// beside the RELEASE of the group's last section. section returns an
// error when the group cannot go on (its transaction is gone).
func (gt *groupTx) section(gctx context.Context, m *member, tok uint64, last bool) error {
	if !gt.l.turn(m) {
		return nil // m left
	}
	gt.sp++
	sp := "nl_s" + strconv.Itoa(gt.sp)
	if _, err := gt.tx.ExecContext(context.Background(), "SAVEPOINT "+sp); err != nil {
		err = gt.txGone(err)
		m.ch <- groupMsg{err: err}
		return err
	}
	m.ch <- groupMsg{turn: &groupTurn{tx: gt.tx, ctx: gt.sectionCtx(gctx, m.ctx, m.key, tok)}}
	e := <-m.back
	switch {
	case e.skipped:
	case e.err != nil || e.panicked:
		// Its caller has its error (or its panic): only its work is undone.
		gt.broke = gt.broke || connEnded(e.err) || gctx.Err() != nil // a statement cut by the group's ctx closes the connection
		if _, err := gt.tx.ExecContext(context.Background(), "ROLLBACK TO SAVEPOINT "+sp); err != nil {
			return gt.txGone(err)
		}
	default:
		// Its caller waits for the group's outcome, whatever it is: what
		// it wrote may have been committed by its own section.
		gt.ok = append(gt.ok, m)
		if last {
			gt.proven = gt.prove()
		}
		if _, err := gt.tx.ExecContext(context.Background(), "RELEASE SAVEPOINT "+sp); err != nil {
			return gt.txGone(err)
		}
	}
	return nil
}

// txGone is the group's error when a statement of its own failed: the
// transaction was ended by a section, or its connection broke (then the
// server rolled it back).
func (gt *groupTx) txGone(err error) error {
	key := gt.k.key
	if !gt.broke && !connEnded(err) && (errors.Is(err, sql.ErrTxDone) || isNoSavepoint(err)) {
		return fail(key, "", gt.r.call+": a section ended the group's transaction ("+err.Error()+"); what it and the sections before it wrote may have been committed, and no later section ran", ErrSectionEndedTx, err)
	}
	return fail(key, "", gt.r.call+": the group's transaction failed, nothing of it was committed: "+err.Error(), err)
}

// connEnded reports whether err says the connection broke or the server
// ended its session (which rolls back its open transaction).
func connEnded(err error) bool {
	if isConnClosed(err) {
		return true
	}
	switch mysqlErrNum(err) {
	case 1053, // ER_SERVER_SHUTDOWN
		1927, // ER_CONNECTION_KILLED (MariaDB)
		3169, // ER_SESSION_WAS_KILLED (MySQL)
		4031: // ER_CLIENT_INTERACTION_TIMEOUT (MySQL)
		return true
	}
	return false
}

// isNoSavepoint reports ER_SP_DOES_NOT_EXIST (1305).
func isNoSavepoint(err error) bool { return mysqlErrNum(err) == 1305 }

// mysqlErrNum is the server's error number in err, 0 if err is not an
// error the server sent.
func mysqlErrNum(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// runMerged runs a Merger's group: fn once for every member still queued,
// in the goroutine of the first of them.
func (gt *groupTx) runMerged(gctx context.Context, g []*member) error {
	var live []*member
	for _, m := range g {
		if gt.l.turn(m) {
			live = append(live, m)
		}
	}
	if len(live) == 0 {
		return nil
	}
	ctx := gt.sectionCtx(gctx, context.Background(), gt.k.key, gt.first)
	live[0].ch <- groupMsg{turn: &groupTurn{tx: gt.tx, ctx: ctx, members: live}}
	e := <-live[0].back
	switch {
	case e.panicked:
		err := fail(gt.k.key, "", gt.r.call+": fn panicked; the group's transaction was rolled back", errMergerPanicked)
		gt.ok, gt.res = live[1:], nil
		return err
	case e.err != nil:
		gt.ok = live
		return e.err
	case len(e.res) != len(live):
		gt.ok = live
		return fail(gt.k.key, "", fmt.Sprintf("%s: fn returned %d results for %d requests; the group's transaction was rolled back", gt.r.call, len(e.res), len(live)), ErrInvalidArgument)
	}
	gt.ok, gt.res = live, e.res
	return nil
}

// errMergerPanicked is matched by the error of the requests of a Merger
// group whose fn panicked (in another caller's goroutine).
var errMergerPanicked = errors.New("namedlock: Merger: fn panicked")

// commit commits the group's transaction. A COMMIT whose error does not
// prove it was not applied (commitRefused: the connection broke after it
// was written, or the server ended the session during it) leaves the
// outcome unknown: the error matches ErrCommitUnknown. Nothing the library
// could read tells it: the fence row cannot, since the tokens of a group
// rolled back are minted again by the next holder of the key.
func (gt *groupTx) commit(key string) error {
	cerr := gt.tx.Commit()
	switch {
	case cerr == nil:
		return nil
	case !commitRefused(cerr):
		return fail(key, "", gt.r.call+": commit: the group's transaction may have committed; its outcome is unknown: "+cerr.Error(), ErrCommitUnknown, cerr)
	case flavor.IsWriteConflict(cerr):
		return fail(key, "", gt.r.call+": commit: "+cerr.Error()+"; nothing of the group was committed", ErrWriteConflict, cerr)
	}
	return fail(key, "", gt.r.call+": commit: "+cerr.Error()+"; nothing of the group was committed", cerr)
}

// deliver gives the group's outcome to the members waiting for it.
func (gt *groupTx) deliver(err error) {
	if err == nil {
		// Counted before any caller returns, so that a caller reads it in
		// Stats once its DoBatch or Merger.Do returned.
		gt.l.stats.fencedCommits.Add(1)
	}
	for i, m := range gt.ok {
		msg := groupMsg{err: err}
		if err == nil && gt.res != nil {
			msg.res = gt.res[i]
		}
		m.ch <- msg
	}
}

// sectionCtx is the ctx of a section (or of a Merger's fn): it ends when
// the group must stop (the lock lost, Close), not when the caller's ctx
// ends — a statement whose ctx ends closes its connection, which would
// end the whole group's transaction — and carries the caller's values and
// the section's token.
func (gt *groupTx) sectionCtx(gctx, caller context.Context, key string, tok uint64) context.Context {
	t := &Lock{l: gt.l, q: gt.k.q, sess: gt.k.sess, key: key, state: stateReleased, freed: true}
	t.token.Store(tok)
	return sectionCtx{Context: gctx, vals: caller, locks: nestLocks(caller, []*Lock{t})}
}

// sectionCtx: see groupTx.sectionCtx.
type sectionCtx struct {
	context.Context // the group's: Deadline, Done, Err
	vals            context.Context
	locks           []*Lock
}

func (c sectionCtx) Value(key any) any {
	switch key {
	case tokenKey{}:
		return c.locks
	case sectionCallerKey{}:
		return c.vals
	}
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.vals.Value(key)
}

// sectionCallerKey is the key of the caller's ctx in a section's ctx.
type sectionCallerKey struct{}

// waitCtx returns the ctx a wait of the library for a lock (or for a
// group) runs on: ctx, ending also when the ctx of the DoBatch caller
// whose section ctx comes from ends. A section's ctx does not end with its
// caller's (a statement on it would close the group's connection), but a
// section that waits for a lock (the same key's, which the group holds)
// must not wait longer than its caller would. stop must be called once
// the wait is over.
func waitCtx(ctx context.Context) (wctx context.Context, stop func()) {
	caller, _ := ctx.Value(sectionCallerKey{}).(context.Context)
	if caller == nil || caller.Done() == nil {
		return ctx, func() {}
	}
	wctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(caller, func() {
		cancel(fmt.Errorf("the ctx of the DoBatch caller whose section waits ended: %w", context.Cause(caller)))
	})
	return wctx, func() {
		unhook()
		cancel(context.Canceled)
	}
}

// groupTxOptions returns the options a group's transaction begins with: the
// server's default level, except READ COMMITTED on a server whose
// transactions read from a snapshot taken at their first statement (TiDB):
// the group's mint may wait for the previous holder's COMMIT, and its
// sections must read what that COMMIT wrote.
func (f *fenceTable) groupTxOptions() *sql.TxOptions {
	if f.snapshotAtFirst() {
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return nil
}
