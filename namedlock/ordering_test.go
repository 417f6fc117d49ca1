package namedlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The ordering logic (local queue, handoff and its bounds, linger, the
// proof after a handoff, keep-alive scheduling, Close) on a fake server,
// inside testing/synctest bubbles: time is fake and advances only when
// every goroutine of the bubble is blocked, so these tests are deterministic
// and never sleep for real. The same logic runs against real servers in
// the other tests.

const fakeRTT = 100 * time.Microsecond

// fakeLocker returns a Locker on a fake server, closed at the end of the
// bubble.
func fakeLocker(t *testing.T, opts ...Option) (*Locker, *fakeServer) {
	t.Helper()
	cfg, err := newConfig(opts, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeServer(fakeRTT)
	l := newLocker(f, cfg)
	t.Cleanup(func() { _ = l.Close() })
	return l, f
}

// TestOrderingQueueAndHandoffBounds: ten callers queue for one key while the
// first holds it. With at most 3 handoffs in a row, the lock goes back to
// the server after every fourth holder, so the server grants it 3 times and
// 7 holders get it by handoff, in arrival order, one at a time.
func TestOrderingQueueAndHandoffBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, f := fakeLocker(t, WithHandoff(3, time.Hour))
		ctx := context.Background()
		first, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []int
		var inside atomic.Int32
		var wg sync.WaitGroup
		for i := 1; i <= 9; i++ {
			wg.Go(func() {
				err := l.Do(ctx, "k", func(context.Context) error {
					if n := inside.Add(1); n != 1 {
						t.Errorf("%d callers inside at once", n)
					}
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					return nil
				})
				if err != nil {
					t.Errorf("caller %d: %v", i, err)
				}
			})
			synctest.Wait() // caller i is queued before caller i+1 arrives
		}
		if st := l.Stats(); st.Queued != 9 {
			t.Fatalf("Queued = %d, want 9", st.Queued)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for i, got := range order {
			if got != i+1 {
				t.Fatalf("order = %v, want arrival order", order)
			}
		}
		takes, _, _ := f.count()
		st := l.Stats()
		if takes != 3 || st.ServerAcquisitions != 3 || st.Handoffs != 7 || st.Held != 0 || st.Queued != 0 {
			t.Errorf("server takes %d, stats %+v; want 3 server acquisitions and 7 handoffs", takes, st)
		}
	})
}

// TestOrderingHandoffTimeBound: the handoff time bound sends the lock back
// to the server once it has been held that long, whatever the count.
func TestOrderingHandoffTimeBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, f := fakeLocker(t, WithHandoff(1000, 10*time.Millisecond))
		ctx := context.Background()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 10 {
					if err := l.Do(ctx, "k", func(context.Context) error {
						time.Sleep(time.Millisecond)
						return nil
					}); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		takes, _, _ := f.count()
		// 80 sections of 1 ms (plus round trips): at most about 10 ms per
		// server grant, so at least 7 grants; handoffs keep most of them local.
		if takes < 7 || takes > 20 {
			t.Errorf("server grants = %d for 80 sections of 1 ms with a 10 ms bound, want 7-20", takes)
		}
		t.Logf("80 sections: %d server grants, stats %+v", takes, l.Stats())
	})
}

// TestOrderingHandoffProofFindsLoss: the session is killed while A holds
// the lock and B waits; A's release hands the lock to B without a round
// trip, then A's proof finds the session gone: A's Release reports
// ErrLockLost, and B, who got a lost lock, is told at once (Done closed,
// Err ErrLockLost), long before any keep-alive check.
func TestOrderingHandoffProofFindsLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, f := fakeLocker(t)
		ctx := context.Background()
		a, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *Lock, 1)
		go func() {
			b, err := l.Acquire(ctx, "k")
			if err != nil {
				t.Error(err)
			}
			got <- b
		}()
		synctest.Wait()
		f.kill("k")
		start := time.Now()
		if err := a.Release(ctx); !errors.Is(err, ErrLockLost) {
			t.Fatalf("A's Release = %v, want ErrLockLost", err)
		}
		b := <-got
		select {
		case <-b.Done():
		default:
			t.Fatal("B's Done is open after the proof found the session gone")
		}
		if !errors.Is(b.Err(), ErrLockLost) {
			t.Errorf("B's Err = %v, want ErrLockLost", b.Err())
		}
		if took := time.Since(start); took > 10*fakeRTT {
			t.Errorf("the loss was found %v after A's release, want one round trip", took)
		}
		if err := b.Release(ctx); !errors.Is(err, ErrLockLost) {
			t.Errorf("B's Release = %v, want ErrLockLost", err)
		}
		if st := l.Stats(); st.Lost != 2 || st.Held != 0 {
			t.Errorf("stats %+v, want Lost 2 (A and B), Held 0", st)
		}
	})
}

// TestOrderingProofShared: holders that let go one after another share
// ownership checks: sixteen callers taking turns by handoff cost far fewer
// checks than handoffs.
func TestOrderingProofShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, f := fakeLocker(t)
		ctx := context.Background()
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 20 {
					if err := l.Do(ctx, "k", func(context.Context) error { return nil }); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		_, checks, _ := f.count()
		st := l.Stats()
		if st.Handoffs == 0 || int64(checks) >= st.Handoffs {
			t.Errorf("%d handoffs needed %d checks; want fewer checks than handoffs", st.Handoffs, checks)
		}
		t.Logf("320 sections: %d handoffs, %d server grants, %d checks", st.Handoffs, st.ServerAcquisitions, checks)
	})
}

// TestOrderingKeepAliveDetectsKill: a killed session is found by the next
// keep-alive check: Done closes within the keep-alive interval plus one
// scan tick (and the round trip), measured on the fake clock.
func TestOrderingKeepAliveDetectsKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keepAlive = time.Second
		l, f := fakeLocker(t, WithKeepAlive(keepAlive))
		k, err := l.Acquire(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		f.kill("k")
		killed := time.Now()
		<-k.Done()
		took := time.Since(killed)
		if !errors.Is(k.Err(), ErrLockLost) {
			t.Errorf("Err = %v, want ErrLockLost", k.Err())
		}
		if bound := keepAlive + tickFor(keepAlive) + 2*fakeRTT; took > bound {
			t.Errorf("loss seen %v after the kill, want within %v", took, bound)
		}
		t.Logf("loss seen %v after the kill (keep-alive %v)", took, keepAlive)
		if err := k.Release(context.Background()); !errors.Is(err, ErrLockLost) {
			t.Errorf("Release = %v, want ErrLockLost", err)
		}
	})
}

// TestOrderingKeepAliveStopsWhenIdle: the keep-alive goroutine runs while a
// lock is held and stops at the first tick that finds nothing held.
func TestOrderingKeepAliveStopsWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, f := fakeLocker(t, WithKeepAlive(time.Second))
		ctx := context.Background()
		k, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3500 * time.Millisecond)
		_, checks, _ := f.count()
		if checks != 3 {
			t.Errorf("%d checks in 3.5 s held with a 1 s keep-alive, want 3", checks)
		}
		if err := k.Release(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		l.keeper.mu.Lock()
		on := l.keeper.running
		l.keeper.mu.Unlock()
		if on {
			t.Error("the keep-alive still runs with nothing held")
		}
		_, after, _ := f.count()
		if after != checks {
			t.Errorf("%d checks after the release, want none", after-checks)
		}
	})
}

// TestOrderingLingerTakeOver: a holder releases with nobody queued while
// earlier holders are still being proven: the lock lingers, and a caller
// arriving meanwhile takes it over without a server round trip.
func TestOrderingLingerTakeOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, f := fakeLocker(t)
		ctx := context.Background()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 50 {
					if err := l.Do(ctx, "k", func(context.Context) error { return nil }); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		takes, _, _ := f.count()
		st := l.Stats()
		if st.Acquired != 200 || st.Handoffs+st.ServerAcquisitions != 200 || int64(takes) != st.ServerAcquisitions {
			t.Errorf("stats %+v, server takes %d", st, takes)
		}
		if takes > 20 {
			t.Errorf("%d server grants for 200 sections of 4 callers, want the lock to stay local (handoffs and lingers)", takes)
		}
		t.Logf("200 sections by 4 callers: %d server grants, %d handoffs", takes, st.Handoffs)
	})
}

// TestOrderingCloseEndsEverything: Close tells the holder (ErrClosed),
// fails the queued callers with ErrClosed, releases the server lock and
// stops every goroutine of the Locker (the bubble ends only if they did).
func TestOrderingCloseEndsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, f := fakeLocker(t)
		ctx := context.Background()
		k, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 3)
		for range 3 {
			go func() {
				_, err := l.Acquire(ctx, "k")
				errs <- err
			}()
		}
		synctest.Wait()
		if err := l.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
		for range 3 {
			if err := <-errs; !errors.Is(err, ErrClosed) {
				t.Errorf("queued caller got %v, want ErrClosed", err)
			}
		}
		<-k.Done()
		if !errors.Is(k.Err(), ErrClosed) {
			t.Errorf("holder's Err = %v, want ErrClosed", k.Err())
		}
		if err := k.Release(ctx); !errors.Is(err, ErrClosed) {
			t.Errorf("Release after Close = %v, want ErrClosed", err)
		}
		f.mu.Lock()
		held := len(f.holders)
		f.mu.Unlock()
		if held != 0 {
			t.Errorf("%d server locks still held after Close", held)
		}
		if err := l.Close(); !errors.Is(err, ErrClosed) {
			t.Errorf("second Close = %v, want ErrClosed", err)
		}
	})
}

// TestOrderingCancelledWaiter: a queued caller whose ctx ends leaves the
// queue, and the others still get the lock in order.
func TestOrderingCancelledWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := fakeLocker(t)
		ctx := context.Background()
		k, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancelled := make(chan error, 1)
		go func() {
			_, err := l.Acquire(cctx, "k")
			cancelled <- err
		}()
		synctest.Wait()
		next := make(chan *Lock, 1)
		go func() {
			k2, err := l.Acquire(ctx, "k")
			if err != nil {
				t.Error(err)
			}
			next <- k2
		}()
		synctest.Wait()
		cancel()
		if err := <-cancelled; !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled waiter got %v, want ErrNotAcquired and context.Canceled", err)
		}
		if st := l.Stats(); st.Queued != 1 {
			t.Errorf("Queued = %d after the cancel, want 1", st.Queued)
		}
		if err := k.Release(ctx); err != nil {
			t.Fatal(err)
		}
		k2 := <-next
		if err := k2.Release(ctx); err != nil {
			t.Error(err)
		}
		if st := l.Stats(); st.Handoffs != 1 || st.NotAcquired != 1 {
			t.Errorf("stats %+v, want 1 handoff, 1 not acquired", st)
		}
	})
}

// TestOrderingExpiryReportedLost: on a server that lets a lock live only so
// long (TiDB's max-txn-ttl; here the fake's hold limit of 5 s), a lock held
// past its expiry is reported lost at the expiry — Done closes, Err and
// Release match ErrLockLost, Do's fn sees its ctx cancelled with the loss —
// although every ownership check still answers that it is held; its session
// is then discarded (the server frees it), and no handoff reaches past it.
func TestOrderingExpiryReportedLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, f := fakeLocker(t)
		f.holdLimit = 5 * time.Second
		ctx := context.Background()
		start := time.Now()
		k, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-k.Done():
			t.Fatalf("lost after %v, before its expiry", time.Since(start))
		case <-time.After(4900 * time.Millisecond):
		}
		select {
		case <-k.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("not reported lost 10 s after the acquisition, with an expiry at 5 s")
		}
		took := time.Since(start)
		if took > 5*time.Second+tickFor(DefaultKeepAlive)+time.Second {
			t.Errorf("reported lost %v after the acquisition, want within a keep-alive tick of 5 s", took)
		}
		if !errors.Is(k.Err(), ErrLockLost) || !errors.Is(k.Release(ctx), ErrLockLost) {
			t.Errorf("Err = %v, want ErrLockLost", k.Err())
		}
		synctest.Wait()
		f.mu.Lock()
		held := f.holders["k"] != nil
		f.mu.Unlock()
		if held {
			t.Error("the expired session still holds the lock at the fake server: its link was not discarded")
		}
		if got := l.Stats().Lost; got != 1 {
			t.Errorf("Stats.Lost = %d, want 1", got)
		}

		// Do: fn's ctx ends with the loss; Do reports it.
		start = time.Now()
		err = l.Do(ctx, "k", func(ctx context.Context) error {
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), ErrLockLost) {
				t.Errorf("fn's ctx cause = %v, want ErrLockLost", context.Cause(ctx))
			}
			return nil
		})
		if !errors.Is(err, ErrLockLost) {
			t.Errorf("Do = %v, want ErrLockLost", err)
		}
		if took := time.Since(start); took < 5*time.Second-time.Millisecond || took > 7*time.Second {
			t.Errorf("Do's fn was cancelled after %v, want about 5 s", took)
		}
	})
}

// TestOrderingCloseWaitsForServerStatements: Close returns only once no
// server lock of the Locker is held or pending: a first GET_LOCK in flight
// when Close starts (granted after Close began: released), and a
// RELEASE_LOCK in flight (its own, bounded by the release timeout), have
// both ended by then. Fails on a Close that returns while they run.
func TestOrderingCloseWaitsForServerStatements(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, l *Locker, done chan struct{})
	}{
		{"GET_LOCK in flight", func(t *testing.T, l *Locker, done chan struct{}) {
			go func() {
				defer close(done)
				k, err := l.Acquire(context.Background(), "k")
				if err == nil {
					t.Error("Acquire begun before Close returned a lock")
					_ = k.Release(context.Background())
				} else if !errors.Is(err, ErrClosed) {
					t.Errorf("Acquire begun before Close = %v, want ErrClosed", err)
				}
			}()
		}},
		{"RELEASE_LOCK in flight", func(t *testing.T, l *Locker, done chan struct{}) {
			k, err := l.Acquire(context.Background(), "k")
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				defer close(done)
				if err := k.Release(context.Background()); err != nil {
					t.Errorf("Release begun before Close = %v", err)
				}
			}()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, f := fakeLocker(t)
				done := make(chan struct{})
				tc.start(t, l, done)
				synctest.Wait() // the statement is on its way (a round trip of fake time)
				if _, pending := f.busy("k"); pending != 1 {
					t.Fatalf("%d statements in flight at the server, want 1", pending)
				}
				if err := l.Close(); err != nil {
					t.Errorf("Close = %v", err)
				}
				if held, pending := f.busy("k"); held || pending != 0 {
					t.Errorf("when Close returned: lock held %v, %d statements in flight at the server", held, pending)
				}
				<-done
			})
		})
	}
}
