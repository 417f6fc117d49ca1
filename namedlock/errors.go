package namedlock

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Match them with [errors.Is]; errors returned by this
// package wrap them and keep the underlying cause (a context error, a server
// error) joined in.
var (
	// ErrNotAcquired: the lock was not acquired, because another session
	// holds it (TryAcquire, a server timeout), because ctx ended first (the
	// error then also matches ctx.Err()), or because the server ended the
	// wait itself, by an operator's KILL QUERY or a statement time limit
	// (which lock connections switch off for their sessions): the error
	// then says so.
	ErrNotAcquired = errors.New("namedlock: lock not acquired")
	// ErrLockLost: the lock was held and is no longer: its session ended
	// (KILL, server restart, network failure, wait_timeout) or its ownership
	// check failed or did not answer in time. Another instance may hold it.
	ErrLockLost = errors.New("namedlock: lock lost")
	// ErrInvalidKey: the key is empty. Any other string is accepted.
	ErrInvalidKey = errors.New("namedlock: invalid key")
	// ErrClosed: the Locker was closed. Locks held at Close were released by it.
	ErrClosed = errors.New("namedlock: locker closed")
	// ErrNotHeld: Release was called on a lock that was already released.
	ErrNotHeld = errors.New("namedlock: lock not held (already released)")
	// ErrDeadlock: the server refused the wait because it would deadlock
	// (MySQL error 3058, MariaDB 1213). Such an error also matches
	// ErrNotAcquired. Take several keys with [Locker.DoMulti].
	ErrDeadlock = errors.New("namedlock: deadlock")
	// ErrInvalidOption: an option passed to [NewLocker] is out of range.
	ErrInvalidOption = errors.New("namedlock: invalid option")
	// ErrFencing: fencing is configured ([WithFencing]) but cannot be
	// used as asked: the fence table does not exist, or [Locker.DoTx] was
	// given another database than the one that holds it. Nothing was
	// locked or written.
	ErrFencing = errors.New("namedlock: fencing misconfigured")
	// ErrFenceWait: a fenced [Locker.DoTx] waited for the fence row longer
	// than the server's innodb_lock_wait_timeout, because an earlier
	// holder's transaction (one that lost its lock and did not end) still
	// holds it. The transaction was rolled back. Such an error also matches
	// ErrNotAcquired.
	ErrFenceWait = errors.New("namedlock: fence row held by an earlier holder's open transaction")
)

// notAcquired builds the error of a wait that ended without the lock:
// ErrNotAcquired, with ctx's error joined when ctx ended.
func notAcquired(ctx context.Context, key string, cause error) error {
	err := fmt.Errorf("%w: %q", ErrNotAcquired, key)
	if ctxErr := ctx.Err(); ctxErr != nil {
		if c := context.Cause(ctx); c != nil && c != ctxErr {
			return errors.Join(err, ctxErr, c)
		}
		return errors.Join(err, ctxErr)
	}
	if cause != nil {
		return errors.Join(err, cause)
	}
	return err
}

// isLost reports whether err tells of a lost lock.
func isLost(err error) bool { return errors.Is(err, ErrLockLost) }

// lostError is the one form of a loss: the lock name, what showed it, and
// the cause (a driver error) when there is one.
func lostError(name, why string, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: %q: %s", ErrLockLost, name, why)
	}
	return fmt.Errorf("%w: %q: %s: %w", ErrLockLost, name, why, cause)
}

// ErrStaleToken is returned by [CheckFenced] when a fenced write changed
// nothing: a later holder of the lock wrote with a greater token first (or
// the row does not exist).
var ErrStaleToken = errors.New("namedlock: fenced write rejected: a later holder wrote first")
