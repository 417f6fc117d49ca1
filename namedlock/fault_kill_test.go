package namedlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
)

// TestFaultKillHolderDetected: an operator KILLs the session of a held lock
// (KILL CONNECTION from another connection). With a keep-alive of 1 s the
// holder is told within keep-alive + check timeout, whether it holds through Do
// (fn's ctx is cancelled with cause ErrLockLost, Do returns ErrLockLost) or
// through Acquire (Done closes, Err and Release return ErrLockLost); Stats
// counts each loss, the dead connection leaves the pool (InUse comes back to
// the number of locks still held), and the key is free for another instance
// at once.
func TestFaultKillHolderDetected(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	const keepAlive = time.Second
	// contract: a lost lock is reported within keep-alive + check timeout
	// (docs/guarantees.md); a KILLed session fails its next check at once,
	// so it is told well within that.
	const bound = keepAlive + namedlock.DefaultCheckTimeout
	adm := faultAdmin(t, srv.DSN)
	in := newInstance(t, srv.DSN, namedlock.WithKeepAlive(keepAlive))
	other := newInstance(t, srv.DSN)
	base := faultBase(t)

	// Two locks held throughout: the pool must come back to exactly these.
	held := []*namedlock.Lock{
		faultAcquire(t, in.locker, base+":held-1", 5*time.Second),
		faultAcquire(t, in.locker, base+":held-2", 5*time.Second),
	}
	var latencies []time.Duration

	t.Run("Do", func(t *testing.T) {
		key := base + ":do"
		fnErr := errors.New("fn stopped: its ctx ended")
		var cause error
		var killed, told time.Time
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := in.locker.Do(ctx, key, func(ctx context.Context) error {
			faultMustKill(t, adm, holderOf(t, adm, key))
			killed = time.Now()
			select {
			case <-ctx.Done():
				told = time.Now()
				cause = context.Cause(ctx)
				return fnErr
			case <-time.After(10 * time.Second):
				return errors.New("fn's ctx not cancelled within 10 s of the KILL")
			}
		})
		d := told.Sub(killed)
		t.Logf("detection latency after KILL (Do, keep-alive %v): %v", keepAlive, d)
		latencies = append(latencies, d)
		// contract: see bound.
		if told.IsZero() || d > bound {
			t.Errorf("fn's ctx cancelled %v after the KILL, want within keep-alive + check timeout = %v", d, bound)
		}
		if !errors.Is(err, namedlock.ErrLockLost) || !errors.Is(err, fnErr) {
			t.Errorf("Do = %v, want ErrLockLost joined with fn's error", err)
		}
		if !errors.Is(cause, namedlock.ErrLockLost) {
			t.Errorf("context.Cause(fn's ctx) = %v, want ErrLockLost", cause)
		}
		if st := in.locker.Stats(); st.Lost != 1 || st.Held != len(held) {
			t.Errorf("Stats = %+v, want Lost 1, Held %d", st, len(held))
		}
		faultInUse(t, in.db, len(held), time.Second)
	})

	t.Run("Acquire", func(t *testing.T) {
		for i := range 3 {
			key := base + ":acq"
			k := faultAcquire(t, in.locker, key, 5*time.Second)
			// Spread the KILL over the keep-alive period.
			time.Sleep(time.Duration(i) * keepAlive / 3)
			id := holderOf(t, adm, key)
			faultMustKill(t, adm, id)
			killed := time.Now()
			d, ok := faultClosedWithin(k.Done(), killed, 5*time.Second)
			t.Logf("detection latency after KILL (Acquire #%d, keep-alive %v): %v", i+1, keepAlive, d)
			latencies = append(latencies, d)
			// contract: see bound.
			if !ok || d > bound {
				t.Errorf("Done closed %v after the KILL (closed: %v), want within %v", d, ok, bound)
			}
			if err := k.Err(); !errors.Is(err, namedlock.ErrLockLost) {
				t.Errorf("Err() = %v, want ErrLockLost", err)
			}
			// The connection was discarded before Done closed.
			faultInUse(t, in.db, len(held), 0)
			// The server freed the lock with the session: another instance
			// takes it at once.
			if ran, err := other.locker.TryDo(context.Background(), key, func(context.Context) error { return nil }); !ran || err != nil {
				t.Errorf("TryDo by another instance after the KILL: %v, %v", ran, err)
			}
			for range 2 {
				if err := faultRelease(k); !errors.Is(err, namedlock.ErrLockLost) {
					t.Errorf("Release after the loss = %v, want ErrLockLost", err)
				}
			}
			if st := in.locker.Stats(); st.Lost != int64(2+i) || st.Held != len(held) {
				t.Errorf("Stats = %+v, want Lost %d, Held %d", st, 2+i, len(held))
			}
		}
	})

	// The locks held throughout were never disturbed.
	for _, k := range held {
		if err := k.Err(); err != nil {
			t.Errorf("%s: Err() = %v, want nil", k.Key(), err)
		}
		if err := faultRelease(k); err != nil {
			t.Errorf("Release(%s): %v", k.Key(), err)
		}
	}
	faultInUse(t, in.db, 0, time.Second)
	if st := in.locker.Stats(); st.Held != 0 || st.Waiting != 0 {
		t.Errorf("Stats at the end = %+v, want Held 0, Waiting 0", st)
	}
	t.Logf("detection latencies after KILL with keep-alive %v: %v (bound %v)", keepAlive, latencies, bound)
}

// TestFaultReleaseAfterConnectionDied: the holder's session is KILLed and
// the holder releases before its keep-alive has noticed (keep-alive 20 s).
// Release must not hang and must not pretend: it returns an error matching
// ErrLockLost (the RELEASE_LOCK cannot be confirmed because the session that
// held the lock is gone), leaks no connection, and the key is usable again.
// The same holds when the release would hand the lock over to a local waiter
// (handoff): a dead session must not be passed on as if it were held.
func TestFaultReleaseAfterConnectionDied(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	const keepAlive = 20 * time.Second // never fires during the test
	adm := faultAdmin(t, srv.DSN)
	in := newInstance(t, srv.DSN, namedlock.WithKeepAlive(keepAlive))
	base := faultBase(t)

	t.Run("Release", func(t *testing.T) {
		key := base + ":rel"
		k := faultAcquire(t, in.locker, key, 5*time.Second)
		faultMustKill(t, adm, holderOf(t, adm, key))
		start := time.Now()
		err := faultRelease(k)
		t.Logf("Release after the session died: %v after %v", err, time.Since(start))
		if !errors.Is(err, namedlock.ErrLockLost) {
			t.Errorf("Release after the session was KILLed = %v, want ErrLockLost", err)
		}
		// contract: Release of a dead session answers at once: it does
		// not run into its release timeout (5 s), which 2 s tells apart.
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Release took %v", d)
		}
		if err := k.Err(); !errors.Is(err, namedlock.ErrLockLost) {
			t.Errorf("Err() after that Release = %v, want ErrLockLost", err)
		}
		if err := faultRelease(k); err == nil {
			t.Error("second Release returned nil")
		}
		faultInUse(t, in.db, 0, time.Second)
		if id := noHolderWithin(t, adm, key, 5*time.Second); id != 0 {
			t.Errorf("session %d still holds %q 5 s after it was KILLed", id, key)
		}
		// The Locker's state for the key is clean: it can be taken again.
		k2 := faultAcquire(t, in.locker, key, 5*time.Second)
		if err := faultRelease(k2); err != nil {
			t.Errorf("Release of the re-acquired lock: %v", err)
		}
	})

	t.Run("Do", func(t *testing.T) {
		key := base + ":do"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := in.locker.Do(ctx, key, func(ctx context.Context) error {
			faultMustKill(t, adm, holderOf(t, adm, key))
			return nil
		})
		if !errors.Is(err, namedlock.ErrLockLost) {
			t.Errorf("Do whose session was KILLed during fn = %v, want ErrLockLost", err)
		}
		faultInUse(t, in.db, 0, time.Second)
	})

	t.Run("handoff", func(t *testing.T) {
		// Handoff allowed for a minute, so that the release would hand
		// the server lock straight to the queued caller.
		in := newInstance(t, srv.DSN, namedlock.WithKeepAlive(keepAlive), namedlock.WithHandoff(32, time.Minute))
		key := base + ":handoff"
		k := faultAcquire(t, in.locker, key, 5*time.Second)
		got := make(chan *namedlock.Lock, 1)
		errc := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			k2, err := in.locker.Acquire(ctx, key)
			got <- k2
			errc <- err
		}()
		if _, ok := faultPoll(5*time.Second, func() bool { return in.locker.Stats().Queued == 1 }); !ok {
			t.Fatal("the second caller never queued behind the holder")
		}
		faultMustKill(t, adm, holderOf(t, adm, key))
		if err := faultRelease(k); !errors.Is(err, namedlock.ErrLockLost) {
			t.Errorf("Release of a KILLed lock with a local waiter = %v, want ErrLockLost", err)
		}
		k2, err := <-got, <-errc
		if err != nil {
			t.Logf("the waiter: %v", err)
			return
		}
		// Whatever the waiter got must be a live lock or be reported lost.
		// (Not judged by IS_USED_LOCK alone: a KILLed session can still be
		// listed as the holder for a moment while the server ends it.)
		id := holderOf(t, adm, key)
		if lost := k2.Err(); lost == nil {
			if id == 0 {
				t.Errorf("the waiter holds a lock that nobody holds at the server (Err() nil)")
			}
			if err := faultRelease(k2); err != nil {
				t.Errorf("the waiter's Release of a live lock: %v", err)
			}
		} else if err := faultRelease(k2); !errors.Is(err, namedlock.ErrLockLost) {
			t.Errorf("the waiter's lock was reported lost (%v), but its Release = %v, want ErrLockLost", lost, err)
		}
		faultInUse(t, in.db, 0, time.Second)
		if st := in.locker.Stats(); st.Held != 0 || st.Waiting != 0 || st.Queued != 0 {
			t.Errorf("Stats at the end = %+v, want Held 0, Waiting 0, Queued 0", st)
		}
	})

	if st := in.locker.Stats(); st.Held != 0 || st.Waiting != 0 || st.Queued != 0 {
		t.Errorf("Stats at the end = %+v, want Held 0, Waiting 0, Queued 0", st)
	}
}
