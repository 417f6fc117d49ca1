package namedlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// TestPoolExhaustionDistinctKeys: ten goroutines on ten distinct keys, each
// holding its lock for a while, share a lock pool of two connections. They
// all complete (no deadlock), never more than two at once, and two do run at
// once (the pool is used, not serialised).
func TestPoolExhaustionDistinctKeys(t *testing.T) {
	leakCheck(t)
	in := newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(2)})
	base := uniqueKey(t, "")
	ctx := testCtx(t, 30*time.Second)
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 10 {
		wg.Go(func() {
			err := in.locker.Do(ctx, fmt.Sprintf("%s%d", base, i), func(context.Context) error {
				n := inside.Add(1)
				defer inside.Add(-1)
				for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
				}
				if open := in.db.Stats().OpenConnections; open > 2 {
					t.Errorf("%d open connections, WithMaxConns(2)", open)
				}
				time.Sleep(50 * time.Millisecond)
				return nil
			})
			if err != nil {
				t.Errorf("Do %d: %v", i, err)
			}
		})
	}
	returnsWithin(t, 20*time.Second, "10 Dos on a pool of 2", wg.Wait)
	took := time.Since(start)
	t.Logf("10 × 50ms holds on 2 connections took %v", took)
	if m := maxInside.Load(); m != 2 {
		t.Errorf("at most %d critical sections ran at once, want 2 (the pool size)", m)
	}
	st := in.locker.Stats()
	if st.Acquired != 10 || st.Held != 0 || st.Waiting != 0 {
		t.Errorf("Stats = %+v", st)
	}
	// Callers wait for a connection of the pool in the Lockers' count of
	// them (which DoMulti reserves from), before they ask database/sql.
	// contract: (the premise) at most 2 sections at once on a pool of 2
	// (WithMaxConns): 10 × 50 ms take at least 250 ms.
	if took < 250*time.Millisecond {
		t.Errorf("10 × 50ms holds on 2 connections took %v, less than 250ms: the test did not exhaust the pool", took)
	}
	wantInUse(t, in.db, 0)
}

// TestPoolExhaustionSameKey: more waiters than connections on one key. The
// local queue keeps them off the pool, so a pool of one serves them all.
func TestPoolExhaustionSameKey(t *testing.T) {
	leakCheck(t)
	in := newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(1)})
	key := uniqueKey(t, "k")
	ctx := testCtx(t, 30*time.Second)
	var count int
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			err := in.locker.Do(ctx, key, func(context.Context) error {
				count++
				time.Sleep(5 * time.Millisecond)
				return nil
			})
			if err != nil {
				t.Errorf("Do: %v", err)
			}
		})
	}
	returnsWithin(t, 20*time.Second, "10 Dos on one key and a pool of 1", wg.Wait)
	if count != 10 {
		t.Errorf("count = %d, want 10", count)
	}
	wantInUse(t, in.db, 0)
}

// TestPoolExhaustionRespectsCtx: with every pool connection pinned by a held
// lock, an acquisition of another key waits for a connection and gives up
// promptly when its ctx ends (deadline or cancel), with ErrNotAcquired and
// the ctx error — also from inside a critical section, where waiting forever
// would deadlock the holder against itself.
func TestPoolExhaustionRespectsCtx(t *testing.T) {
	leakCheck(t)
	in := newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(2)})
	base := uniqueKey(t, "")
	k1 := mustAcquire(t, in.locker, base+"1")
	k2 := mustAcquire(t, in.locker, base+"2")
	wantInUse(t, in.db, 2)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	k, err := in.locker.Acquire(ctx, base+"3")
	el := time.Since(start)
	if k != nil || !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire on an exhausted pool = %v, %v; want nil, ErrNotAcquired+DeadlineExceeded", k, err)
	}
	// contract: the wait for a connection lasts until its ctx ends...
	if el < 150*time.Millisecond {
		t.Errorf("returned after %v, before its 200ms deadline", el)
	}
	// contract: ...and ends then (Acquire); 1 s, 5× the deadline, only
	// catches a wait that runs on.
	if el > time.Second {
		t.Errorf("returned after %v, want about 200ms", el)
	}
	if open := in.db.Stats().OpenConnections; open > 2 {
		t.Errorf("%d connections open, WithMaxConns(2)", open)
	}

	cctx, ccancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, ccancel)
	start = time.Now()
	_, err = in.locker.TryAcquire(cctx, base+"4")
	if !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("TryAcquire on an exhausted pool, cancelled = %v; want ErrNotAcquired+Canceled", err)
	}
	// contract: a cancel ends the wait for a connection at once (Acquire);
	// 600 ms, 6× the cancel's 100 ms, only catches one that runs on.
	if el := time.Since(start); el > 600*time.Millisecond {
		t.Errorf("returned %v after start, cancel came at 100ms", el)
	}

	// Nested, inside a held lock's critical section.
	if err := k2.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	err = in.locker.Do(testCtx(t, 10*time.Second), base+"2", func(ctx context.Context) error {
		nctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		return in.locker.Do(nctx, base+"5", func(context.Context) error { return nil })
	})
	if !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("nested Do on an exhausted pool = %v; want ErrNotAcquired+DeadlineExceeded", err)
	}
	if err := k1.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantInUse(t, in.db, 0)
	// Connections are available again.
	if ran, err := in.locker.TryDo(testCtx(t, 5*time.Second), base+"3", func(context.Context) error { return nil }); !ran || err != nil {
		t.Errorf("TryDo after the pool freed up: %v, %v", ran, err)
	}
}
