package schedlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A Lease is a held job lock, returned by (*Provider).Lock. Its methods are
// safe for concurrent use. Unlock must be called exactly once when the job
// is done; later calls return ErrUnlocked.
type Lease struct {
	p      *Provider
	cfg    Config
	onLost func(error)

	mu       sync.Mutex
	unlocked bool
	lost     error

	done     chan struct{}
	doneOnce sync.Once

	stopKA context.CancelFunc // nil without keep-alive
	kaDone chan struct{}
}

// Name returns the job name the lease locks.
func (l *Lease) Name() string { return l.cfg.Name }

// Config returns the configuration the lease was taken with.
func (l *Lease) Config() Config { return l.cfg }

// Done returns a channel closed when the lease ends: it was unlocked, or it
// was found lost (by the keep-alive or by Extend). Err tells which.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held, an error matching ErrLeaseLost
// once it was found lost, and ErrUnlocked after Unlock.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.lost != nil:
		return l.lost
	case l.unlocked:
		return ErrUnlocked
	}
	return nil
}

func (l *Lease) lostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Extend sets lock_until to now + d (database time) with ShedLock's extend
// statement, only if the lease is still this Provider's and unexpired. An
// error matching ErrLeaseLost means it is not (the lease then ends, see
// Done); one matching ErrLeaseOutOfRange means now + d would be past the
// end of the TIMESTAMP column, and lock_until was left as it was (the lease
// is still held); any other error leaves the lease's state unknown. d must
// be at least a millisecond (ErrInvalidArgument otherwise). Extend does not
// change locked_at, so LockAtLeastFor still counts from acquisition.
func (l *Lease) Extend(ctx context.Context, d time.Duration) error {
	if l == nil {
		return ErrUnlocked
	}
	if d < time.Millisecond {
		return fmt.Errorf("%w: Extend(%v): must be at least 1ms", ErrInvalidArgument, d)
	}
	if err := l.Err(); err != nil {
		return err
	}
	err := l.p.extend(ctx, l.cfg.Name, d)
	if errors.Is(err, ErrLeaseLost) {
		l.markLost(err)
	}
	return err
}

// Unlock releases the lock with ShedLock's unlock statement: lock_until =
// max(locked_at + LockAtLeastFor, now), for this Provider's row only. It
// first stops the keep-alive and waits for it.
//
// Unlock is not cut short by ctx's cancellation (a job cancelled by a
// shutdown must still give its lock back): it keeps ctx's values and runs
// for at most the Provider's unlock timeout (WithUnlockTimeout). If the
// statement fails, the row stays locked until its lock_until. An error
// matching ErrLeaseLost means the row had been taken over by another
// instance before the unlock: the job may have run twice at once.
//
// Unlock on a nil Lease, or a second time, returns ErrUnlocked.
func (l *Lease) Unlock(ctx context.Context) error {
	if l == nil {
		return ErrUnlocked
	}
	l.mu.Lock()
	if l.unlocked {
		l.mu.Unlock()
		return ErrUnlocked
	}
	l.unlocked = true
	l.mu.Unlock()

	if l.stopKA != nil {
		l.stopKA()
		<-l.kaDone
	}
	l.doneOnce.Do(func() { close(l.done) })

	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.p.unlockTimeout)
	defer cancel()
	return l.p.unlock(uctx, l.cfg.Name, l.cfg.LockAtLeastFor)
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

// keepAlive extends the lease every cfg.KeepAlive until Unlock cancels ctx.
// A failed extension is retried at the next tick (a transient error is not a
// lost lease); an extension that finds the row not ours, or no successful
// extension before the last known lock_until (expiry), loses the lease.
func (l *Lease) keepAlive(ctx context.Context, expiry *time.Timer) {
	defer close(l.kaDone)
	ticker := time.NewTicker(l.cfg.KeepAlive)
	defer ticker.Stop()
	defer func() { expiry.Stop() }()

	// Each attempt ends by the next tick, and never outlives the lease it
	// is trying to extend by more than a keep-alive interval.
	attempt := min(l.cfg.KeepAlive, l.cfg.LockAtMostFor-l.cfg.KeepAlive)
	var lastErr error
	for {
		select {
		case <-ctx.Done():
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
			next := time.NewTimer(l.cfg.LockAtMostFor)
			actx, cancel := context.WithTimeout(ctx, attempt)
			err := l.p.extend(actx, l.cfg.Name, l.cfg.LockAtMostFor)
			cancel()
			switch {
			case err == nil:
				expiry.Stop()
				expiry = next
				lastErr = nil
			case errors.Is(err, ErrLeaseLost):
				next.Stop()
				l.markLost(err)
				return
			default:
				next.Stop()
				if ctx.Err() != nil { // stopped by Unlock mid-attempt
					return
				}
				lastErr = err
			}
		}
	}
}
