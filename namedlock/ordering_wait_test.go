package namedlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The timing of local waits (a caller queued behind a holder of its own
// Locker) on the fake server, in fake time: exact where the real-server
// tests could only bound them on the wall clock.

// TestOrderingReentrantWaitsForCtx: a goroutine that holds a key and
// acquires it again waits for itself in the local queue until its ctx
// ends, exactly then, with ErrNotAcquired and context.DeadlineExceeded;
// the queue is left clean (TestNotReentrant runs the same against real
// servers).
func TestOrderingReentrantWaitsForCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := fakeLocker(t)
		k, err := l.Acquire(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		const wait = 200 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		start := time.Now()
		if _, err := l.Acquire(ctx, "k"); !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("re-entrant Acquire = %v, want ErrNotAcquired+DeadlineExceeded", err)
		}
		if took := time.Since(start); took != wait {
			t.Errorf("re-entrant Acquire returned after %v, want at its ctx's deadline, %v", took, wait)
		}
		if st := l.Stats(); st.Queued != 0 || st.Waiting != 0 || st.Held != 1 {
			t.Errorf("Stats = %+v, want nothing queued or waiting, 1 held", st)
		}
		if err := k.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestOrderingWaitDurationCounted: Stats.WaitDuration counts the time a
// caller waited in the local queue, from its call to the handoff, and
// nothing for a grant without a wait beyond the server's round trip; the
// observer's events say the same: the handoff's Acquired event has that
// Wait, the first holder's Released event the Held of its hold.
func TestOrderingWaitDurationCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []Event
		l, _ := fakeLocker(t, WithHandoff(DefaultMaxHandoffs, time.Minute), WithObserver(func(e Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}))
		ctx := context.Background()
		k, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		first := l.Stats().WaitDuration
		if first > fakeRTT {
			t.Errorf("WaitDuration = %v after a grant without a wait, want at most the round trip %v", first, fakeRTT)
		}
		got := make(chan *Lock, 1)
		go func() {
			k2, err := l.Acquire(ctx, "k")
			if err != nil {
				t.Error(err)
			}
			got <- k2
		}()
		synctest.Wait() // the second caller is queued
		const hold = 20 * time.Millisecond
		time.Sleep(hold)
		if err := k.Release(ctx); err != nil {
			t.Fatal(err)
		}
		k2 := <-got
		st := l.Stats()
		if st.Handoffs != 1 {
			t.Fatalf("Stats = %+v, want the lock handed off", st)
		}
		if w := st.WaitDuration - first; w != hold {
			t.Errorf("the queued caller's WaitDuration = %v, want the %v it waited", w, hold)
		}
		if err := k2.Release(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // every event reported
		mu.Lock()
		defer mu.Unlock()
		var handoff, released []Event
		for _, e := range events {
			switch {
			case e.Outcome == Acquired && e.Handoff:
				handoff = append(handoff, e)
			case e.Outcome == Released:
				released = append(released, e)
			}
		}
		if len(handoff) != 1 || handoff[0].Wait != hold {
			t.Errorf("handoff Acquired events %+v, want one with Wait %v", handoff, hold)
		}
		// The first holder's (the second let go at once).
		if len(released) != 2 || max(released[0].Held, released[1].Held) != hold {
			t.Errorf("Released events %+v, want two, one with Held %v", released, hold)
		}
	})
}
