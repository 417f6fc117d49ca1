package namedlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestOrderingEventSession: on the fake server, whose sessions are numbered
// by take, every event of a hold names the session of the server
// acquisition that began it (Event.Session). With at most one handoff in a
// row, three holders of one key in turn get sessions 1, 1 (the handoff) and
// 2 (from the server again): their Acquired and Released events say so. A
// fourth holder, on session 3, whose session is killed, gets a Lost event
// naming it.
func TestOrderingEventSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []Event
		l, f := fakeLocker(t, WithHandoff(1, time.Hour), WithObserver(func(e Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}))
		// sessions returns the Sessions of the events logged with outcome
		// o, in order, and whether each was a handoff.
		sessions := func(o Outcome) (ids []int64, handoffs []bool) {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range events {
				if e.Outcome == o {
					ids, handoffs = append(ids, e.Session), append(handoffs, e.Handoff)
				}
			}
			return ids, handoffs
		}
		ctx := context.Background()
		first, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if err := l.Do(ctx, "k", func(context.Context) error { return nil }); err != nil {
					t.Error(err)
				}
			})
			synctest.Wait() // queued in this order
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		ids, handoffs := sessions(Acquired)
		if !slices.Equal(ids, []int64{1, 1, 2}) || !slices.Equal(handoffs, []bool{false, true, false}) {
			t.Errorf("Acquired events: Sessions %v, Handoffs %v; want [1 1 2], [false true false]", ids, handoffs)
		}
		if ids, _ := sessions(Released); !slices.Equal(ids, []int64{1, 1, 2}) {
			t.Errorf("Released events: Sessions %v, want [1 1 2]", ids)
		}

		k, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		f.kill("k")
		<-k.Done()
		if err := k.Release(ctx); !errors.Is(err, ErrLockLost) {
			t.Errorf("Release = %v, want ErrLockLost", err)
		}
		synctest.Wait() // the observer is told just after the holder
		if ids, _ := sessions(Lost); !slices.Equal(ids, []int64{3}) {
			t.Errorf("Lost events: Sessions %v, want [3]", ids)
		}
		if ids, _ := sessions(Acquired); len(ids) != 4 || ids[3] != 3 {
			t.Errorf("Acquired events: Sessions %v, want the fourth on session 3", ids)
		}
	})
}
