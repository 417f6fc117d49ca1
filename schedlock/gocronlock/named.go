package gocronlock

import (
	"context"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// NamedKeyPrefix is the keyfmt prefix of the named locks NewNamedLocker
// takes: the key for job "report" is keyfmt.Key("gocron", "report"),
// "gocron:report". The Locker maps each key once, with keyfmt.Portable, so
// the name the server shows (IS_USED_LOCK, the process list) is
// keyfmt.Portable(keyfmt.Key("gocron", jobName)): "gocron:report" itself,
// and a "prefix#hash" name for a job name with characters outside keyfmt's
// portable alphabet (upper case, spaces, gocron's default function names)
// or a key longer than 64 characters. Raw SQL that must exclude the job
// takes that name.
const NamedKeyPrefix = "gocron"

// releaseTimeout bounds an Unlock whose context was already cancelled.
const releaseTimeout = 5 * time.Second

// tryWaitedLimit is how long a Lock's TryAcquire may take and still run the
// job: a try that took longer may have waited for another instance's run
// of this tick to end (see NewNamedLocker).
const tryWaitedLimit = 500 * time.Millisecond

// NewNamedLocker returns a gocron.Locker backed by MySQL named locks: Lock is
// l.TryAcquire of keyfmt.Key(NamedKeyPrefix, jobName), passed unmapped (the
// Locker maps it); while another instance runs the job, Lock fails at once
// with an error matching namedlock.ErrNotAcquired, so gocron skips the run
// (gocron skips only on an error). Unlock releases it. The lock is held exactly while the job
// runs. It returns an error matching namedlock.ErrInvalidArgument if l is
// nil.
//
// A TryAcquire that took longer than 500 ms is given back and counts as
// not acquired: on TiDB a try must wait 1 s for a held lock when the
// Locker cannot use its fast probe (a user without the SELECT and UPDATE
// privileges on mysql.advisory_locks), and would be granted the lock when
// another instance's run of the same tick ends, running the job twice in
// that tick. A run that found the pool exhausted for that long is skipped
// too.
func NewNamedLocker(l *namedlock.Locker) (gocron.Locker, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: gocronlock: NewNamedLocker: nil *namedlock.Locker", namedlock.ErrInvalidArgument)
	}
	return namedLocker{l}, nil
}

type namedLocker struct{ l *namedlock.Locker }

// Lock implements gocron.Locker.
func (n namedLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	start := time.Now()
	lk, err := n.l.TryAcquire(ctx, keyfmt.Key(NamedKeyPrefix, key))
	if err != nil {
		return nil, err
	}
	if lk == nil {
		// gocron skips a run only on an error.
		return nil, fmt.Errorf("%w: gocronlock: job %q is running on another instance; this run is skipped", namedlock.ErrNotAcquired, key)
	}
	if took := time.Since(start); took > tryWaitedLimit {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		_ = lk.Release(rctx)
		return nil, fmt.Errorf("%w: gocronlock: the try took %v, over %v: it may have waited for another instance's run of this tick, so this run is skipped",
			namedlock.ErrNotAcquired, took.Round(time.Millisecond), tryWaitedLimit)
	}
	return namedLock{lk}, nil
}

type namedLock struct{ lk *namedlock.Lock }

// Unlock implements gocron.Lock. gocron passes the job's context, which is
// cancelled at shutdown; the release still runs, for at most 5 seconds.
// (An unconfirmed release discards the lock's connection, which frees the
// lock on the server anyway.)
func (n namedLock) Unlock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	return n.lk.Release(ctx)
}
