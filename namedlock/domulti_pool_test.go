package namedlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// callerKey marks the ctx of one DoMulti caller, for the observer.
type callerKey struct{}

// TestDoMultiSmallPoolNoDeadlock: two callers of DoMulti on disjoint
// two-key sets share a lock pool of two connections. Each is held, by the
// observer, right after its first lock until the other has one too or 2 s
// have passed: were each to pin a connection for its first key and then
// wait for a second, both would wait for the other's until their deadline.
// Both complete, and so do six callers on disjoint sets, in a loop, with no
// such pause.
func TestDoMultiSmallPoolNoDeadlock(t *testing.T) {
	leakCheck(t)
	var arrived, pausing atomic.Int32
	var overlapped atomic.Bool
	both := make(chan struct{})
	var seen sync.Map // caller -> first lock taken
	observer := func(e namedlock.Event) {
		if e.Outcome != namedlock.Acquired || e.Context == nil {
			return
		}
		caller := e.Context.Value(callerKey{})
		if caller == nil {
			return
		}
		if _, again := seen.LoadOrStore(caller, true); again {
			return
		}
		if pausing.Add(1) == 2 {
			overlapped.Store(true)
		}
		defer pausing.Add(-1)
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(2 * time.Second):
		}
	}
	in := newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(2)}, namedlock.WithObserver(observer))
	base := uniqueKey(t, "")
	ctx := testCtx(t, 60*time.Second)

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, name := range []string{"a", "b"} {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(context.WithValue(ctx, callerKey{}, name), 20*time.Second)
			defer cancel()
			errs[i] = in.locker.DoMulti(cctx, []string{base + name + "1", base + name + "2"}, func(context.Context) error {
				time.Sleep(20 * time.Millisecond)
				return nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("DoMulti of caller %d on a pool of 2: %v", i, err)
		}
	}
	if overlapped.Load() {
		t.Error("both callers held a lock at once, with a connection each, while the other needed a second one")
	}

	// Six callers on disjoint pairs, four rounds each.
	var done atomic.Int32
	for i := range 6 {
		wg.Go(func() {
			for r := range 4 {
				keys := []string{fmt.Sprintf("%sp%d-%d-x", base, i, r), fmt.Sprintf("%sp%d-%d-y", base, i, r)}
				err := in.locker.DoMulti(ctx, keys, func(context.Context) error {
					if open := in.db.Stats().OpenConnections; open > 2 {
						t.Errorf("%d open connections, WithMaxConns(2)", open)
					}
					time.Sleep(5 * time.Millisecond)
					return nil
				})
				if err != nil {
					t.Errorf("DoMulti %d round %d: %v", i, r, err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if n := done.Load(); n != 24 {
		t.Errorf("%d of 24 DoMulti completed", n)
	}
	if st := in.locker.Stats(); st.Held != 0 || st.Waiting != 0 {
		t.Errorf("Stats = %+v, want nothing held or waiting", st)
	}
	wantInUse(t, in.db, 0)
}

// TestDoMultiMoreKeysThanPool: a DoMulti with more keys than the lock pool
// has connections could never hold them all; it is refused at once, with
// ErrInvalidArgument, before anything is locked. As many keys as
// connections is fine.
func TestDoMultiMoreKeysThanPool(t *testing.T) {
	leakCheck(t)
	in := newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(2)})
	base := uniqueKey(t, "")
	ctx := testCtx(t, 20*time.Second)
	ran := false
	start := time.Now()
	err := in.locker.DoMulti(ctx, []string{base + "1", base + "2", base + "3"}, func(context.Context) error {
		ran = true
		return nil
	})
	if !errors.Is(err, namedlock.ErrInvalidArgument) || ran {
		t.Errorf("DoMulti of 3 keys on a pool of 2 = %v (fn ran: %v); want ErrInvalidArgument, fn not run", err, ran)
	}
	// contract: refused at once (DoMulti), not after a wait for
	// connections that cannot come; 5 s is the generous bound.
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("returned after %v, want at once", el)
	}
	t.Logf("3 keys, pool of 2: %v", err)
	if st := in.locker.Stats(); st.Held != 0 || st.Acquired != 0 {
		t.Errorf("Stats = %+v, want nothing acquired", st)
	}
	if err := in.locker.DoMulti(ctx, []string{base + "1", base + "2", base + "1"}, func(context.Context) error { return nil }); err != nil {
		t.Errorf("DoMulti of 2 distinct keys on a pool of 2: %v", err)
	}
}

// TestDoMultiReservationWaitsBehindHolders: while single locks pin every
// connection of the pool, a DoMulti waits for its reservation (not holding
// any lock) and ends with its ctx; once they are released it runs.
// Close ends a DoMulti waiting for its reservation with ErrClosed.
func TestDoMultiReservationWaitsBehindHolders(t *testing.T) {
	leakCheck(t)
	in := newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(2)})
	base := uniqueKey(t, "")
	k1 := mustAcquire(t, in.locker, base+"h1")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := in.locker.DoMulti(ctx, []string{base + "m1", base + "m2"}, func(context.Context) error { return nil })
	if !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DoMulti with one of two connections held = %v; want ErrNotAcquired+DeadlineExceeded", err)
	}
	if id := holderOf(t, admin(t), keyfmt.Portable(base+"m1")); id != 0 {
		t.Errorf("m1 held by session %d after the DoMulti gave up", id)
	}
	if err := k1.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := in.locker.DoMulti(testCtx(t, 10*time.Second), []string{base + "m1", base + "m2"}, func(context.Context) error { return nil }); err != nil {
		t.Errorf("DoMulti once the pool is free: %v", err)
	}

	mustAcquire(t, in.locker, base+"h2")
	res := make(chan error, 1)
	go func() {
		res <- in.locker.DoMulti(context.Background(), []string{base + "m1", base + "m2"}, func(context.Context) error { return nil })
	}()
	eventually(t, 10*time.Second, "the DoMulti to wait", func() bool { return in.locker.Stats().Waiting == 1 })
	_ = in.locker.Close()
	select {
	case err := <-res:
		if !errors.Is(err, namedlock.ErrClosed) {
			t.Errorf("DoMulti waiting for its reservation, after Close = %v; want ErrClosed", err)
		}
	// contract: Close ends a DoMulti waiting for its reservation with
	// ErrClosed; 10 s only ends a wait for one that hangs.
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the DoMulti waiting for its reservation")
	}
}

// TestDoMultiBehindSingleOnFullPool: a DoMulti holds the reservation of
// both connections of the pool and its first lock when a single Do on its
// second key arrives and finds no connection free. That Do waits for one
// without taking the key's place in line, so the DoMulti takes its second
// key on the connection it reserved and ends; then the Do runs. (Were the
// Do first in the key's local queue while it waited for a connection, the
// DoMulti would wait behind it for a connection only its own end frees.)
func TestDoMultiBehindSingleOnFullPool(t *testing.T) {
	leakCheck(t)
	base := uniqueKey(t, "")
	ctx := testCtx(t, 60*time.Second)
	var in *instance
	single := make(chan error, 1)
	var once sync.Once
	observer := func(e namedlock.Event) {
		if e.Outcome != namedlock.Acquired || e.Key != base+"1" || e.Context == nil || e.Context.Value(callerKey{}) == nil {
			return
		}
		once.Do(func() {
			go func() {
				single <- in.locker.Do(ctx, base+"2", func(context.Context) error { return nil })
			}()
			deadline := time.Now().Add(5 * time.Second)
			for in.locker.Stats().Waiting != 1 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		})
	}
	in = newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(2)}, namedlock.WithObserver(observer))
	mctx, cancel := context.WithTimeout(context.WithValue(ctx, callerKey{}, "multi"), 15*time.Second)
	defer cancel()
	err := in.locker.DoMulti(mctx, []string{base + "1", base + "2"}, func(context.Context) error { return nil })
	if err != nil {
		t.Errorf("DoMulti with a single Do waiting for a connection on its second key: %v", err)
	}
	select {
	case err := <-single:
		if err != nil {
			t.Errorf("the single Do: %v", err)
		}
	// contract: the single Do waiting for a connection ends once the
	// DoMulti is done; 20 s only ends a wait for one that hangs.
	case <-time.After(20 * time.Second):
		t.Fatal("the single Do did not end within 20 s")
	}
	if st := in.locker.Stats(); st.Held != 0 || st.Acquired != 3 {
		t.Errorf("Stats = %+v, want 3 acquired, none held", st)
	}
	wantInUse(t, in.db, 0)
}
