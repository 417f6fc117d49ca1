package namedlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
)

// waitFor polls cond (generously) and fails the test if it never holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// contract: the caller's (what); the 10 s only ends a wait for what
	// never comes.
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after 10 s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestDoMultiClaimKeepsBusyKeysUnit: on a pool of two, a DoMulti on [a, b]
// while b is held by a single caller of its Locker reserves one unit (for
// a) and claims b's queue. It waits at the server for a, held by another
// instance, and meanwhile b's holder lets go: b's queue stays, idle, with
// its unit, so a single acquisition of another key, x, finds the pool
// full and waits. Once a is free the DoMulti takes b over and runs. Had
// b's unit gone back to the budget, x would have taken it and held it
// until the DoMulti was done, while the DoMulti, holding a, waited for a
// unit for b: each waiting for the other until the DoMulti's ctx ended.
func TestDoMultiClaimKeepsBusyKeysUnit(t *testing.T) {
	db, _ := reviewPool(t, 2)
	other, _ := reviewPool(t, 2)
	l, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lo, err := New(other)
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	base := testdb.UniqueName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ka, err := lo.Acquire(ctx, base+"a")
	if err != nil {
		t.Fatal(err)
	}
	defer ka.Release(ctx)
	kb, err := l.Acquire(ctx, base+"b")
	if err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithTimeout(ctx, 15*time.Second)
	defer mcancel()
	multiDone := make(chan struct{})
	multi := make(chan error, 1)
	xGot := make(chan struct{}, 1)
	go func() {
		multi <- l.DoMulti(mctx, []string{base + "a", base + "b"}, func(context.Context) error {
			if len(xGot) > 0 {
				return errors.New("x got a unit before the DoMulti had its keys: b's unit went to it")
			}
			return nil
		})
		close(multiDone)
	}()
	waitFor(t, "the DoMulti waiting at the server for a", func() bool { return db.Stats().InUse == 2 && budgetUsed(l) == 2 })
	if err := kb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := budgetUsed(l); n != 2 {
		t.Errorf("after b's holder let go: %d units in use, want 2 (b's kept for the DoMulti)", n)
	}
	// x: held until the DoMulti is done, or for longer than its ctx.
	xErr := make(chan error, 1)
	go func() {
		kx, err := l.Acquire(ctx, base+"x")
		if err != nil {
			xErr <- err
			return
		}
		xGot <- struct{}{}
		select {
		case <-multiDone:
		case <-time.After(20 * time.Second):
		}
		xErr <- kx.Release(ctx)
	}()
	time.Sleep(200 * time.Millisecond) // x asks for a unit
	if err := ka.Release(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-multi
	t.Logf("DoMulti [a, b] with b's holder gone while it waited for a: %v", err)
	if err != nil {
		t.Errorf("DoMulti = %v, want it to run", err)
	}
	// x sends on xGot once it has its lock, then on xErr once it let go
	// (after the DoMulti is done): both may be ready here.
	select {
	case <-xGot:
	case err := <-xErr:
		if len(xGot) == 0 {
			t.Fatalf("x: %v", err)
		}
		xErr <- err
	// contract: x gets its lock once the DoMulti is done; 30 s only ends
	// a wait that never does.
	case <-time.After(30 * time.Second):
		t.Fatal("x never got its lock")
	}
	if err := <-xErr; err != nil {
		t.Errorf("x's release: %v", err)
	}
	wantBudgetZero(t, l, "the DoMulti and x")
}

// TestDoMultiGivesBackUnusedUnit: a DoMulti on [a, c] reserves a unit for
// each (neither is busy) and waits at the server for a, held by another
// instance. Meanwhile a single caller takes c, making c's queue with a
// unit of its own. When the DoMulti reaches c it queues behind that
// caller and gives the unit it reserved for c back at once, not when it
// is done.
func TestDoMultiGivesBackUnusedUnit(t *testing.T) {
	db, _ := reviewPool(t, 3)
	other, _ := reviewPool(t, 2)
	l, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lo, err := New(other)
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	base := testdb.UniqueName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ka, err := lo.Acquire(ctx, base+"a")
	if err != nil {
		t.Fatal(err)
	}
	defer ka.Release(ctx)
	multi := make(chan error, 1)
	go func() {
		multi <- l.DoMulti(ctx, []string{base + "a", base + "c"}, func(context.Context) error { return nil })
	}()
	waitFor(t, "the DoMulti waiting at the server for a", func() bool { return db.Stats().InUse == 1 && budgetUsed(l) == 2 })
	kc, err := l.Acquire(ctx, base+"c")
	if err != nil {
		t.Fatal(err)
	}
	if n := budgetUsed(l); n != 3 {
		t.Errorf("with c held by a single: %d units in use, want 3", n)
	}
	if err := ka.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the DoMulti queued behind c's holder", func() bool { return l.Stats().Queued == 1 })
	if n := budgetUsed(l); n != 2 {
		t.Errorf("with the DoMulti queued behind c's holder: %d units in use, want 2 (a's and c's queues)", n)
	}
	if err := kc.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-multi; err != nil {
		t.Errorf("DoMulti = %v", err)
	}
	wantBudgetZero(t, l, "the DoMulti")
}

// TestDoMultiLimitLoweredBelowKeys: a DoMulti of three keys waits for its
// reservation on a pool of three while a single lock is held; the limit is
// lowered to two, below its keys: it fails with ErrInvalidArgument at the
// next look at the limit, not at its ctx.
func TestDoMultiLimitLoweredBelowKeys(t *testing.T) {
	db, _ := reviewPool(t, 3)
	l, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	base := testdb.UniqueName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k, err := l.Acquire(ctx, base+"held")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(ctx)
	mctx, mcancel := context.WithTimeout(ctx, 30*time.Second)
	defer mcancel()
	res := make(chan error, 1)
	go func() {
		res <- l.DoMulti(mctx, []string{base + "a", base + "b", base + "c"}, func(context.Context) error { return nil })
	}()
	waitFor(t, "the DoMulti waiting for its reservation", func() bool { return l.budget.waiting(1) })
	db.SetMaxOpenConns(2)
	err = <-res
	t.Logf("DoMulti of 3 keys waiting on a pool of 3 lowered to 2: %v", err)
	if !errors.Is(err, ErrInvalidArgument) || mctx.Err() != nil {
		t.Errorf("DoMulti = %v (ctx %v), want ErrInvalidArgument before its ctx ends", err, mctx.Err())
	}
	_ = k.Release(ctx)
	wantBudgetZero(t, l, "the refused DoMulti")
}
