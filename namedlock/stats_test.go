package namedlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/namedlock/mysql/namedlock"
)

type eventLog struct {
	mu     sync.Mutex
	events []namedlock.Event
}

func (e *eventLog) add(ev namedlock.Event) {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
}

func (e *eventLog) snapshot() []namedlock.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]namedlock.Event(nil), e.events...)
}

// TestStatsAndObserver follows one lock through a server acquisition, a
// handoff to a local waiter and two releases, with a failed TryAcquire on
// another instance, and checks the Stats gauges and counters and the events
// the observers receive.
func TestStatsAndObserver(t *testing.T) {
	leakCheck(t)
	var logA, logB eventLog
	a := newInstance(t, "", namedlock.WithHandoff(100, time.Minute), namedlock.WithObserver(logA.add))
	b := newInstance(t, "", namedlock.WithObserver(logB.add))
	key := uniqueKey(t, "k")
	ctx := testCtx(t, 20*time.Second)

	if st := a.locker.Stats(); st != (namedlock.Stats{}) {
		t.Errorf("Stats of a new Locker = %+v, want zero", st)
	}
	k := mustAcquire(t, a.locker, key)
	st := a.locker.Stats()
	if st.Held != 1 || st.Acquired != 1 || st.ServerAcquisitions != 1 || st.Handoffs != 0 || st.Waiting != 0 {
		t.Errorf("after Acquire: %+v", st)
	}

	if k, err := b.locker.TryAcquire(ctx, key); k != nil || err != nil {
		t.Fatalf("TryAcquire on a held key: %v, %v; want nil, nil", k, err)
	}
	if st := b.locker.Stats(); st.NotAcquired != 1 || st.Acquired != 0 || st.Held != 0 {
		t.Errorf("b after a failed TryAcquire: %+v", st)
	}

	got := make(chan *namedlock.Lock, 1)
	go func() {
		k2, err := a.locker.Acquire(ctx, key)
		if err != nil {
			t.Errorf("queued Acquire: %v", err)
		}
		got <- k2
	}()
	eventually(t, 5*time.Second, "the second caller never queued", func() bool {
		st := a.locker.Stats()
		return st.Queued == 1 && st.Waiting == 1
	})
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	k2 := <-got
	if k2 == nil {
		t.FailNow()
	}
	st = a.locker.Stats()
	if st.Held != 1 || st.Acquired != 2 || st.Handoffs != 1 || st.ServerAcquisitions != 1 || st.Waiting != 0 || st.Queued != 0 {
		t.Errorf("after the handoff: %+v", st)
	}
	// WaitDuration's count of that wait, and the events' Wait and Held:
	// TestOrderingWaitDurationCounted, exactly, in fake time.
	wantInUse(t, a.db, 1) // one session, passed on
	if err := k2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	st = a.locker.Stats()
	if st.Held != 0 || st.Lost != 0 || st.NotAcquired != 0 {
		t.Errorf("after the last release: %+v", st)
	}
	wantInUse(t, a.db, 0)

	// The releaser and the receiver of a handoff report from their own
	// goroutines: their events may come in either order.
	evA := logA.snapshot()
	if len(evA) != 4 {
		t.Fatalf("a's events: %+v, want 4", evA)
	}
	if e := evA[0]; e.Outcome != namedlock.Acquired || e.Handoff {
		t.Errorf("a's first event = %+v, want a server acquisition", e)
	}
	var released, handedOff int
	for _, e := range evA {
		if e.Key != key || e.Err != nil {
			t.Errorf("a's event %+v: want key %q and no error", e, key)
		}
		switch {
		case e.Outcome == namedlock.Released:
			released++
		case e.Outcome == namedlock.Acquired && e.Handoff:
			handedOff++
		}
	}
	if released != 2 || handedOff != 1 {
		t.Errorf("a's events %+v: %d Released and %d handoffs, want 2 and 1", evA, released, handedOff)
	}
	if e := evA[len(evA)-1]; e.Outcome != namedlock.Released {
		t.Errorf("a's last event = %+v, want Released", e)
	}
	// The events' Wait and Held: TestOrderingWaitDurationCounted, exactly,
	// in fake time.
	evB := logB.snapshot()
	if len(evB) != 1 || evB[0].Outcome != namedlock.NotAcquired || !errors.Is(evB[0].Err, namedlock.ErrNotAcquired) || evB[0].Key != key {
		t.Errorf("b's events = %+v, want one NotAcquired", evB)
	}
	for o, s := range map[namedlock.Outcome]string{namedlock.Acquired: "acquired", namedlock.NotAcquired: "not-acquired",
		namedlock.Released: "released", namedlock.Lost: "lost", 0: "unknown"} {
		if o.String() != s {
			t.Errorf("Outcome(%d).String() = %q, want %q", int(o), o.String(), s)
		}
	}
}

// TestNoConnectionLeakOnFailedAcquire: 200 failed TryAcquires and a series of
// timed-out waits leave no connection in use, and do not grow the pool.
func TestNoConnectionLeakOnFailedAcquire(t *testing.T) {
	leakCheck(t)
	a := newInstance(t, "")
	b := newInstance(t, "")
	key := uniqueKey(t, "k")
	k := mustAcquire(t, a.locker, key)
	ctx := testCtx(t, 30*time.Second)
	for i := range 200 {
		if k, err := b.locker.TryAcquire(ctx, key); k != nil || err != nil {
			t.Fatalf("TryAcquire %d: %v, %v; want nil, nil", i, k, err)
		}
	}
	wantInUse(t, b.db, 0)
	if open := b.db.Stats().OpenConnections; open > 1 {
		t.Errorf("%d connections open after sequential failed TryAcquires, want 1 reused", open)
	}
	for i := range 10 {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := b.locker.Acquire(wctx, key)
		cancel()
		if !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("timed Acquire %d: %v", i, err)
		}
	}
	wantInUse(t, b.db, 0)
	st := b.locker.Stats()
	if st.NotAcquired != 210 || st.Held != 0 || st.Waiting != 0 {
		t.Errorf("Stats = %+v, want NotAcquired 210, nothing held or waiting", st)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wantInUse(t, a.db, 0)
}
