package namedlock

import (
	"cmp"
	"context"
	"errors"
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

// TryDo is [Locker.Do] that does not wait for a holder, with the result of
// schedlock's Run (the three results are listed below).
//
// A key counts as held when another session holds it, or when another
// caller of this Locker has taken it or is taking or giving it back: one
// that holds it; the first in line for it, still taking it (waiting for a
// connection of the lock pool, or for the server's answer), even if it
// then fails to; one releasing it; and a [Locker.DoBatch] or [Merger]
// group worker, which keeps the key briefly after its group and then
// releases it, after the callers' DoBatch calls have returned. So a TryDo
// on the same key right after the same goroutine's DoBatch returned
// usually answers (false, nil), while after its own Do (or Release)
// returned no caller of this Locker is left on the key. TryDo never waits
// for another caller of this Locker to decide.
//
// The three results:
//
//   - key is held, as above: fn does not run; ran is false and err is nil.
//   - The lock was taken: fn runs as in Do and the lock is released; ran
//     is true and err is what Do would return (fn's error, a loss, a
//     failed release).
//   - Anything else kept the lock from being taken (ctx, the pool, the
//     server, an empty key, Close): ran is false and err says why. A nil fn
//     returns an error matching [ErrInvalidArgument].
func (l *Locker) TryDo(ctx context.Context, key string, fn func(ctx context.Context) error) (ran bool, err error) {
	if fn == nil {
		return false, nilFn("TryDo")
	}
	k, err := l.TryAcquire(ctx, key)
	if err != nil || k == nil {
		return false, err
	}
	return true, l.run(ctx, []*Lock{k}, fn)
}

// DoMulti is [Locker.Do] over several keys at once. The keys are taken one
// by one in one canonical order (sorted by server name, duplicates removed)
// and every key taken is given back if a later one cannot be. fn's ctx is
// cancelled if any of the locks is lost. No keys or an empty one return an
// error matching [ErrInvalidKey], a nil fn one matching
// [ErrInvalidArgument].
//
// Every lock held pins one connection of the lock pool, so before it takes
// any key DoMulti reserves the connections its keys need, all at once. The
// Lockers on one *sql.DB count the connections they use against its limit
// ([pool.WithMaxConns], sql.DB.SetMaxOpenConns), and never count more
// than the limit: each key that a caller of a Locker is busy with
// (acquiring it at the server, holding it, releasing it) counts one, from
// before the first of them asks for its connection until the last of them
// is done with it. A caller that needs one waits for it before it joins
// the key's local queue, holding nothing; callers queued behind a busy key
// need none. So a DoMulti reserves one for each of its keys that no
// caller of its Locker is busy with, and none for a busy one, whose count
// it keeps: should the busy callers be done before the DoMulti reaches the
// key, the key keeps its count, unused, until the DoMulti (or another
// caller) takes it over. A reserved one that a key turns out not to need
// (a caller got busy with it first) is given back at once. A DoMulti waits,
// holding no lock, no connection and no count, until what it needs is free
// at once (within ctx, and until Close; acquisitions that need fewer are
// not held up behind it, so on a pool that they keep full it waits; on a
// pool with enough free it does not wait at all). More keys than the
// pool's limit return an error matching [ErrInvalidArgument] at once,
// before anything is locked. A DoMulti of one key, which never holds one
// connection while it asks for another, reserves nothing.
//
// So two callers of DoMulti can never deadlock against each other, in one
// process or several: not on the locks, which every caller takes in the
// same order, nor on the lock pools' connections, since a DoMulti never
// waits for a count while it holds a lock, the connection it asks for
// while it holds one is covered by a count it holds, and whoever it waits
// for in a key's queue holds that key's count. That holds for callers that
// take their locks with DoMulti alone, on a lock pool that only Lockers
// use (a statement of the application's own on it takes a connection that
// nothing counts); a caller that already holds a lock of the same pool, or
// whose fn takes more, is nested locking, which neither the order nor the
// reservation covers (a Locker is not re-entrant).
//
// The limit is read again while callers wait (every 100 ms), so a raised
// limit lets a waiting DoMulti go on, and one lowered below what its keys
// need ends its wait with an error matching ErrInvalidArgument. A limit
// lowered below the counts already in use leaves no connection due to a
// count: a DoMulti that holds a lock and would then wait for a connection
// gives up instead, with an error matching [ErrNotAcquired] and
// ErrInvalidArgument, releasing the locks it took.
func (l *Locker) DoMulti(ctx context.Context, keys []string, fn func(ctx context.Context) error) error {
	if fn == nil {
		return nilFn("DoMulti")
	}
	ordered, err := canonicalKeys(keys)
	if err != nil {
		return err
	}
	actx, r, err := l.reserve(ctx, ordered)
	if err != nil {
		return err
	}
	locks := make([]*Lock, 0, len(ordered))
	for _, key := range ordered {
		if r != nil {
			r.holding = len(locks)
		}
		k, err := l.Acquire(actx, key)
		if err != nil {
			err = joinErrors(err, l.releaseAll(locks))
			if r != nil {
				r.end()
			}
			return err
		}
		locks = append(locks, k)
	}
	if r != nil {
		r.end() // every key reached: nothing is left, but say so
	}
	return l.run(ctx, locks, fn)
}

// reserve reserves the lock pool's connections for the keys of a DoMulti
// (see DoMulti) and returns the ctx its acquisitions take them with, and
// the reservation (nil: none), whose end gives back what they did not
// use. Decided under l.mu, in one step: a unit for each key that has no
// local queue, taken from the budget, and a claim on the queue of each
// key that has one (which needs none: the DoMulti will queue behind its
// busy party, or take it over idle). When the units are not free, it
// waits for as many, holding nothing (no unit, no claim: a claim held
// while waiting would keep a unit from others), and decides again with
// them; a key whose queue ended meanwhile needs one more, one that got a
// queue one less. A DoMulti of one key reserves nothing: it never holds
// one connection while it waits for another.
func (l *Locker) reserve(ctx context.Context, keys []string) (context.Context, *reservation, error) {
	if ctx == nil {
		panic("namedlock: nil Context")
	}
	n, capacity := len(keys), l.capacity()
	if l.budget == nil || n < 2 {
		return ctx, nil, nil
	}
	if capacity > 0 && n > capacity {
		return nil, nil, fail("", "", fmt.Sprintf("invalid argument: DoMulti: %d keys, more than the lock pool's %d connections (each held lock pins one)", n, capacity), ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, notAcquired(ctx, keys[0], nil)
	}
	names := make([]string, n)
	for i, key := range keys {
		names[i] = keyfmt.Portable(key)
	}
	r, need, err := l.reserveNow(names, 0)
	if r != nil {
		return context.WithValue(ctx, reservationKey{}, r), r, nil
	}
	// Waiting for the reservation is waiting for the first lock: counted
	// as such, and ended by Close as a wait at the server is.
	start := time.Now()
	l.stats.waiting.Add(1)
	if err == nil {
		rctx, cancel := context.WithCancelCause(ctx)
		stop := context.AfterFunc(l.closing, func() { cancel(ErrClosed) })
		for r == nil && err == nil {
			if err = l.budget.take(rctx, need, l.capacity); err == nil {
				r, need, err = l.reserveNow(names, need)
			}
		}
		stop()
		cancel(nil)
	}
	l.stats.waiting.Add(-1)
	if err != nil {
		var over errOverLimit
		switch {
		case errors.As(err, &over):
			err = fail(keys[0], "not acquired", "invalid argument: DoMulti: "+over.Error(), ErrNotAcquired, ErrInvalidArgument)
		case errors.Is(err, ErrClosed):
		case ctx.Err() == nil:
			err = ErrClosed
		default:
			err = notAcquired(ctx, keys[0], nil)
		}
		wait := time.Since(start)
		l.stats.waitNanos.Add(int64(wait))
		l.stats.notAcquired.Add(1)
		l.observe(Event{Key: keys[0], Outcome: NotAcquired, Wait: wait, Err: err, Context: ctx})
		return nil, nil, err
	}
	return context.WithValue(ctx, reservationKey{}, r), r, nil
}

// reserveNow makes the reservation of the keys named names if it can now,
// with the got units its caller already took (given back if it cannot, or
// the surplus if it can): nil and how many units it needs when they are not
// free; ErrClosed after Close; an errOverLimit when the pool's limit is now
// below the number of keys.
func (l *Locker) reserveNow(names []string, got int) (*reservation, int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.budget.give(got)
		return nil, 0, ErrClosed
	}
	if c := l.capacity(); c > 0 && len(names) > c {
		l.budget.give(got)
		return nil, 0, errOverLimit{len(names), c}
	}
	need := 0
	for _, name := range names {
		if l.queues[name] == nil {
			need++
		}
	}
	switch {
	case need < got:
		l.budget.give(got - need)
	case need > got && !l.budget.tryTake(need-got, l.capacity()):
		l.budget.give(got)
		return nil, need, nil
	}
	r := &reservation{l: l, left: need}
	for _, name := range names {
		if q := l.queues[name]; q != nil {
			if r.claims == nil {
				r.claims = make(map[string]*queue)
			}
			r.claims[name] = q
			q.claims++
		}
	}
	return r, 0, nil
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
