package namedlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
)

type ctxTag struct{}

// TestObserverSeesWholeHolds: every hold ends with exactly one event
// (Released, Lost, or Released with ErrClosed when Close takes it back), and
// that event carries the acquisition that began it — its ctx and its wait —
// so an observer can draw the whole of it (a trace span) after the fact.
func TestObserverSeesWholeHolds(t *testing.T) {
	testdb.RequireReal(t)
	leakCheck(t)
	var log eventLog
	in := newInstance(t, "", namedlock.WithKeepAlive(100*time.Millisecond), namedlock.WithObserver(log.add))
	adm := admin(t)
	ctx := context.WithValue(testCtx(t, 20*time.Second), ctxTag{}, "caller")

	released := mustAcquireCtx(t, ctx, in.locker, uniqueKey(t, "released"))
	if err := released.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lost := mustAcquireCtx(t, ctx, in.locker, uniqueKey(t, "lost"))
	killSession(t, adm, holderOf(t, adm, lost.Name()))
	select {
	case <-lost.Done():
	// contract: a lost lock is reported within keep-alive + check timeout
	// (docs/guarantees.md): 100 ms + 3 s, here 5 s.
	case <-time.After(5 * time.Second):
		t.Fatal("loss not detected within 5 s")
	}
	if err := lost.Release(ctx); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Release of a lost lock = %v, want ErrLockLost", err)
	}
	closed := mustAcquireCtx(t, ctx, in.locker, uniqueKey(t, "closed"))
	if err := in.locker.Close(); err != nil {
		t.Fatal(err)
	}
	if err := closed.Release(ctx); !errors.Is(err, namedlock.ErrClosed) {
		t.Errorf("Release after Close = %v, want ErrClosed", err)
	}

	want := map[string]struct {
		outcome namedlock.Outcome
		err     error
	}{
		released.Key(): {namedlock.Released, nil},
		lost.Key():     {namedlock.Lost, namedlock.ErrLockLost},
		closed.Key():   {namedlock.Released, namedlock.ErrClosed},
	}
	acquired := map[string]namedlock.Event{}
	ended := map[string]int{}
	for _, e := range log.snapshot() {
		if e.Context == nil || e.Context.Value(ctxTag{}) != "caller" {
			t.Errorf("%v event of %s: Context %v, want the caller's", e.Outcome, e.Key, e.Context)
		}
		if e.Outcome == namedlock.Acquired {
			acquired[e.Key] = e
			continue
		}
		ended[e.Key]++
		w, ok := want[e.Key]
		if !ok || e.Outcome != w.outcome || (w.err == nil) != (e.Err == nil) || (w.err != nil && !errors.Is(e.Err, w.err)) {
			t.Errorf("event %+v: want %v with error %v", e, w.outcome, w.err)
		}
		if a, ok := acquired[e.Key]; !ok || e.Wait != a.Wait || e.Held <= 0 {
			t.Errorf("%v event of %s: Wait %v, Held %v; want the Acquired event's wait %v and a hold", e.Outcome, e.Key, e.Wait, e.Held, a.Wait)
		}
	}
	for key := range want {
		if ended[key] != 1 {
			t.Errorf("%s: %d events ended its hold, want 1", key, ended[key])
		}
	}
}

// mustAcquireCtx acquires key on l with ctx, and fails the test otherwise.
func mustAcquireCtx(t *testing.T, ctx context.Context, l *namedlock.Locker, key string) *namedlock.Lock {
	t.Helper()
	k, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire %s: %v", key, err)
	}
	return k
}
