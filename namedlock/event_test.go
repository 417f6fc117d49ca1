package namedlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
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

// TestEventSessionNamesTheHolder: an Acquired event's Session is the server
// session that holds the lock: the id IS_USED_LOCK names (where it names
// one: not on TiDB). A handoff keeps the session: the Acquired event of the
// caller it goes to, and the Released event of the caller it leaves, carry
// the same id. A KILL CONNECTION of that id, what an operator does with a
// stuck lock, takes the lock back: the holder is told (a Lost event with
// the same id), and the lock taken again from the server is on another
// session, which its Acquired event names.
func TestEventSessionNamesTheHolder(t *testing.T) {
	srv := testdb.RequireReal(t)
	leakCheck(t)
	var log eventLog
	in := newInstance(t, "", namedlock.WithKeepAlive(100*time.Millisecond), namedlock.WithHandoff(8, time.Minute), namedlock.WithObserver(log.add))
	adm := admin(t)
	ctx := testCtx(t, 20*time.Second)
	key := uniqueKey(t, "k")
	name := keyfmt.Portable(key)
	// acquired returns the Session of the last Acquired event logged with
	// the given Handoff; ended, the Sessions of the events logged with
	// outcome o; named checks an Acquired event's Session against the
	// server.
	acquired := func(handoff bool) int64 {
		t.Helper()
		var ids []int64
		for _, e := range log.snapshot() {
			if e.Outcome == namedlock.Acquired && e.Handoff == handoff {
				ids = append(ids, e.Session)
			}
		}
		if len(ids) == 0 {
			t.Fatalf("no Acquired event with Handoff %v: %+v", handoff, log.snapshot())
		}
		return ids[len(ids)-1]
	}
	ended := func(o namedlock.Outcome) []int64 {
		var ids []int64
		for _, e := range log.snapshot() {
			if e.Outcome == o {
				ids = append(ids, e.Session)
			}
		}
		return ids
	}
	named := func(id int64) {
		t.Helper()
		if id == 0 {
			t.Fatal("Acquired event with Session 0 on a real server")
		}
		if srv.Flavor.NamesHolder() {
			if h := holderOf(t, adm, name); h != id {
				t.Errorf("Acquired event's Session = %d, IS_USED_LOCK = %d", id, h)
			}
		}
	}

	first := mustAcquireCtx(t, ctx, in.locker, key)
	session := acquired(false)
	named(session)
	got := make(chan *namedlock.Lock, 1)
	go func() {
		k, err := in.locker.Acquire(ctx, key)
		if err != nil {
			t.Errorf("Acquire by handoff: %v", err)
		}
		got <- k
	}()
	eventually(t, 5*time.Second, "the second caller never queued behind the first", func() bool { return in.locker.Stats().Queued == 1 })
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	if id := acquired(true); id != session {
		t.Errorf("handoff's Acquired event: Session %d, want %d (the session handed over)", id, session)
	}
	if ids := ended(namedlock.Released); len(ids) != 1 || ids[0] != session {
		t.Errorf("Released events' Sessions %v, want [%d]", ids, session)
	}
	named(session)

	killSession(t, adm, session)
	select {
	case <-second.Done():
	// contract: a lost lock is reported within keep-alive + check timeout
	// (docs/guarantees.md): 100 ms + 3 s, here 5 s.
	case <-time.After(5 * time.Second):
		t.Fatal("loss not detected within 5 s of the KILL")
	}
	if err := second.Release(ctx); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Release of the killed session's lock = %v, want ErrLockLost", err)
	}
	// The holder is told (Done) just before its observer is.
	eventually(t, 5*time.Second, "no Lost event", func() bool { return len(ended(namedlock.Lost)) != 0 })
	if ids := ended(namedlock.Lost); len(ids) != 1 || ids[0] != session {
		t.Errorf("Lost events' Sessions %v, want [%d]", ids, session)
	}

	third := mustAcquireCtx(t, ctx, in.locker, key)
	again := acquired(false)
	if again == session {
		t.Errorf("lock taken again after the KILL of session %d: Acquired event names the same session", session)
	}
	named(again)
	if err := third.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
