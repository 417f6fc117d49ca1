package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/pool"
)

// budgetUsed is the number of units of l's budget in use.
func budgetUsed(l *Locker) int {
	l.budget.mu.Lock()
	defer l.budget.mu.Unlock()
	return l.budget.used
}

// wantBudgetZero waits (generously) for l's budget to be back to zero.
func wantBudgetZero(t *testing.T, l *Locker, after string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for budgetUsed(l) != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := budgetUsed(l); n != 0 {
		t.Errorf("after %s: %d budget units in use, want 0", after, n)
	}
}

func reviewPool(t *testing.T, maxConns int) (*sql.DB, *sql.DB) {
	t.Helper()
	srv := testdb.RequireReal(t) // names the server in the output
	db, err := pool.Open(srv.DSN, pool.WithMaxConns(maxConns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, testdb.OpenDB(t, srv.DSN)
}

// TestReviewBudgetBackToZero walks the error paths of acquisitions and
// DoMulti and checks that every unit of the shared connection budget comes
// back: a leaked unit is a connection that no acquisition may ever take,
// and enough of them stop every Locker of the pool.
func TestReviewBudgetBackToZero(t *testing.T) {
	db, admin := reviewPool(t, 3)
	l1, err := New(db, RecordHolders(t, WithKeepAlive(200*time.Millisecond), WithCheckTimeout(2*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	l2, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	base := testdb.UniqueName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A panic in fn.
	func() {
		defer func() { _ = recover() }()
		_ = l1.Do(ctx, base+"p", func(context.Context) error { panic("boom") })
	}()
	wantBudgetZero(t, l1, "a panic in Do's fn")
	func() {
		defer func() { _ = recover() }()
		_ = l1.DoMulti(ctx, []string{base + "p1", base + "p2"}, func(context.Context) error { panic("boom") })
	}()
	wantBudgetZero(t, l1, "a panic in DoMulti's fn")

	// TryDo refused: another Locker of the same pool holds the key.
	k, err := l2.Acquire(ctx, base+"t")
	if err != nil {
		t.Fatal(err)
	}
	if ran, err := l1.TryDo(ctx, base+"t", func(context.Context) error { return nil }); ran || err != nil {
		t.Errorf("TryDo of a held key = %v, %v; want false, nil", ran, err)
	}
	// A wait at the server that ends with ctx.
	sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = l1.Acquire(sctx, base+"t")
	scancel()
	if !errors.Is(err, ErrNotAcquired) {
		t.Errorf("Acquire of a held key with a short ctx = %v", err)
	}
	// A DoMulti that holds its first key and waits for its second.
	sctx, scancel = context.WithTimeout(ctx, 300*time.Millisecond)
	err = l1.DoMulti(sctx, []string{base + "a", base + "t"}, func(context.Context) error { return nil })
	scancel()
	if !errors.Is(err, ErrNotAcquired) {
		t.Errorf("DoMulti with its second key held elsewhere = %v", err)
	}
	_ = k.Release(ctx)
	wantBudgetZero(t, l1, "refused and cancelled acquisitions")

	// A lock lost: its session is killed under its holder.
	lost, err := l1.Acquire(ctx, base+"lost")
	if err != nil {
		t.Fatal(err)
	}
	id, err := testdb.HolderOf(ctx, admin, keyfmt.Portable(base+"lost"))
	if err != nil || id == 0 {
		t.Fatalf("holder of the lost key: %d, %v", id, err)
	}
	if _, err := admin.ExecContext(ctx, "KILL CONNECTION ?", id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost.Done():
	// contract: a lost lock is reported within keep-alive + check timeout
	// (docs/guarantees.md); 15 s is generous.
	case <-time.After(15 * time.Second):
		t.Fatal("the loss was not found")
	}
	_ = lost.Release(ctx)
	wantBudgetZero(t, l1, "a lost lock, released")

	// Handoffs among many callers of one key.
	done := make(chan error, 8)
	for range 8 {
		go func() {
			done <- l1.Do(ctx, base+"h", func(context.Context) error { time.Sleep(time.Millisecond); return nil })
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	wantBudgetZero(t, l1, "handoffs")

	// Close while a DoMulti holds its first key and waits for its second
	// (held by l2), and while a single waits for a unit.
	k, err = l2.Acquire(ctx, base+"z")
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 2)
	go func() {
		res <- l1.DoMulti(ctx, []string{base + "y", base + "z"}, func(context.Context) error { return nil })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for budgetUsed(l1) != 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	go func() { res <- l1.Do(ctx, base+"w", func(context.Context) error { return nil }) }()
	time.Sleep(100 * time.Millisecond)
	_ = l1.Close()
	for range 2 {
		if err := <-res; !errors.Is(err, ErrClosed) {
			t.Errorf("after Close: %v", err)
		}
	}
	_ = k.Release(ctx)
	wantBudgetZero(t, l2, "Close mid-DoMulti")
}

// TestReviewBudgetLimitLoweredUnderReservation: a DoMulti of three keys on
// a pool of three reserves all three connections, takes its first key and
// waits at the server for its second, held by another instance. The
// application lowers the pool's limit to two (sql.DB.SetMaxOpenConns, which
// the budget reads as the limit at every take). Once the other instance
// lets go, the DoMulti takes its second key on its second connection and
// then asks database/sql for a third that the pool will never open: it
// waits for itself, holding two locks, until its ctx ends (forever without
// a deadline), and every other acquisition of the pool waits with it. It
// must end at once instead: done, or refused (ErrInvalidArgument) with the
// locks it took released and every unit given back.
func TestReviewBudgetLimitLoweredUnderReservation(t *testing.T) {
	db, admin := reviewPool(t, 3)
	other, _ := reviewPool(t, 2) // another instance
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
	kb, err := lo.Acquire(ctx, base+"b")
	if err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithTimeout(ctx, 20*time.Second)
	defer mcancel()
	res := make(chan error, 1)
	start := time.Now()
	go func() {
		res <- l.DoMulti(mctx, []string{base + "a", base + "b", base + "c"}, func(context.Context) error { return nil })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for db.Stats().InUse != 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := db.Stats().InUse; n != 2 {
		t.Fatalf("%d connections in use, want 2 (a held, b waited for)", n)
	}
	db.SetMaxOpenConns(2)
	released := time.Now()
	_ = kb.Release(ctx)
	err = <-res
	t.Logf("DoMulti of 3 keys, limit lowered from 3 to 2 mid-way: %v after %v (%v after b was released)", err, time.Since(start).Round(time.Millisecond), time.Since(released).Round(time.Millisecond))
	// contract: a DoMulti that cannot get a connection only it could give
	// back ends at once (connBudget): done, or refused. Generous: its ctx
	// allows 20 s; an answer comes in milliseconds, or at a recheck of the
	// limit (recheckEvery) later.
	if err != nil && (!errors.Is(err, ErrInvalidArgument) || time.Since(released) > 10*time.Second) {
		t.Errorf("DoMulti = %v after %v; it waited for a connection only it could give back (want it to end at once: done, or refused)", err, time.Since(released))
	}
	wantBudgetZero(t, l, "a DoMulti under a lowered limit")
	for _, k := range []string{"a", "b", "c"} {
		if id, err := testdb.HolderOf(ctx, admin, keyfmt.Portable(base+k)); err != nil || id != 0 {
			t.Errorf("after the DoMulti: %q held by session %d (%v), want by none", k, id, err)
		}
	}
}

// TestReviewBudgetLimitRaisedWakesNoWaiter: a DoMulti of two keys waits for
// its reservation on a pool of two while a single lock is held. The
// application raises the limit to three: both units are now free, but the
// waiter is granted only at the budget's next take or give, here when the
// single lock goes, however long that is.
func TestReviewBudgetLimitRaisedWakesNoWaiter(t *testing.T) {
	db, _ := reviewPool(t, 2)
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
	res := make(chan error, 1)
	go func() {
		res <- l.DoMulti(ctx, []string{base + "a", base + "b"}, func(context.Context) error { return nil })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !l.budget.waiting(1) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	db.SetMaxOpenConns(3)
	db.SetMaxIdleConns(3)
	select {
	case err := <-res:
		if err != nil {
			t.Error(err)
		}
	// contract: a raised limit grants a waiting DoMulti at its next recheck
	// (connBudget, recheckEvery); 10 s only ends a wait that never does.
	case <-time.After(10 * time.Second):
		t.Errorf("the DoMulti still waits 10 s after the limit was raised to 3 with 2 units free (used %d)", budgetUsed(l))
	}
}

// TestReviewDoMultiStarvesOnHotKey: on a pool of two connections, three
// callers keep one key busy (each Do on it is handed to the next, the
// key's local queue never empties), so one connection is in use and the
// other is free. A DoMulti on that key and one more needs one connection
// more: the busy key's queue already has its own, and the DoMulti would
// queue behind it. But the reservation asks for two units free at once,
// counting the busy key as if it needed one, so the DoMulti never gets it
// while the key stays busy, although a connection is free the whole time.
func TestReviewDoMultiStarvesOnHotKey(t *testing.T) {
	db, _ := reviewPool(t, 2)
	l, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	base := testdb.UniqueName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hot, stopHot := context.WithCancel(ctx)
	defer stopHot()
	hotDone := make(chan struct{})
	var hotErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for hot.Err() == nil {
				err := l.Do(ctx, base+"hot", func(context.Context) error {
					time.Sleep(20 * time.Millisecond)
					return nil
				})
				if err != nil {
					errOnce.Do(func() { hotErr = err })
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(hotDone) }()
	time.Sleep(200 * time.Millisecond)
	mctx, mcancel := context.WithTimeout(ctx, 10*time.Second)
	defer mcancel()
	start := time.Now()
	err = l.DoMulti(mctx, []string{base + "hot", base + "cold"}, func(context.Context) error { return nil })
	took := time.Since(start)
	inUse := db.Stats().InUse
	stopHot()
	<-hotDone
	if hotErr != nil {
		t.Fatalf("the hot key's callers: %v", hotErr)
	}
	t.Logf("DoMulti [hot, cold] on a pool of 2 with hot busy: %v after %v (%d connection(s) in use at the end)", err, took.Round(time.Millisecond), inUse)
	if err != nil {
		t.Errorf("DoMulti = %v; want it to run: it needs one connection more and one was free", err)
	}
}
