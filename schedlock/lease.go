package schedlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A Lease is a held job lock, returned by (*Provider).Lock: one
// acquisition of the job's row. Its methods are safe for concurrent use.
// Unlock it when the job is done; Unlock is idempotent, so a deferred
// Unlock after an explicit one is harmless.
//
// A lease's statements act on its own acquisition only: they match the
// row by name, locked_by and the locked_at its acquisition wrote, so a
// lease whose row was taken again after it ran out (by another instance, or
// by a newer lease of the same Provider) changes nothing and reports
// ErrLeaseLost. Unlock is the lease's last statement: once it is called no
// extension starts, and it sends the unlock only after every extension
// already sent has been answered.
type Lease struct {
	p        *Provider
	cfg      Config
	lockedAt int64 // the acquisition's locked_at, ms since the epoch
	onLost   func(error)

	mu        sync.Mutex
	unlocked  bool // Unlock was called: no extension starts any more
	lost      error
	unlockErr error          // the last finished Unlock's result
	final     bool           // an unlock statement succeeded or found the lease lost: later Unlocks send nothing
	attempt   chan struct{}  // non-nil while an Unlock runs; closed when it returns
	inflight  sync.WaitGroup // extensions sent and not answered; Add only under mu while !unlocked

	// abandon cancels the extensions still in flight; only Unlock calls
	// it, after waiting the unlock timeout for them.
	abandonCtx context.Context
	abandon    context.CancelFunc

	done     chan struct{}
	doneOnce sync.Once

	stopKA chan struct{} // closed by Unlock; nil without keep-alive
	kaDone chan struct{}
}

func newLease(p *Provider, cfg Config, lockedAt int64, onLost func(error)) *Lease {
	l := &Lease{p: p, cfg: cfg, lockedAt: lockedAt, onLost: onLost, done: make(chan struct{})}
	l.abandonCtx, l.abandon = context.WithCancel(context.Background())
	return l
}

// Name returns the job name the lease locks.
func (l *Lease) Name() string { return l.cfg.Name }

// Config returns the configuration the lease was taken with.
func (l *Lease) Config() Config { return l.cfg }

// Done returns a channel closed when the lease ends: Unlock was called
// (even if that Unlock then fails), or it was found lost (by the keep-alive
// or by Extend). Err tells which.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held, an error matching ErrLeaseLost
// once it was found lost (by the keep-alive, Extend, or Unlock), and
// ErrUnlocked once an Unlock unlocked it. After an Unlock that failed
// otherwise it returns that failure (the row may still be the lease's:
// call Unlock again); while the first Unlock runs, nil.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errLocked()
}

// errLocked is Err with mu held.
func (l *Lease) errLocked() error {
	switch {
	case l.lost != nil:
		return l.lost
	case errors.Is(l.unlockErr, ErrLeaseLost):
		return l.unlockErr
	case l.final:
		return ErrUnlocked
	}
	return l.unlockErr
}

func (l *Lease) lostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Extend sets lock_until to now + d (database time) with ShedLock's extend
// statement, only if the row is still this lease's and unexpired. An
// error matching ErrLeaseLost means it is not (the lease then ends, see
// Done); one matching ErrLeaseOutOfRange means now + d would be past the
// end of the TIMESTAMP column, and lock_until was left as it was (the lease
// is still held); any other error leaves the lease's state unknown. d must
// be at least a millisecond (ErrInvalidArgument otherwise). Extend does not
// change locked_at, so LockAtLeastFor still counts from acquisition.
//
// Once Unlock has been called, Extend returns ErrUnlocked and sends
// nothing. If ctx ends before the server answers, Extend returns ctx's
// error at once, but the statement is not cut off (a statement whose
// connection is closed may still be applied): it runs on, keeping ctx's
// values, and Unlock waits for its answer before it unlocks.
func (l *Lease) Extend(ctx context.Context, d time.Duration) error {
	if l == nil {
		return ErrUnlocked
	}
	if d < time.Millisecond {
		return fmt.Errorf("%w: Extend(%v): must be at least 1ms", ErrInvalidArgument, d)
	}
	res := make(chan error, 1)
	if err := l.startExtend(ctx, d, func(err error) { res <- err }); err != nil {
		return err
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("schedlock: extend of job %q: %w (the statement was left to finish; Unlock waits for it)",
			l.cfg.Name, context.Cause(ctx))
	}
}

// startExtend sends an extension of d unless the lease was unlocked or
// lost, and hands its result to deliver, which must not block. The
// statement's context keeps ctx's values but not its cancellation: only
// Unlock, through abandon, cuts it off.
func (l *Lease) startExtend(ctx context.Context, d time.Duration, deliver func(error)) error {
	l.mu.Lock()
	switch {
	case l.lost != nil:
		l.mu.Unlock()
		return l.lost
	case l.unlocked:
		l.mu.Unlock()
		return ErrUnlocked
	}
	l.inflight.Add(1)
	l.mu.Unlock()

	go func() {
		defer l.inflight.Done()
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		stop := context.AfterFunc(l.abandonCtx, cancel)
		err := l.p.extend(sctx, l.cfg.Name, l.lockedAt, d)
		stop()
		cancel()
		if errors.Is(err, ErrLeaseLost) {
			l.markLost(err)
		}
		deliver(err)
	}()
	return nil
}

// Unlock releases the lock with ShedLock's unlock statement: lock_until =
// max(locked_at + LockAtLeastFor, now), for this lease's row only, and only
// while the lease has not run out (lock_until still to come).
//
// Unlock is the lease's last statement. From the moment it is called no
// extension starts (Extend returns ErrUnlocked, the keep-alive stops);
// then it waits for the extensions already sent to be answered, for up to
// half of the Provider's unlock timeout (WithUnlockTimeout), without
// cutting them off; only then does it send the unlock, which has until the
// unlock timeout, counted from the call, has passed. So Unlock returns
// within the unlock timeout, and when it returns nil, every statement of
// the lease was applied before the unlock, and none is left to land after
// it. If an extension is still unanswered after the wait, Unlock cuts it
// off, still unlocks, and returns an error saying the server may yet apply
// that extension after the unlock (the job would stay locked until then
// plus the extension: a skipped run, never a second one at once).
//
// Unlock is not cut short by ctx's cancellation (a job cancelled by a
// shutdown must still give its lock back); it keeps ctx's values. If the
// statement fails, the row stays locked until its lock_until. An error
// matching ErrLeaseLost means the lease had run out before the unlock (its
// lock_until had passed: the job outlived LockAtMostFor or its last
// extension), and the row may have been taken again since (by another
// instance, or by a newer lease of this Provider): the job may have run
// twice at once; the row was left as it was.
//
// Unlock is idempotent, as namedlock's Lock.Release is, once it has
// unlocked: after an Unlock that returned nil, a later call sends nothing
// and returns ErrUnlocked; after one that found the lease lost, a later
// call sends nothing and returns the same loss (an error matching
// ErrLeaseLost). A caller may ignore either, as in a deferred Unlock after
// an explicit one. After an Unlock that failed otherwise (its statement
// timed out, the connection failed: the row may still be the lease's), a
// later call sends the unlock statement again, with a new unlock timeout;
// if the earlier statement was applied after all, the retry finds the row
// not the lease's any more and reports ErrLeaseLost. A call made while
// another runs waits for it and returns, without sending anything,
// ErrUnlocked if it returned nil, or else its error. When the unlock
// statement succeeded but an extension had to be cut off (see above), the
// unlock counts as done: later calls return ErrUnlocked. Unlock on a nil
// Lease returns ErrUnlocked.
func (l *Lease) Unlock(ctx context.Context) error {
	if l == nil {
		return ErrUnlocked
	}
	l.mu.Lock()
	if l.final {
		err := l.errLocked()
		l.mu.Unlock()
		return err
	}
	if ch := l.attempt; ch != nil {
		l.mu.Unlock()
		<-ch
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.final {
			return l.errLocked()
		}
		return l.unlockErr
	}
	first := !l.unlocked
	l.unlocked = true
	ch := make(chan struct{})
	l.attempt = ch
	l.mu.Unlock()

	var stmtErr, err error
	if first {
		stmtErr, err = l.unlock(ctx)
	} else {
		stmtErr = l.resend(ctx)
		err = stmtErr
	}
	l.mu.Lock()
	l.unlockErr = err
	l.final = stmtErr == nil || errors.Is(stmtErr, ErrLeaseLost)
	l.attempt = nil
	close(ch)
	l.mu.Unlock()
	return err
}

// unlock is the first Unlock's work: it stops the extensions and sends the
// unlock statement. It returns the statement's own result and Unlock's.
func (l *Lease) unlock(ctx context.Context) (stmtErr, err error) {
	defer l.abandon()
	// One deadline for the whole Unlock: the extensions in flight get up
	// to half of the unlock timeout, the unlock statement the rest.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.p.unlockTimeout)
	defer cancel()
	waitFor := l.p.unlockTimeout / 2
	wctx, wcancel := context.WithTimeout(uctx, waitFor)
	defer wcancel()

	if l.stopKA != nil {
		close(l.stopKA)
		<-l.kaDone
	}
	l.doneOnce.Do(func() { close(l.done) })

	answered := make(chan struct{})
	go func() {
		l.inflight.Wait()
		close(answered)
	}()
	var abandoned error
	select {
	case <-answered:
	case <-wctx.Done():
		l.abandon()
		<-answered
		abandoned = fmt.Errorf("schedlock: unlock of job %q: an extension was still unanswered after %v and was cut off; "+
			"the server may still apply it after this unlock and keep the job locked until its lock_until",
			l.cfg.Name, waitFor)
	}

	stmtErr = l.p.unlock(uctx, l.cfg.Name, l.lockedAt, l.cfg.LockAtLeastFor)
	if abandoned != nil && stmtErr != nil {
		// One message, with the package's prefix once.
		return stmtErr, &multiError{msg: stmtErr.Error() + "; " + trimPrefix(abandoned), errs: []error{stmtErr, abandoned}}
	}
	return stmtErr, join(stmtErr, abandoned)
}

// resend is a later Unlock's work after a failed one: the extensions are
// already stopped, so it only sends the unlock statement again.
func (l *Lease) resend(ctx context.Context) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.p.unlockTimeout)
	defer cancel()
	return l.p.unlock(uctx, l.cfg.Name, l.lockedAt, l.cfg.LockAtLeastFor)
}

// markLost records the first loss, ends the lease and tells the owner.
func (l *Lease) markLost(cause error) {
	l.mu.Lock()
	if l.unlocked || l.lost != nil {
		l.mu.Unlock()
		return
	}
	l.lost = cause
	l.mu.Unlock()
	l.doneOnce.Do(func() { close(l.done) })
	if l.onLost != nil {
		l.onLost(cause)
	}
}

// keepAlive extends the lease every cfg.KeepAlive until Unlock closes
// stopKA. A failed extension is retried at the next tick (a transient
// error is not a lost lease); an extension that finds the row not the
// lease's, or no successful extension before the last known lock_until
// (expiry), loses the lease. Extensions are never cut off by the
// keep-alive: one that is slow to answer is left running (Unlock waits for
// it), and the next tick sends another, with at most maxPending unanswered
// at a time.
func (l *Lease) keepAlive(ctx context.Context, expiry *time.Timer) {
	defer close(l.kaDone)
	ticker := time.NewTicker(l.cfg.KeepAlive)
	defer ticker.Stop()
	defer func() { expiry.Stop() }()

	const maxPending = 2
	type result struct {
		err  error
		seq  int
		next *time.Timer // started before the statement was sent
	}
	// Never full: at most maxPending results are outstanding.
	results := make(chan result, maxPending)
	pending, sent, newest := 0, 0, 0 // newest: seq of the latest success
	var lastErr error
	for {
		select {
		case <-l.stopKA:
			return
		case <-expiry.C:
			cause := fmt.Errorf("%w: job %q: no extension succeeded before lock_until (LockAtMostFor %v)",
				ErrLeaseLost, l.cfg.Name, l.cfg.LockAtMostFor)
			if lastErr != nil {
				cause = &multiError{msg: cause.Error() + "; last error: " + trimPrefix(lastErr), errs: []error{cause, lastErr}}
			}
			l.markLost(cause)
			return
		case <-ticker.C:
			if pending >= maxPending {
				continue
			}
			sent++
			seq, next := sent, time.NewTimer(l.cfg.LockAtMostFor)
			err := l.startExtend(ctx, l.cfg.LockAtMostFor, func(err error) { results <- result{err, seq, next} })
			if err != nil { // unlocked or lost
				next.Stop()
				return
			}
			pending++
		case r := <-results:
			pending--
			switch {
			case r.err == nil && r.seq > newest:
				expiry.Stop()
				expiry = r.next
				newest = r.seq
				lastErr = nil
			case errors.Is(r.err, ErrLeaseLost):
				return // startExtend marked the lease lost
			case r.err != nil:
				r.next.Stop()
				lastErr = r.err
			default: // an older success than one already counted
				r.next.Stop()
			}
		}
	}
}
