package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// reviewChain starts A, a DoTx at SERIALIZABLE on the fake server whose
// COMMIT waits for gate, and B, the next such DoTx, whose fn runs bFn; it
// returns once A has handed the lock to B early (B's fn has begun). bDone
// is closed when B's call has returned, with its error in *bErr.
func reviewChain(t *testing.T, l *Locker, wg *sync.WaitGroup, gate chan struct{}, aEnded *atomic.Bool, bFn func() error) (bIn, bDone chan struct{}, bErr *error) {
	t.Helper()
	db := new(sql.DB)
	run := func(ctx context.Context, g chan struct{}, ended *atomic.Bool, fn func() error) error {
		begin := func(context.Context) (*chainTx, error) { return &chainTx{gate: g, ended: ended}, nil }
		return serialTx(l, ctx, "k", db, begin, func(context.Context, *chainTx) error { return fn() })
	}
	ctx := context.Background()
	aIn, aGo := make(chan struct{}), make(chan struct{})
	wg.Go(func() {
		_ = run(ctx, gate, aEnded, func() error { close(aIn); <-aGo; return nil })
	})
	<-aIn
	bIn, bDone, bErr = make(chan struct{}), make(chan struct{}), new(error)
	wg.Go(func() {
		defer close(bDone)
		*bErr = run(ctx, nil, new(atomic.Bool), func() error { close(bIn); return bFn() })
	})
	synctest.Wait() // B waits behind A
	close(aGo)      // A hands on to B early; its COMMIT waits for gate
	<-bIn
	return bIn, bDone, bErr
}

// TestReviewSecondCloseReturnsWhileHeld: Close's doc says that when it
// returns no server lock of the Locker is held, and that a second Close
// returns ErrClosed. A second Close called while the first waits (here
// for the COMMIT a DoTx at SERIALIZABLE handed its lock on ahead of)
// returns at once, with the server lock still held: a caller that
// shuts down from two places (a signal handler and a deferred Close) and
// goes on when its Close returns finds the lock still held.
func TestReviewSecondCloseReturnsWhileHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, f := fakeLocker(t, WithHandoff(DefaultMaxHandoffs, time.Minute))
		var wg sync.WaitGroup
		gate, aEnded := make(chan struct{}), new(atomic.Bool)
		_, _, _ = reviewChain(t, l, &wg, gate, aEnded, func() error { return nil })
		synctest.Wait()
		first := make(chan error, 1)
		go func() { first <- l.Close() }()
		synctest.Wait() // the first Close waits for A's COMMIT
		second := make(chan error, 1)
		go func() { second <- l.Close() }()
		time.Sleep(10 * time.Second) // fake time
		select {
		case err := <-second:
			if held, pending := f.busy(keyName); held || pending != 0 {
				t.Errorf("the second Close returned (%v) while the server lock is held (%v, %d statements in flight)", err, held, pending)
			}
		default:
		}
		close(gate)
		<-first
		wg.Wait()
	})
}

// TestReviewCloseLetsEarlyHolderReturnBeforeCommit: DoTx's doc says a
// DoTx that got its lock by an early handoff returns, also when its fn
// failed, only once the COMMITs it was handed ahead of have returned.
// When Close takes B's lock while B's fn runs, B's release finds its lock
// already let go of (freed) and skips the wait: B returns while A's COMMIT
// is still held back.
func TestReviewCloseLetsEarlyHolderReturnBeforeCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := fakeLocker(t, WithHandoff(DefaultMaxHandoffs, time.Minute))
		var wg sync.WaitGroup
		gate, aEnded := make(chan struct{}), new(atomic.Bool)
		bGo := make(chan struct{})
		_, bDone, bErr := reviewChain(t, l, &wg, gate, aEnded, func() error { <-bGo; return nil })
		closed := make(chan error, 1)
		go func() { closed <- l.Close() }()
		synctest.Wait() // Close has taken B's lock and waits for A's COMMIT
		close(bGo)
		time.Sleep(10 * time.Second) // fake time
		select {
		case <-bDone:
			if !aEnded.Load() {
				t.Errorf("B returned (%v) while A's COMMIT, which it was handed ahead of, had not returned", *bErr)
			}
		default:
		}
		close(gate)
		<-closed
		wg.Wait()
		if !errors.Is(*bErr, ErrClosed) {
			t.Logf("B: %v", *bErr)
		}
	})
}
