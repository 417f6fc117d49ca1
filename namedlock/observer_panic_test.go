package namedlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// panicking returns an observer that panics on the events want selects,
// counting them.
func panicking(n *atomic.Int32, want func(namedlock.Event) bool) func(namedlock.Event) {
	return func(e namedlock.Event) {
		if want(e) {
			n.Add(1)
			panic("observer panics on " + e.Outcome.String())
		}
	}
}

// TestObserverPanicOnAcquired: an observer that panics on the Acquired
// event (which comes once the lock is installed) neither strands the lock
// nor reaches the caller: Do runs fn and releases as if the observer had
// returned, the server frees the lock, nothing stays counted as held, and
// Stats counts the panic.
func TestObserverPanicOnAcquired(t *testing.T) {
	leakCheck(t)
	var n atomic.Int32
	in := newInstance(t, "", namedlock.WithObserver(panicking(&n, func(e namedlock.Event) bool { return e.Outcome == namedlock.Acquired })))
	key := uniqueKey(t, "k")
	ctx := testCtx(t, 20*time.Second)
	ran := false
	var err error
	panicked := func() (p any) {
		defer func() { p = recover() }() // as net/http does for a handler
		err = in.locker.Do(ctx, key, func(context.Context) error { ran = true; return nil })
		return nil
	}()
	if panicked != nil || err != nil || !ran {
		t.Errorf("Do with an observer panicking on Acquired: panic %v, err %v, fn ran %v; want no panic, nil, true", panicked, err, ran)
	}
	if id := noHolderWithin(t, admin(t), keyfmt.Portable(key), 3*time.Second); id != 0 {
		t.Errorf("3 s after Do returned, session %d still holds the lock", id)
	}
	st := in.locker.Stats()
	if st.Held != 0 || st.ObserverPanics != int64(n.Load()) || n.Load() == 0 {
		t.Errorf("Stats = %+v (observer panicked %d times); want Held 0, ObserverPanics counting them", st, n.Load())
	}
	ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := in.locker.Do(ctx2, key, func(context.Context) error { return nil }); err != nil {
		t.Errorf("a second Do on the key: %v", err)
	}
}

// TestObserverPanicOnReleased: an observer that panics on every Released
// event stops no release: a DoMulti's three locks all go back, and so do
// the locks that Close takes back.
func TestObserverPanicOnReleased(t *testing.T) {
	leakCheck(t)
	var n atomic.Int32
	in := newInstance(t, "", namedlock.WithObserver(panicking(&n, func(e namedlock.Event) bool { return e.Outcome == namedlock.Released })))
	base := uniqueKey(t, "")
	keys := []string{base + "a", base + "b", base + "c"}
	ctx := testCtx(t, 20*time.Second)
	var err error
	panicked := func() (p any) {
		defer func() { p = recover() }()
		err = in.locker.DoMulti(ctx, keys, func(context.Context) error { return nil })
		return nil
	}()
	if panicked != nil || err != nil {
		t.Errorf("DoMulti with an observer panicking on Released: panic %v, err %v; want neither", panicked, err)
	}
	adm := admin(t)
	for _, k := range keys {
		if id := noHolderWithin(t, adm, keyfmt.Portable(k), 3*time.Second); id != 0 {
			t.Errorf("%s still held by session %d after DoMulti returned", k, id)
		}
	}
	if st := in.locker.Stats(); st.Held != 0 {
		t.Errorf("Stats.Held = %d after DoMulti, want 0", st.Held)
	}

	k1 := mustAcquire(t, in.locker, base+"x")
	k2 := mustAcquire(t, in.locker, base+"y")
	panicked = func() (p any) {
		defer func() { p = recover() }()
		err = in.locker.Close()
		return nil
	}()
	if panicked != nil || err != nil {
		t.Errorf("Close with an observer panicking on Released: panic %v, err %v; want neither", panicked, err)
	}
	for _, k := range []*namedlock.Lock{k1, k2} {
		if id := noHolderWithin(t, adm, k.Name(), 3*time.Second); id != 0 || !errors.Is(k.Err(), namedlock.ErrClosed) {
			t.Errorf("%s after Close: held by session %d, Err %v; want free, ErrClosed", k.Key(), id, k.Err())
		}
	}
	if st := in.locker.Stats(); st.Held != 0 || st.ObserverPanics != int64(n.Load()) {
		t.Errorf("Stats = %+v (observer panicked %d times)", st, n.Load())
	}
}

// TestObserverPanicOnLost: an observer that panics on the Lost event,
// which the keep-alive's goroutine reports, neither kills the process nor
// keeps the holder from being told.
func TestObserverPanicOnLost(t *testing.T) {
	leakCheck(t)
	var n atomic.Int32
	in := newInstance(t, "", namedlock.WithKeepAlive(100*time.Millisecond),
		namedlock.WithObserver(panicking(&n, func(e namedlock.Event) bool { return e.Outcome == namedlock.Lost })))
	k := mustAcquire(t, in.locker, uniqueKey(t, "k"))
	adm := admin(t)
	killSession(t, adm, holderOf(t, adm, k.Name()))
	select {
	case <-k.Done():
	// contract: a lost lock is reported within keep-alive + check timeout
	// (docs/guarantees.md), a panicking observer or not; 10 s is generous.
	case <-time.After(10 * time.Second):
		t.Fatal("the loss was not reported within 10 s")
	}
	if !errors.Is(k.Err(), namedlock.ErrLockLost) {
		t.Errorf("Err = %v, want ErrLockLost", k.Err())
	}
	eventually(t, 5*time.Second, "the observer's panic to be counted", func() bool { return in.locker.Stats().ObserverPanics == 1 })
}
