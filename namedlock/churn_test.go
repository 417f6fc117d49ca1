package namedlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// TestChurn: goroutines of one Locker acquire one key with short random
// deadlines and cancels, while another instance takes and releases it, so
// that waits end in every state (queued locally, promoted, at the server,
// handed off). Afterwards every gauge is back to zero, no connection is in
// use, nobody waits at the server, the key is free, and the critical
// sections never overlapped.
func TestChurn(t *testing.T) {
	leakCheck(t)
	a := newInstance(t, "", namedlock.WithHandoff(4, 5*time.Millisecond))
	b := newInstance(t, "")
	adm := admin(t)
	key := uniqueKey(t, "k")
	ctx := testCtx(t, time.Minute)

	stop := make(chan struct{})
	var inside atomic.Int32
	enter := func() {
		if n := inside.Add(1); n != 1 {
			t.Errorf("%d holders at once", n)
		}
	}
	var bg sync.WaitGroup
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			k, err := b.locker.Acquire(ctx, key)
			if err != nil {
				t.Errorf("b: %v", err)
				return
			}
			enter()
			time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond)
			inside.Add(-1)
			if err := k.Release(ctx); err != nil {
				t.Errorf("b: Release: %v", err)
			}
			time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond)
		}
	})

	var acquired, failed atomic.Int64
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for i := range 15 {
				wait := time.Duration(5+rand.IntN(40)) * time.Millisecond
				if i == 0 {
					// Each goroutine's first wait is long enough to end in a
					// grant on any server (TiDB's waits go in 1 s slices), so
					// the check below that both outcomes happened is about
					// the churn, not the machine's speed.
					wait = 20 * time.Second
				}
				wctx, cancel := context.WithTimeout(ctx, wait)
				if i > 0 && rand.IntN(3) == 0 {
					time.AfterFunc(time.Duration(rand.IntN(20))*time.Millisecond, cancel)
				}
				k, err := a.locker.Acquire(wctx, key)
				cancel()
				if err != nil {
					if !errors.Is(err, namedlock.ErrNotAcquired) {
						t.Errorf("Acquire: %v", err)
					}
					failed.Add(1)
					continue
				}
				acquired.Add(1)
				enter()
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
				inside.Add(-1)
				if err := k.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	returnsWithin(t, 50*time.Second, "churn", wg.Wait)
	close(stop)
	bg.Wait()
	t.Logf("acquired %d, failed %d; stats %+v", acquired.Load(), failed.Load(), a.locker.Stats())

	st := a.locker.Stats()
	if st.Held != 0 || st.Waiting != 0 || st.Queued != 0 {
		t.Errorf("gauges after churn: %+v", st)
	}
	if st.Acquired != acquired.Load() || st.NotAcquired != failed.Load() {
		t.Errorf("counters %+v, want Acquired %d, NotAcquired %d", st, acquired.Load(), failed.Load())
	}
	if acquired.Load() == 0 || failed.Load() == 0 {
		t.Errorf("acquired %d, failed %d: the churn did not exercise both outcomes", acquired.Load(), failed.Load())
	}
	wantInUse(t, a.db, 0)
	wantInUse(t, b.db, 0)
	eventually(t, 2*time.Second, "a cancelled wait is still at the server", func() bool {
		return !waitingAtServer(t, adm, keyfmt.Portable(key))
	})
	if id := holderOf(t, adm, keyfmt.Portable(key)); id != 0 {
		t.Errorf("key held by session %d after churn", id)
	}
	if ran, err := a.locker.TryDo(ctx, key, func(context.Context) error { return nil }); !ran || err != nil {
		t.Errorf("TryDo after churn: %v, %v", ran, err)
	}
}
