package namedlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// TestCloseWithLocksHeld closes a Locker that holds a lock (Acquire), runs
// a Do, has a caller queued locally behind its own holder, and a caller
// waiting at the server for a key another instance holds. Close releases
// the held locks at the server before it returns, tells the holders (Done
// closes, Err is ErrClosed, Do's fn ctx is cancelled with cause ErrClosed),
// fails every waiting caller with ErrClosed, returns the connections to the
// pool, and stops its goroutines (leakCheck). A second Close returns
// ErrClosed, and so does any later call.
func TestCloseWithLocksHeld(t *testing.T) {
	leakCheck(t)
	in := newInstance(t, "", namedlock.WithKeepAlive(50*time.Millisecond))
	other := newInstance(t, "")
	adm := admin(t)
	kHeld, kDo, kOther := uniqueKey(t, "held"), uniqueKey(t, "do"), uniqueKey(t, "other")
	ctx := testCtx(t, 30*time.Second)

	held := mustAcquire(t, in.locker, kHeld)
	done := held.Done()
	blocker := mustAcquire(t, other.locker, kOther)

	type doResult struct {
		err, cause error
	}
	doStarted := make(chan struct{})
	doRes := make(chan doResult, 1)
	go func() {
		var cause error
		err := in.locker.Do(ctx, kDo, func(ctx context.Context) error {
			close(doStarted)
			<-ctx.Done()
			cause = context.Cause(ctx)
			return ctx.Err()
		})
		doRes <- doResult{err, cause}
	}()
	<-doStarted

	localErr := make(chan error, 1)
	go func() {
		k, err := in.locker.Acquire(ctx, kHeld)
		if k != nil {
			_ = k.Release(ctx)
		}
		localErr <- err
	}()
	serverErr := make(chan error, 1)
	go func() {
		k, err := in.locker.Acquire(ctx, kOther)
		if k != nil {
			_ = k.Release(ctx)
		}
		serverErr <- err
	}()
	eventually(t, 5*time.Second, "callers not in place", func() bool {
		st := in.locker.Stats()
		return st.Queued == 1 && st.Waiting == 2 && st.Held == 2 && waitingAtServer(t, adm, keyfmt.Portable(kOther))
	})
	wantInUse(t, in.db, 3)

	start := time.Now()
	if err := in.locker.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	// contract: Close ends the GET_LOCK waits in flight (their KILLs within
	// 2 s in all, Locker.Close) and does not wait for the holders' fn.
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Close took %v", el)
	}
	// Released at the server by the time Close returned.
	for _, key := range []string{kHeld, kDo} {
		if id := holderOf(t, adm, keyfmt.Portable(key)); id != 0 {
			t.Errorf("%q held by session %d after Close", key, id)
		}
	}
	select {
	case <-done:
	default:
		t.Error("the holder's Done is not closed after Close")
	}
	if err := held.Err(); !errors.Is(err, namedlock.ErrClosed) {
		t.Errorf("holder's Err() = %v, want ErrClosed", err)
	}
	select {
	case r := <-doRes:
		if !errors.Is(r.cause, namedlock.ErrClosed) {
			t.Errorf("Do's fn ctx cause = %v, want ErrClosed", r.cause)
		}
		if !errors.Is(r.err, namedlock.ErrClosed) {
			t.Errorf("Do = %v, want ErrClosed", r.err)
		}
	// contract: Close ends a holder's Do with ErrClosed (Locker.Close);
	// 5 s only ends a wait for one that hangs.
	case <-time.After(5 * time.Second):
		t.Fatal("Do did not return after Close")
	}
	select {
	case err := <-localErr:
		if !errors.Is(err, namedlock.ErrClosed) {
			t.Errorf("caller queued locally: %v, want ErrClosed", err)
		}
	// contract: Close ends a caller queued locally with ErrClosed; 5 s only
	// ends a wait for one that hangs.
	case <-time.After(5 * time.Second):
		t.Fatal("caller queued locally did not return after Close")
	}
	select {
	case err := <-serverErr:
		if !errors.Is(err, namedlock.ErrClosed) {
			t.Errorf("caller waiting at the server: %v, want ErrClosed", err)
		}
	// contract: Close ends a wait at the server (its session killed) with
	// ErrClosed; 5 s only ends a wait for one that hangs.
	case <-time.After(5 * time.Second):
		t.Fatal("caller waiting at the server did not return within 5 s of Close")
	}
	eventually(t, 2*time.Second, "the closed Locker's wait is still at the server", func() bool {
		return !waitingAtServer(t, adm, keyfmt.Portable(kOther))
	})
	if err := blocker.Release(ctx); err != nil {
		t.Errorf("blocker Release: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if id := holderOf(t, adm, keyfmt.Portable(kOther)); id != 0 {
		t.Errorf("%q granted to session %d after its waiter's Locker closed", kOther, id)
	}

	if err := held.Release(ctx); !errors.Is(err, namedlock.ErrClosed) {
		t.Errorf("Release after Close = %v, want ErrClosed", err)
	}
	if err := in.locker.Close(); !errors.Is(err, namedlock.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if _, err := in.locker.Acquire(ctx, kHeld); !errors.Is(err, namedlock.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	if err := in.locker.Do(ctx, kHeld, func(context.Context) error { return nil }); !errors.Is(err, namedlock.ErrClosed) {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
	st := in.locker.Stats()
	if st.Held != 0 || st.Waiting != 0 || st.Queued != 0 {
		t.Errorf("Stats after Close = %+v, want no held, waiting or queued", st)
	}
	wantInUse(t, in.db, 0)
	// The pool stays usable: Close does not close the *sql.DB.
	if err := in.db.PingContext(ctx); err != nil {
		t.Errorf("lock pool after Close: %v", err)
	}
}

// TestCloseIdle: Close of a Locker that never held a lock, and of one whose
// locks were all released, returns nil and starts nothing.
func TestCloseIdle(t *testing.T) {
	leakCheck(t)
	in := newInstance(t, "")
	if err := in.locker.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	in2 := newInstance(t, "")
	if err := in2.locker.Do(testCtx(t, 5*time.Second), uniqueKey(t, "k"), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := in2.locker.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := in2.locker.Close(); !errors.Is(err, namedlock.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}
