package namedlock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/namedlock/mysql/keyfmt"
)

// Do acquires the lock named by key (waiting as [Locker.Acquire] does), runs
// fn, and releases the lock — also when fn returns an error or panics (the
// panic continues after the release).
//
// fn's ctx is derived from ctx and is cancelled, with [context.Cause] an
// error matching [ErrLockLost], if the lock is lost while fn runs; Do then
// returns an error matching ErrLockLost and fn's own error, whose text says
// each once ("…lost: …; " and fn's text). fn should stop its work, and not
// commit anything, once its ctx is done.
//
// A nil fn returns an error matching [ErrInvalidArgument], and a nil ctx
// panics, before anything is locked or counted.
func (l *Locker) Do(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	if fn == nil {
		return nilFn("Do")
	}
	k, err := l.Acquire(ctx, key)
	if err != nil {
		return err
	}
	return l.run(ctx, []*Lock{k}, fn)
}

// TryDo is [Locker.Do] that does not wait for a holder: when key is held it
// returns an error matching [ErrNotAcquired] without running fn. A nil fn
// returns an error matching [ErrInvalidArgument].
func (l *Locker) TryDo(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	if fn == nil {
		return nilFn("TryDo")
	}
	k, err := l.TryAcquire(ctx, key)
	if err != nil {
		return err
	}
	return l.run(ctx, []*Lock{k}, fn)
}

// DoMulti is [Locker.Do] over several keys at once. The keys are taken one
// by one in one canonical order (sorted by server name, duplicates removed)
// and every key taken is given back if a later one cannot be. fn's ctx is
// cancelled if any of the locks is lost. No keys or an empty one return an
// error matching [ErrInvalidKey], a nil fn one matching
// [ErrInvalidArgument].
//
// Every lock held pins one connection of the lock pool, so before it takes
// any key DoMulti reserves as many of the pool's connections as it has
// keys, all at once. The Lockers on one *sql.DB count the connections they
// use against its limit ([pool.WithMaxConns], sql.DB.SetMaxOpenConns), and
// never count more than the limit: each key that a caller of a Locker is
// busy with (acquiring it at the server, holding it, releasing it) counts
// one, from before the first of them asks for its connection until the
// last of them is done with it. A caller that needs one waits for it
// before it joins the key's local queue, holding nothing; callers queued
// behind a busy key need none. A DoMulti waits, holding no lock and no
// connection, until its n are free at once (within ctx, and until Close;
// acquisitions that need fewer are not held up behind it, so on a pool
// that they keep full it waits); its keys then take theirs from the
// reservation (a key already busy in the process needs none), and no other
// acquisition can take those. More keys than the pool's limit return an
// error matching [ErrInvalidArgument] at once, before anything is locked.
// A DoMulti of one key, which never holds one connection while it asks for
// another, reserves nothing.
//
// So two callers of DoMulti can never deadlock against each other, in one
// process or several: not on the locks, which every caller takes in the
// same order, nor on the lock pools' connections, since a DoMulti never
// waits for a connection while it holds a lock, and whoever it waits for
// in a key's queue has the connection it needs. That holds for callers
// that take their locks with DoMulti alone, on a lock pool that only
// Lockers use (a statement of the application's own on it takes a
// connection that nothing counts); a caller that already holds a lock of
// the same pool, or whose fn takes more, is nested locking, which neither
// the order nor the reservation covers (a Locker is not re-entrant).
func (l *Locker) DoMulti(ctx context.Context, keys []string, fn func(ctx context.Context) error) error {
	if fn == nil {
		return nilFn("DoMulti")
	}
	ordered, err := canonicalKeys(keys)
	if err != nil {
		return err
	}
	actx, release, err := l.reserve(ctx, ordered)
	if err != nil {
		return err
	}
	defer release()
	locks := make([]*Lock, 0, len(ordered))
	for _, key := range ordered {
		k, err := l.Acquire(actx, key)
		if err != nil {
			return joinErrors(err, l.releaseAll(locks))
		}
		locks = append(locks, k)
	}
	return l.run(ctx, locks, fn)
}

// reserve reserves the lock pool's connections for the keys of a DoMulti
// (see DoMulti): it returns the ctx its acquisitions take them with and the
// function that gives back those they did not take, to be called once the
// locks are released. A DoMulti of one key reserves nothing: it never holds
// one connection while it waits for another.
func (l *Locker) reserve(ctx context.Context, keys []string) (context.Context, func(), error) {
	if ctx == nil {
		panic("namedlock: nil Context")
	}
	n, capacity := len(keys), l.capacity()
	if l.budget == nil || n < 2 {
		return ctx, func() {}, nil
	}
	if capacity > 0 && n > capacity {
		return nil, nil, fail("", "", fmt.Sprintf("invalid argument: DoMulti: %d keys, more than the lock pool's %d connections (each held lock pins one)", n, capacity), ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, notAcquired(ctx, keys[0], nil)
	}
	// Waiting for the reservation is waiting for the first lock: counted
	// as such, and ended by Close as a wait at the server is.
	start := time.Now()
	l.stats.waiting.Add(1)
	rctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.closing, func() { cancel(ErrClosed) })
	err := l.budget.take(rctx, n, capacity)
	stop()
	cancel(nil)
	l.stats.waiting.Add(-1)
	if err != nil {
		err = notAcquired(ctx, keys[0], nil)
		if ctx.Err() == nil {
			err = ErrClosed
		}
		wait := time.Since(start)
		l.stats.waitNanos.Add(int64(wait))
		l.stats.notAcquired.Add(1)
		l.observe(Event{Key: keys[0], Outcome: NotAcquired, Wait: wait, Err: err, Context: ctx})
		return nil, nil, err
	}
	r := &reservation{left: n}
	return context.WithValue(ctx, reservationKey{}, r), func() { l.budget.give(r.left) }, nil
}

// errNoKeys is the error of DoMulti without keys.
var errNoKeys = fail("", "", "invalid key: no keys", ErrInvalidKey, ErrInvalidArgument)

// nilFn is the error of a call given a nil fn.
func nilFn(call string) error {
	return fail("", "", "invalid argument: "+call+": nil fn", ErrInvalidArgument)
}

// canonicalKeys orders keys by their server names and drops duplicates.
func canonicalKeys(keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, errNoKeys
	}
	type named struct{ key, name string }
	ns := make([]named, 0, len(keys))
	for _, key := range keys {
		if key == "" {
			return nil, errEmptyKey
		}
		ns = append(ns, named{key, keyfmt.Portable(key)})
	}
	slices.SortFunc(ns, func(a, b named) int { return cmp.Compare(a.name, b.name) })
	ns = slices.CompactFunc(ns, func(a, b named) bool { return a.name == b.name })
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.key
	}
	return out, nil
}

// sectionContext returns the ctx of a section under locks: derived from
// ctx, cancelled with the loss as its cause if one of them is lost, and,
// with fencing, carrying them for TokenFromContext.
func (l *Locker) sectionContext(ctx context.Context, locks []*Lock) (context.Context, context.CancelCauseFunc) {
	fctx, cancel := context.WithCancelCause(ctx)
	if l.cfg.fence != nil {
		fctx = withLocks(fctx, locks)
	}
	l.mu.Lock()
	for _, k := range locks {
		if k.state != stateHeld {
			cancel(k.err)
		}
		k.cancel = cancel
	}
	l.mu.Unlock()
	return fctx, cancel
}

// releaseAll releases locks in reverse order of acquisition, each release
// that goes to the server bounded by the release timeout (whose timer is
// started only for such a release, not for a handoff).
func (l *Locker) releaseAll(locks []*Lock) error {
	var errs []error
	for i := len(locks) - 1; i >= 0; i-- {
		if err := locks[i].releaseWithin(l.cfg.releaseTimeout, true); err != nil {
			errs = append(errs, err)
		}
	}
	return joinErrors(errs...)
}

// run runs fn under the held locks and releases them, even on panic; it
// returns fn's error joined with the release's.
func (l *Locker) run(ctx context.Context, locks []*Lock, fn func(ctx context.Context) error) error {
	ferr, rerr := l.runSection(ctx, locks, fn)
	if rerr == nil {
		return ferr
	}
	return joinErrors(rerr, ferr)
}

// runSection runs fn under the held locks and releases them, even on
// panic (the panic continues after the release). fn's ctx is cancelled,
// with the loss as its cause, if a lock is lost while fn runs; with fencing
// it carries the locks for TokenFromContext.
func (l *Locker) runSection(ctx context.Context, locks []*Lock, fn func(ctx context.Context) error) (ferr, rerr error) {
	fctx, cancel := l.sectionContext(ctx, locks)
	finished := false
	defer func() {
		if !finished { // fn panicked or called runtime.Goexit
			_ = l.releaseAll(locks)
			cancel(context.Canceled)
		}
	}()
	ferr = fn(fctx)
	finished = true
	rerr = l.releaseAll(locks)
	cancel(context.Canceled)
	return ferr, rerr
}
