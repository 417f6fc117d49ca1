package schedlock

import (
	"context"
	"errors"
	"fmt"
)

// Run runs fn once if it can take the job's lock, ShedLock-style: it tries
// once and never waits.
//
//   - The lock is held by another instance: fn does not run; ran is false and
//     err is nil.
//   - The lock was taken: fn runs with a context derived from ctx, then the
//     lock is unlocked (lock_until = max(locked_at + LockAtLeastFor, now)),
//     even if fn panics (the panic continues after the unlock). ran is true
//     and err is fn's error, joined (on one line) with the unlock's error if
//     that failed.
//   - With cfg.KeepAlive, if the lease is lost while fn runs, fn's context is
//     cancelled with a cause matching ErrLeaseLost (see context.Cause), and
//     err matches ErrLeaseLost even if fn returned nil: the job may have run
//     on two instances at once.
//   - Invalid cfg, a lease past the TIMESTAMP range, a missing table, or a
//     database error: ran is false and err says why (ErrInvalidConfig,
//     ErrLeaseOutOfRange, ErrTableNotFound, ErrBadTable, ...). A nil fn is
//     refused with ErrInvalidArgument.
func (p *Provider) Run(ctx context.Context, cfg Config, fn func(ctx context.Context) error) (ran bool, err error) {
	if fn == nil {
		return false, fmt.Errorf("%w: Run: nil job function", ErrInvalidArgument)
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lease, err := p.lock(ctx, cfg, cancel)
	if errors.Is(err, ErrLocked) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer func() {
		uerr := lease.Unlock(ctx)
		lost := lease.lostErr()
		if lost != nil && !errors.Is(err, lost) {
			err = join(err, lost)
		}
		if uerr != nil && (lost == nil || !errors.Is(uerr, ErrLeaseLost)) {
			err = join(err, uerr)
		}
	}()
	return true, fn(fnCtx)
}
