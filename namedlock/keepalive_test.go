package namedlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// TestKeepAliveOutlivesLease holds a lock for longer than the lease (the
// session wait_timeout, 2 s here). An idle lock session would be ended by
// the server and lose the lock; the keep-alive's ownership checks keep it
// busy (its process-list idle time stays under a second) and the lock stays
// held and unreported.
func TestKeepAliveOutlivesLease(t *testing.T) {
	testdb.RequireReal(t)
	t.Parallel()
	in := newInstanceWithPool(t, []pool.Option{pool.WithLease(2 * time.Second)},
		namedlock.WithKeepAlive(200*time.Millisecond), namedlock.WithCheckTimeout(time.Second))
	adm := admin(t)
	k := mustAcquire(t, in.locker, uniqueKey(t, "k"))
	id := holderOf(t, adm, k.Name())
	deadline := time.Now().Add(3500 * time.Millisecond)
	for time.Now().Before(deadline) {
		idle := int64(-1)
		for _, s := range sessions(t, adm) {
			if s.id == id {
				idle = s.idle
			}
		}
		if idle < 0 {
			t.Fatalf("holder session %d is gone", id)
		}
		if idle >= 2 {
			t.Fatalf("holder session idle for %d s with a 200ms keep-alive", idle)
		}
		time.Sleep(250 * time.Millisecond)
	}
	select {
	case <-k.Done():
		t.Fatalf("lock lost while its holder was alive: %v", k.Err())
	default:
	}
	if got := holderOf(t, adm, k.Name()); got != id {
		t.Errorf("IS_USED_LOCK = %d after 3.5 s, want the same session %d", got, id)
	}
	if err := k.Release(context.Background()); err != nil {
		t.Errorf("Release: %v", err)
	}
	if st := in.locker.Stats(); st.Lost != 0 {
		t.Errorf("Stats.Lost = %d", st.Lost)
	}
}

// TestLockerLeaseIsThePools: the lease is configured in one place, the
// lock pool (pool.WithLease): a Locker's connections have it and nothing
// sets another.
func TestLockerLeaseIsThePools(t *testing.T) {
	t.Parallel()
	in := newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(1), pool.WithLease(7 * time.Second)})
	ctx := testCtx(t, 10*time.Second)
	if err := in.locker.Do(ctx, uniqueKey(t, "k"), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var lease int
	if err := in.db.QueryRowContext(ctx, "SELECT @@session.wait_timeout").Scan(&lease); err != nil {
		t.Fatal(err)
	}
	if lease != 7 {
		t.Errorf("lock connection's wait_timeout = %d, want the pool's lease 7", lease)
	}
}

// TestReleaseRightAfterKill: Release right after an operator's KILL, before
// any keep-alive check could notice (default 2 s interval), still reports
// the loss: ErrLockLost from Release and Err, and Stats counts it.
func TestReleaseRightAfterKill(t *testing.T) {
	testdb.RequireReal(t)
	leakCheck(t)
	in := newInstance(t, "")
	adm := admin(t)
	k := mustAcquire(t, in.locker, uniqueKey(t, "k"))
	killSession(t, adm, holderOf(t, adm, k.Name()))
	eventually(t, 2*time.Second, "killed session still listed", func() bool { return holderOf(t, adm, k.Name()) == 0 })
	if err := k.Release(context.Background()); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Release right after KILL = %v, want ErrLockLost", err)
	}
	if err := k.Err(); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Err() = %v, want ErrLockLost", err)
	}
	if err := k.Release(context.Background()); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("second Release = %v, want ErrLockLost", err)
	}
	if st := in.locker.Stats(); st.Lost != 1 || st.Held != 0 {
		t.Errorf("Stats = %+v, want Lost 1, Held 0", st)
	}
	wantInUse(t, in.db, 0)
}

// TestNotReentrant: a goroutine that holds a key and acquires it again
// waits for itself until its ctx ends; a caller queued behind a holder of
// the same Locker leaves the queue cleanly when its ctx ends. (That the
// wait ends exactly at the deadline: TestOrderingReentrantWaitsForCtx, in
// fake time.)
func TestNotReentrant(t *testing.T) {
	t.Parallel()
	in := newInstance(t, "")
	key := uniqueKey(t, "k")
	k := mustAcquire(t, in.locker, key)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := in.locker.Acquire(ctx, key); !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("re-entrant Acquire = %v, want ErrNotAcquired+DeadlineExceeded", err)
	}
	if st := in.locker.Stats(); st.Queued != 0 || st.Waiting != 0 || st.Held != 1 {
		t.Errorf("Stats = %+v, want nothing queued or waiting, 1 held", st)
	}
	wantInUse(t, in.db, 1)
	if err := k.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The queue is gone: the key is free for the next caller at once.
	if ran, err := in.locker.TryDo(testCtx(t, 5*time.Second), key, func(context.Context) error { return nil }); !ran || err != nil {
		t.Errorf("TryDo after release: %v, %v", ran, err)
	}
	wantInUse(t, in.db, 0)
}

// TestHandoffDisabled: WithHandoff(0, 0) sends every acquisition to the
// server.
func TestHandoffDisabled(t *testing.T) {
	t.Parallel()
	in := newInstance(t, "", namedlock.WithHandoff(0, 0))
	key := uniqueKey(t, "k")
	ctx := testCtx(t, 30*time.Second)
	done := make(chan error, 4)
	for range 4 {
		go func() {
			done <- in.locker.Do(ctx, key, func(context.Context) error {
				time.Sleep(5 * time.Millisecond)
				return nil
			})
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if st := in.locker.Stats(); st.Handoffs != 0 || st.ServerAcquisitions != 4 {
		t.Errorf("Stats = %+v, want 0 handoffs, 4 server acquisitions", st)
	}
}
