package schedlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A job three times longer than LockAtMostFor keeps its lock with
// KeepAlive; another instance polling meanwhile never runs it.
func TestKeepAliveExtendsLongJob(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := newTable(t, db)
	long := mustNew(t, db, WithTable(table), WithLockedBy("long"))
	poller := mustNew(t, openDB(t), WithTable(table), WithLockedBy("poller"))
	name := uniqueName(t)
	// The job runs more than twice LockAtMostFor, so only extensions keep the
	// poller out; 750 ms of slack per extension survives a loaded -race run.
	cfg := Config{Name: name, LockAtMostFor: 900 * time.Millisecond, KeepAlive: 150 * time.Millisecond}

	stop := make(chan struct{})
	started := make(chan struct{}) // the long job runs: the poller starts
	var polls, stolen atomic.Int32
	var running atomic.Bool // the long job's fn runs
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-stop:
			return
		case <-started:
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			polls.Add(1)
			_, err := poller.Run(bg, Config{Name: name, LockAtMostFor: time.Second}, func(context.Context) error {
				if running.Load() { // not once the long job has returned
					stolen.Add(1)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}
	})
	began := time.Now()
	ran, err := long.Run(bg, cfg, func(ctx context.Context) error {
		running.Store(true)
		defer running.Store(false)
		close(started)
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(2 * time.Second):
			return nil
		}
	})
	close(stop)
	wg.Wait()
	if !ran || err != nil {
		t.Fatalf("ran %v err %v", ran, err)
	}
	if stolen.Load() != 0 {
		t.Fatalf("the poller ran the job %d times while it ran", stolen.Load())
	}
	t.Logf("2s job with LockAtMostFor 900ms, KeepAlive 150ms: %d polls, none ran; took %v", polls.Load(), time.Since(began))
	if ran, err := poller.Run(bg, cfg, func(context.Context) error { return nil }); !ran || err != nil {
		t.Fatalf("after the long job: ran %v err %v", ran, err)
	}
}

// When the keep-alive finds the row held by someone else, fn's context is
// cancelled with ErrLeaseLost as its cause, Run reports it, and the unlock
// leaves the new holder's row alone.
func TestKeepAliveLostCancelsJob(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := newTable(t, db)
	p := mustNew(t, db, WithTable(table), WithLockedBy("victim"))
	name := uniqueName(t)
	cfg := Config{Name: name, LockAtMostFor: 2 * time.Second, KeepAlive: 50 * time.Millisecond}
	var cause error
	var noticed time.Duration
	ran, err := p.Run(bg, cfg, func(ctx context.Context) error {
		time.Sleep(100 * time.Millisecond)
		if _, err := db.Exec("UPDATE `"+table+"` SET locked_by = 'thief', "+
			"lock_until = UTC_TIMESTAMP(3) + INTERVAL 1 HOUR WHERE name = ?", name); err != nil {
			t.Error(err)
		}
		stolenAt := time.Now()
		select {
		case <-ctx.Done():
			noticed = time.Since(stolenAt)
			cause = context.Cause(ctx)
			return ctx.Err()
		case <-time.After(3 * time.Second):
			return errors.New("never cancelled")
		}
	})
	if !ran || !errors.Is(err, ErrLeaseLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("ran %v err %v", ran, err)
	}
	if strings.ContainsAny(err.Error(), "\r\n") {
		t.Errorf("Run's error spans lines: %q", err)
	}
	if !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("cause %v", cause)
	}
	// contract: the keep-alive finds the lease lost at its next extension,
	// every KeepAlive (Config.KeepAlive); 500 ms is 10× the 50 ms.
	if noticed > 500*time.Millisecond {
		t.Errorf("noticed the theft after %v with KeepAlive 50ms", noticed)
	}
	if r := readRow(t, db, table, name); r.LockedBy != "thief" {
		t.Errorf("row after unlock: %+v", r)
	}
	t.Logf("noticed after %v: %v", noticed, cause)
}

// A keep-alive that cannot reach the database does not call the lease lost
// on the first failure, but does once lock_until may have passed.
func TestKeepAliveUncertainBecomesLost(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := newTable(t, db)
	own := openDB(t)
	p := mustNew(t, own, WithTable(table), WithUnlockTimeout(500*time.Millisecond))
	cfg := Config{Name: uniqueName(t), LockAtMostFor: 400 * time.Millisecond, KeepAlive: 100 * time.Millisecond}
	lease, err := p.Lock(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_ = own.Close() // every extension now fails
	// contract: a keep-alive that cannot reach the database calls the
	// lease lost once lock_until may have passed (LockAtMostFor, 400 ms);
	// 2 s is 5× that.
	select {
	case <-lease.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease never reported lost")
	}
	took := time.Since(began)
	err = lease.Err()
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "database is closed") {
		t.Fatalf("Err %v", err)
	}
	checkMessage(t, err)
	// contract: ...and not before: lock_until, set when Lock ran just
	// before began, may not have passed earlier.
	if took < 300*time.Millisecond {
		t.Errorf("lost after %v: before LockAtMostFor 400ms", took)
	}
	if err := lease.Unlock(bg); err == nil || errors.Is(err, ErrUnlocked) {
		t.Errorf("Unlock on a closed pool: %v", err)
	}
	t.Logf("lost after %v: %v", took, err)
}

// Unlock stops the keep-alive goroutine and waits for it (goleak checks at
// the end of the package); calling it while an extension is in flight is
// safe.
func TestUnlockStopsKeepAlive(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := newTable(t, db)
	p := mustNew(t, db, WithTable(table))
	for i := range 20 {
		// Extensions every millisecond, so that Unlock often meets one in
		// flight; a lease long enough that a loaded machine never loses it.
		lease, err := p.Lock(bg, Config{Name: uniqueName(t), LockAtMostFor: 5 * time.Second,
			KeepAlive: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		if err := lease.Unlock(bg); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(lease.Err(), ErrUnlocked) {
			t.Fatalf("Err after Unlock: %v", lease.Err())
		}
	}
}
