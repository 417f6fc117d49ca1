package namedlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// TestAcquireShowsOnServer: a held lock is visible to IS_USED_LOCK under
// Lock.Name() (keyfmt.Portable of the key), and gone after Release.
func TestAcquireShowsOnServer(t *testing.T) {
	leakCheck(t)
	in := newInstance(t, "")
	adm := admin(t)
	key := uniqueKey(t, "Mixed")
	k := mustAcquire(t, in.locker, key)
	if k.Key() != key {
		t.Errorf("Key() = %q, want %q", k.Key(), key)
	}
	if want := keyfmt.Portable(key); k.Name() != want {
		t.Errorf("Name() = %q, want keyfmt.Portable(key) = %q", k.Name(), want)
	}
	if id := holderOf(t, adm, k.Name()); id == 0 {
		t.Errorf("IS_USED_LOCK(%q) is NULL while held", k.Name())
	}
	if id := holderOf(t, adm, key); id != 0 {
		t.Errorf("IS_USED_LOCK of the raw (unmapped) key = %d, want NULL: the server name must be the mapped one", id)
	}
	wantInUse(t, in.db, 1)
	if err := k.Err(); err != nil {
		t.Errorf("Err() while held = %v", err)
	}
	select {
	case <-k.Done():
		t.Error("Done closed while held")
	default:
	}
	if err := k.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-k.Done():
	default:
		t.Error("Done not closed after Release")
	}
	if err := k.Err(); !errors.Is(err, namedlock.ErrNotHeld) {
		t.Errorf("Err() after Release = %v, want ErrNotHeld", err)
	}
	if id := holderOf(t, adm, k.Name()); id != 0 {
		t.Errorf("IS_USED_LOCK = %d after Release, want NULL", id)
	}
	wantInUse(t, in.db, 0)
}

// TestTryOnHeldKey: TryAcquire and TryDo on a key held by another instance,
// and by another goroutine of the same Locker, report it at once without an
// error (TryAcquire: nil, nil; TryDo: false, nil) and without running fn;
// they take it once it is released. Stats count the refusals as not
// acquired.
func TestTryOnHeldKey(t *testing.T) {
	t.Parallel()
	a := newInstance(t, "")
	b := newInstance(t, "")
	key := uniqueKey(t, "k")
	k := mustAcquire(t, a.locker, key)
	ctx := testCtx(t, 10*time.Second)

	for _, tc := range []struct {
		name string
		in   *instance
	}{{"other instance", b}, {"same locker", a}} {
		start := time.Now()
		got, err := tc.in.locker.TryAcquire(ctx, key)
		if err != nil || got != nil {
			t.Errorf("%s: TryAcquire on a held key = %v, %v, want nil, nil", tc.name, got, err)
		}
		if err := got.Release(ctx); !errors.Is(err, namedlock.ErrNotHeld) {
			t.Errorf("%s: Release of TryAcquire's nil *Lock = %v, want ErrNotHeld", tc.name, err)
		}
		called := false
		ran, err := tc.in.locker.TryDo(ctx, key, func(context.Context) error { called = true; return nil })
		if ran || err != nil {
			t.Errorf("%s: TryDo on a held key = %v, %v, want false, nil", tc.name, ran, err)
		}
		if called {
			t.Errorf("%s: TryDo ran fn on a held key", tc.name)
		}
		// contract: a try answers at once, without waiting for the holder
		// (TryAcquire), who holds it until the end of the test; 5 s is
		// the generous bound.
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%s: TryAcquire + TryDo took %v: they must not wait for the holder", tc.name, el)
		}
	}
	wantInUse(t, b.db, 0)
	wantInUse(t, a.db, 1)
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	called := false
	if ran, err := b.locker.TryDo(ctx, key, func(context.Context) error { called = true; return nil }); err != nil || !ran || !called {
		t.Errorf("TryDo on a free key = %v, %v (fn called %v), want true, nil and fn run", ran, err, called)
	}
	got, err := b.locker.TryAcquire(ctx, key)
	if err != nil || got == nil {
		t.Fatalf("TryAcquire on a free key = %v, %v", got, err)
	}
	if err := got.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
	st := b.locker.Stats()
	if st.NotAcquired != 2 || st.Acquired != 2 || st.Held != 0 {
		t.Errorf("Stats = %+v, want NotAcquired 2, Acquired 2, Held 0", st)
	}
}

// TestTryFailureIsAnError: a try that is refused for another reason than a
// held key (here ctx already ended) is an error, not a skip: TryAcquire
// returns an error matching ErrNotAcquired and ctx's, TryDo (false, that
// error).
func TestTryFailureIsAnError(t *testing.T) {
	t.Parallel()
	in := newInstance(t, "")
	key := uniqueKey(t, "k")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := in.locker.TryAcquire(ctx, key)
	if got != nil || !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("TryAcquire with an ended ctx = %v, %v; want nil, ErrNotAcquired and context.Canceled", got, err)
	}
	ran, err := in.locker.TryDo(ctx, key, func(context.Context) error { return nil })
	if ran || !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("TryDo with an ended ctx = %v, %v; want false, ErrNotAcquired and context.Canceled", ran, err)
	}
	if ran, err := in.locker.TryDo(context.Background(), "", func(context.Context) error { return nil }); ran || !errors.Is(err, namedlock.ErrInvalidKey) {
		t.Errorf("TryDo with an empty key = %v, %v; want false, ErrInvalidKey", ran, err)
	}
	errFn := errors.New("fn failed")
	if ran, err := in.locker.TryDo(context.Background(), key, func(context.Context) error { return errFn }); !ran || !errors.Is(err, errFn) {
		t.Errorf("TryDo whose fn fails = %v, %v; want true, fn's error", ran, err)
	}
	wantInUse(t, in.db, 0)
}

// TestSubSecondDeadline: a wait with a sub-second (or fractional) deadline on
// a held key ends at that deadline, not before and not a second late, with
// an error matching ErrNotAcquired and context.DeadlineExceeded; fn of Do
// does not run; the pool keeps no connection.
func TestSubSecondDeadline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout, min, max time.Duration
	}{
		{300 * time.Millisecond, 250 * time.Millisecond, 1300 * time.Millisecond},
		{80 * time.Millisecond, 60 * time.Millisecond, 1000 * time.Millisecond},
		{1500 * time.Millisecond, 1450 * time.Millisecond, 2500 * time.Millisecond},
	} {
		t.Run(tc.timeout.String(), func(t *testing.T) {
			t.Parallel()
			a := newInstance(t, "")
			b := newInstance(t, "")
			key := uniqueKey(t, "k")
			held := mustAcquire(t, a.locker, key)

			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			start := time.Now()
			k, err := b.locker.Acquire(ctx, key)
			el := time.Since(start)
			if k != nil {
				t.Fatalf("Acquire on a held key returned a lock")
			}
			if !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Acquire = %v, want ErrNotAcquired and DeadlineExceeded", err)
			}
			// contract: a wait lasts until its ctx ends, not less...
			if el < tc.min {
				t.Errorf("Acquire with a %v deadline returned after %v, want at least %v", tc.timeout, el, tc.min)
			}
			// contract: ...and the ctx cuts it: it does not run on to the
			// server's next whole second (docs/guarantees.md, Cancelled
			// waits); max is the deadline + about 1 s.
			if el > tc.max {
				t.Errorf("Acquire with a %v deadline returned after %v, want at most %v", tc.timeout, el, tc.max)
			}
			wantInUse(t, b.db, 0)

			ctx2, cancel2 := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel2()
			ran := false
			start = time.Now()
			err = b.locker.Do(ctx2, key, func(context.Context) error { ran = true; return nil })
			el = time.Since(start)
			if !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || ran {
				t.Errorf("Do = %v (fn ran: %v), want ErrNotAcquired and DeadlineExceeded, fn not run", err, ran)
			}
			// contract: as for Acquire above.
			if el < tc.min {
				t.Errorf("Do with a %v deadline returned after %v, want at least %v", tc.timeout, el, tc.min)
			}
			if el > tc.max {
				t.Errorf("Do with a %v deadline returned after %v, want at most %v", tc.timeout, el, tc.max)
			}

			// The timed-out instance can take the key once it is free.
			if err := held.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			k2 := mustAcquire(t, b.locker, key)
			_ = k2.Release(context.Background())
			wantInUse(t, b.db, 0)
		})
	}
}

// TestDeadlineThenGrant: a wait whose deadline is longer than the holder's
// hold is granted when the holder releases, well before the deadline.
func TestDeadlineThenGrant(t *testing.T) {
	t.Parallel()
	a := newInstance(t, "")
	b := newInstance(t, "")
	adm := admin(t)
	key := uniqueKey(t, "k")
	held := mustAcquire(t, a.locker, key)
	go func() {
		eventually(t, 5*time.Second, "b never waited at the server", func() bool {
			return waitingAtServer(t, adm, held.Name())
		})
		time.Sleep(100 * time.Millisecond)
		_ = held.Release(context.Background())
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	k, err := b.locker.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	// contract: a waiter is granted when the holder releases (about 100 ms
	// in), not at its 5 s deadline, which 3 s tells apart.
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("granted after %v, want soon after the release", el)
	}
	if err := k.Release(ctx); err != nil {
		t.Error(err)
	}
}

// TestCancelledWait: a wait at the server ended by cancel (not a deadline)
// returns at once with an error matching context.Canceled and
// ErrNotAcquired; the server-side wait ends at once too (the session is
// killed), so it can never be granted the lock afterwards.
func TestCancelledWait(t *testing.T) {
	testdb.RequireReal(t)
	leakCheck(t)
	a := newInstance(t, "")
	b := newInstance(t, "")
	adm := admin(t)
	key := uniqueKey(t, "k")
	held := mustAcquire(t, a.locker, key)
	name := held.Name()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelledAt time.Time
	go func() {
		eventually(t, 5*time.Second, "b never waited at the server", func() bool { return waitingAtServer(t, adm, name) })
		time.Sleep(50 * time.Millisecond)
		cancelledAt = time.Now()
		cancel()
	}()
	k, err := b.locker.Acquire(ctx, key)
	returned := time.Now()
	if k != nil {
		t.Fatal("Acquire on a held key returned a lock")
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, namedlock.ErrNotAcquired) {
		t.Errorf("Acquire = %v, want context.Canceled and ErrNotAcquired", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire = %v matches DeadlineExceeded; ctx was cancelled", err)
	}
	// contract: a cancelled wait returns at once (docs/guarantees.md,
	// Cancelled waits), not when the server notices its client gone (it
	// polls every second), which 500 ms tells apart.
	if d := returned.Sub(cancelledAt); d > 500*time.Millisecond {
		t.Errorf("Acquire returned %v after cancel, want promptly", d)
	}
	// The server polls for a vanished client only every second; the Locker
	// kills the session, which ends the wait much sooner.
	eventually(t, 600*time.Millisecond+slice(t), "the cancelled wait is still waiting at the server", func() bool {
		return !waitingAtServer(t, adm, name)
	})
	if st := b.locker.Stats(); st.CancelledWaits != 1 || st.NotAcquired != 1 || st.Waiting != 0 {
		t.Errorf("Stats = %+v, want CancelledWaits 1, NotAcquired 1, Waiting 0", st)
	}
	wantInUse(t, b.db, 0)
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if id := holderOf(t, adm, name); id != 0 {
		t.Errorf("after the holder released, session %d holds the lock: the cancelled wait was granted", id)
	}
}

// TestAcquireCancelledBeforeStart: a ctx that already ended fails at once.
func TestAcquireCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	in := newInstance(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k, err := in.locker.Acquire(ctx, uniqueKey(t, "k"))
	if k != nil || !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire(cancelled ctx) = %v, %v; want nil, ErrNotAcquired+Canceled", k, err)
	}
	wantInUse(t, in.db, 0)
}

// TestReleaseIdempotent: the second Release returns ErrNotHeld and never
// hangs; concurrent Releases: exactly one succeeds; Release on a nil *Lock
// returns ErrNotHeld.
func TestReleaseIdempotent(t *testing.T) {
	leakCheck(t)
	in := newInstance(t, "")
	adm := admin(t)
	ctx := testCtx(t, 10*time.Second)

	k := mustAcquire(t, in.locker, uniqueKey(t, "k"))
	if err := k.Release(ctx); err != nil {
		t.Fatalf("first Release: %v", err)
	}
	returnsWithin(t, 2*time.Second, "second Release", func() {
		if err := k.Release(ctx); !errors.Is(err, namedlock.ErrNotHeld) {
			t.Errorf("second Release = %v, want ErrNotHeld", err)
		}
	})
	returnsWithin(t, 2*time.Second, "Release with a cancelled ctx", func() {
		c, cancel := context.WithCancel(ctx)
		cancel()
		if err := k.Release(c); !errors.Is(err, namedlock.ErrNotHeld) {
			t.Errorf("third Release = %v, want ErrNotHeld", err)
		}
	})

	k2 := mustAcquire(t, in.locker, uniqueKey(t, "k2"))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- k2.Release(ctx) })
	}
	returnsWithin(t, 5*time.Second, "8 concurrent Releases", wg.Wait)
	close(errs)
	var ok, notHeld int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, namedlock.ErrNotHeld):
			notHeld++
		default:
			t.Errorf("concurrent Release: %v", err)
		}
	}
	if ok != 1 || notHeld != 7 {
		t.Errorf("concurrent Releases: %d nil and %d ErrNotHeld, want 1 and 7", ok, notHeld)
	}
	if id := holderOf(t, adm, k2.Name()); id != 0 {
		t.Errorf("still held by %d", id)
	}

	var nilLock *namedlock.Lock
	if err := nilLock.Release(ctx); !errors.Is(err, namedlock.ErrNotHeld) {
		t.Errorf("nil *Lock Release = %v, want ErrNotHeld", err)
	}
	if st := in.locker.Stats(); st.Held != 0 || st.Acquired != 2 {
		t.Errorf("Stats = %+v, want Held 0, Acquired 2", st)
	}
	wantInUse(t, in.db, 0)
}

// TestReleaseAfterKill: an operator KILLs the session holding the lock. The
// keep-alive's ownership check finds it lost: Done closes, Err and Release
// (every call) return ErrLockLost, the connection is discarded (not
// returned to the pool), Stats counts the loss and the observer sees it. The
// key is free for others afterwards.
func TestReleaseAfterKill(t *testing.T) {
	testdb.RequireReal(t)
	leakCheck(t)
	var mu sync.Mutex
	var events []namedlock.Event
	in := newInstance(t, "", namedlock.WithKeepAlive(100*time.Millisecond), namedlock.WithObserver(func(e namedlock.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}))
	other := newInstance(t, "")
	adm := admin(t)
	key := uniqueKey(t, "k")
	k := mustAcquire(t, in.locker, key)
	id := holderOf(t, adm, k.Name())
	if id == 0 {
		t.Fatal("not held at the server")
	}
	killSession(t, adm, id)
	select {
	case <-k.Done():
	// contract: a lost lock is reported within keep-alive + check timeout
	// (docs/guarantees.md); a KILL fails the next check at once.
	case <-time.After(3 * time.Second):
		t.Fatal("Done not closed within 3 s of KILL with a 100ms keep-alive")
	}
	if err := k.Err(); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Err() after KILL = %v, want ErrLockLost", err)
	}
	for i := range 2 {
		returnsWithin(t, 2*time.Second, "Release after KILL", func() {
			if err := k.Release(context.Background()); !errors.Is(err, namedlock.ErrLockLost) {
				t.Errorf("Release #%d after KILL = %v, want ErrLockLost", i+1, err)
			}
		})
	}
	if st := in.locker.Stats(); st.Lost != 1 || st.Held != 0 {
		t.Errorf("Stats = %+v, want Lost 1, Held 0", st)
	}
	wantInUse(t, in.db, 0)
	// The observer is called just after Done closes: wait for it.
	lostEvents := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range events {
			if e.Outcome == namedlock.Lost {
				n++
				if e.Key != key || !errors.Is(e.Err, namedlock.ErrLockLost) {
					t.Errorf("Lost event = %+v", e)
				}
			}
		}
		return n
	}
	eventually(t, 2*time.Second, "no Lost event", func() bool { return lostEvents() > 0 })
	time.Sleep(50 * time.Millisecond)
	if n := lostEvents(); n != 1 {
		t.Errorf("%d Lost events, want 1", n)
	}
	ctx := testCtx(t, 5*time.Second)
	if ran, err := other.locker.TryDo(ctx, key, func(context.Context) error { return nil }); !ran || err != nil {
		t.Errorf("TryDo by another instance after the loss: %v, %v", ran, err)
	}
	// And the same Locker can take it again.
	k2 := mustAcquire(t, in.locker, key)
	if err := k2.Release(ctx); err != nil {
		t.Errorf("Release of the re-acquired lock: %v", err)
	}
}

// TestDoLostLockCancelsFn: a lock lost while fn runs cancels fn's ctx with
// cause ErrLockLost, and Do returns ErrLockLost joined with fn's error.
func TestDoLostLockCancelsFn(t *testing.T) {
	testdb.RequireReal(t)
	leakCheck(t)
	const keepAlive = 100 * time.Millisecond
	in := newInstance(t, "", namedlock.WithKeepAlive(keepAlive))
	adm := admin(t)
	key := uniqueKey(t, "k")
	fnErr := errors.New("fn saw its ctx end")
	var cause error
	start := time.Now()
	err := in.locker.Do(testCtx(t, 20*time.Second), key, func(ctx context.Context) error {
		killSession(t, adm, holderOf(t, adm, keyfmt.Portable(key)))
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			return fnErr
		case <-time.After(5 * time.Second):
			return errors.New("fn's ctx not cancelled within 5 s of KILL")
		}
	})
	if !errors.Is(err, namedlock.ErrLockLost) || !errors.Is(err, fnErr) {
		t.Errorf("Do = %v, want ErrLockLost joined with fn's error", err)
	}
	if !errors.Is(cause, namedlock.ErrLockLost) {
		t.Errorf("context.Cause(fn's ctx) = %v, want ErrLockLost", cause)
	}
	// contract: a lost lock is reported within keep-alive + check timeout
	// (docs/guarantees.md).
	if el := time.Since(start); el > keepAlive+namedlock.DefaultCheckTimeout {
		t.Errorf("loss detected after %v", el)
	}
	wantInUse(t, in.db, 0)
}

// TestNewOptions: invalid options are refused with ErrInvalidOption, valid
// combinations are accepted.
func TestNewOptions(t *testing.T) {
	t.Parallel()
	db := openPool(t, testdb.Get(t).DSN)
	for _, tc := range []struct {
		name string
		opts []namedlock.Option
	}{
		{"keep-alive 0", []namedlock.Option{namedlock.WithKeepAlive(0)}},
		{"check timeout -1", []namedlock.Option{namedlock.WithCheckTimeout(-time.Second)}},
		{"handoff -1", []namedlock.Option{namedlock.WithHandoff(-1, 0)}},
		{"release timeout 0", []namedlock.Option{namedlock.WithReleaseTimeout(0)}},
		{"keep-alive + check >= lease", []namedlock.Option{namedlock.WithKeepAlive(20 * time.Second), namedlock.WithCheckTimeout(10 * time.Second)}},
	} {
		l, err := namedlock.New(db, tc.opts...)
		if !errors.Is(err, namedlock.ErrInvalidOption) || l != nil {
			t.Errorf("%s: New = %v, %v; want nil, ErrInvalidOption", tc.name, l, err)
		}
	}
	if l, err := namedlock.New(nil); !errors.Is(err, namedlock.ErrInvalidArgument) || l != nil {
		t.Errorf("New(nil) = %v, %v", l, err)
	}
	short := openPool(t, testdb.Get(t).DSN, pool.WithLease(5*time.Second))
	if _, err := namedlock.New(short, namedlock.WithKeepAlive(3*time.Second), namedlock.WithCheckTimeout(2*time.Second)); !errors.Is(err, namedlock.ErrInvalidOption) {
		t.Errorf("keep-alive + check = the pool's lease: New = %v, want ErrInvalidOption", err)
	}
	l, err := namedlock.New(short, namedlock.WithKeepAlive(time.Second),
		namedlock.WithCheckTimeout(time.Second), namedlock.WithHandoff(0, 0), namedlock.WithReleaseTimeout(time.Second))
	if err != nil {
		t.Fatalf("valid options: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
