package namedlock

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestReviewStaleEarlyWaiter: A, a DoTx at SERIALIZABLE, hands its lock
// early to B, the next such DoTx, whose ctx ends at the very moment A lets
// go (so B either leaves the queue before the handoff, or finds the handed
// lock in its channel too late and gives it back). C, an Acquire queued
// behind B, must get the lock only once A's COMMIT has returned, and B
// must not return before that COMMIT either if it was handed the lock.
// Run many times: the select in B's wait picks either way.
func TestReviewStaleEarlyWaiter(t *testing.T) {
	for range 40 {
		synctest.Test(t, func(t *testing.T) {
			l, f := fakeLocker(t, WithHandoff(DefaultMaxHandoffs, time.Minute))
			db := new(sql.DB)
			gate := make(chan struct{})
			aEnded := new(atomic.Bool)
			serial := func(ctx context.Context, gate chan struct{}, ended *atomic.Bool, fn func() error) error {
				if ended == nil {
					ended = new(atomic.Bool)
				}
				begin := func(context.Context) (*chainTx, error) { return &chainTx{gate: gate, ended: ended}, nil }
				return serialTx(l, ctx, "k", db, begin, func(context.Context, *chainTx) error { return fn() })
			}
			var wg sync.WaitGroup
			ctx := context.Background()
			aIn, aGo := make(chan struct{}), make(chan struct{})
			wg.Go(func() {
				if err := serial(ctx, gate, aEnded, func() error { close(aIn); <-aGo; return nil }); err != nil {
					t.Errorf("A: %v", err)
				}
			})
			<-aIn
			bctx, bcancel := context.WithCancel(ctx)
			bDone := make(chan struct{})
			var bRan atomic.Bool
			wg.Go(func() {
				defer close(bDone)
				_ = serial(bctx, nil, nil, func() error { bRan.Store(true); return nil })
			})
			synctest.Wait()
			var cSaw atomic.Bool
			cDone := make(chan error, 1)
			wg.Go(func() {
				k, err := l.Acquire(ctx, "k")
				if err != nil {
					cDone <- err
					return
				}
				cSaw.Store(aEnded.Load())
				cDone <- k.Release(ctx)
			})
			synctest.Wait()
			bcancel()
			close(aGo)
			time.Sleep(10 * time.Second) // fake time
			select {
			case err := <-cDone:
				t.Errorf("C got the lock and let go (%v) while A's COMMIT had not returned", err)
			default:
			}
			if held, _ := f.busy(keyName); !held {
				t.Error("the server lock was let go while A's COMMIT had not returned")
			}
			bReturned := false
			select {
			case <-bDone:
				bReturned = true
			default:
			}
			close(gate)
			wg.Wait()
			if !cSaw.Load() {
				t.Error("C got the lock before A's COMMIT returned")
			}
			if bReturned && bRan.Load() {
				t.Error("B ran fn and returned while A's COMMIT had not returned")
			}
		})
	}
}
