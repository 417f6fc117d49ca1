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

// TestReviewCloseRacesReleasePath: four callers run Do in a loop on one
// key (handoffs, lingers, proofs, server releases), and Close comes at a
// fake moment that varies by subtest. Whatever Close meets on the release
// path, nobody is told a loss that did not happen (the fake server never
// kills), at most one caller is inside at a time, every Do returns nil or
// ErrClosed (or ErrNotAcquired of a waiter ended by Close), and when Close
// returns the server holds nothing, no statement is in flight, and Stats
// counts nothing held or queued.
func TestReviewCloseRacesReleasePath(t *testing.T) {
	for _, at := range []time.Duration{50 * time.Microsecond, 150 * time.Microsecond, 250 * time.Microsecond, 350 * time.Microsecond, 450 * time.Microsecond, 1234 * time.Microsecond, 5 * time.Millisecond} {
		t.Run(at.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, f := fakeLocker(t)
				ctx := context.Background()
				var inside atomic.Int32
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						for range 1000 {
							err := l.Do(ctx, "k", func(context.Context) error {
								if n := inside.Add(1); n != 1 {
									t.Errorf("%d callers inside at once", n)
								}
								time.Sleep(30 * time.Microsecond)
								inside.Add(-1)
								return nil
							})
							if err == nil {
								continue
							}
							if errors.Is(err, ErrLockLost) {
								t.Errorf("Do = %v: a loss, but the fake server killed nothing", err)
							}
							if !errors.Is(err, ErrClosed) {
								t.Errorf("Do = %v, want nil or ErrClosed", err)
							}
							return
						}
					})
				}
				time.Sleep(at)
				if err := l.Close(); err != nil {
					t.Errorf("Close = %v", err)
				}
				if held, pending := f.busy("k"); held || pending != 0 {
					t.Errorf("when Close returned: lock held %v, %d statements in flight", held, pending)
				}
				wg.Wait()
				if st := l.Stats(); st.Held != 0 || st.Queued != 0 || st.Waiting != 0 || st.Lost != 0 {
					t.Errorf("Stats after Close = %+v, want nothing held, queued, waiting or lost", st)
				}
			})
		})
	}
}
