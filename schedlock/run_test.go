package schedlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// instance is a Provider on a pool of one connection, whose database clock
// the test sets (SET timestamp), as a separate process would have.
type instance struct {
	p  *Provider
	db *sql.DB
}

// fireTicks makes instances fire job at the same moment every period for
// ticks ticks, and a late instance lateBy after each tick, in database time:
// each instance's clock is frozen at the tick (the late one's at the tick
// plus lateBy) before it fires, so how long the statements take on a busy
// machine does not move any lock_until. The on-time instances fire
// together, the late one after they have all returned. It returns the runs
// per tick and the late instance's runs.
func fireTicks(t *testing.T, instances []instance, late instance, cfg Config, ticks int,
	period, lateBy time.Duration) (perTick []int, lateRuns int) {
	t.Helper()
	perTick = make([]int, ticks)
	t0 := 1_700_000_000.0
	run := func(tick int, in instance, at float64, runs *atomic.Int32) bool {
		setDBTime(t, in.db, at)
		ran, err := in.p.Run(bg, cfg, func(context.Context) error {
			runs.Add(1)
			return nil
		})
		if err != nil {
			t.Errorf("tick %d: %s: %v", tick, in.p.LockedBy(), err)
		}
		return ran
	}
	for tick := range ticks {
		at := t0 + float64(tick)*period.Seconds()
		var runs atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, in := range instances {
			wg.Go(func() {
				<-start
				run(tick, in, at, &runs)
			})
		}
		close(start)
		wg.Wait()
		if run(tick, late, at+lateBy.Seconds(), &runs) {
			lateRuns++
		}
		perTick[tick] = int(runs.Load())
	}
	return perTick, lateRuns
}

func TestThreeInstancesOneRunPerTick(t *testing.T) {
	t.Parallel()
	const (
		ticks  = 5
		period = 400 * time.Millisecond
		lateBy = 150 * time.Millisecond
	)
	for _, tc := range []struct {
		name      string
		atLeast   time.Duration
		wantRuns  int // per tick, counting the late instance; at least this many if !exact
		exact     bool
		wantLates int
	}{
		{"LockAtLeastFor one tick keeps the late instance out", 300 * time.Millisecond, 1, true, 0},
		// The control: without LockAtLeastFor a fast job is unlocked at once,
		// so the late instance runs it again (and so may a same-tick instance
		// that reaches the row after the first has unlocked).
		{"without LockAtLeastFor the late instance runs again", 0, 2, false, ticks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			table := newTable(t, openDB(t))
			var instances []instance
			for i := range 3 {
				db := singleConn(t)
				instances = append(instances, instance{mustNew(t, db, WithTable(table), WithLockedBy(fmt.Sprintf("node-%d", i))), db})
			}
			lateDB := singleConn(t)
			late := instance{mustNew(t, lateDB, WithTable(table), WithLockedBy("node-late")), lateDB}
			cfg := Config{Name: uniqueName(t), LockAtMostFor: 10 * time.Second, LockAtLeastFor: tc.atLeast}
			perTick, lateRuns := fireTicks(t, instances, late, cfg, ticks, period, lateBy)
			for tick, n := range perTick {
				if n != tc.wantRuns && (tc.exact || n < tc.wantRuns) {
					t.Errorf("tick %d: %d runs, want %d", tick, n, tc.wantRuns)
				}
			}
			if lateRuns != tc.wantLates {
				t.Errorf("late instance ran %d times, want %d", lateRuns, tc.wantLates)
			}
			t.Logf("runs per tick %v, late runs %d, took %v", perTick, lateRuns, time.Since(began))
		})
	}
}

func TestCrashedHolderBlocksUntilLockUntil(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := newTable(t, db)
	crashed := mustNew(t, openDB(t), WithTable(table), WithLockedBy("crashed"))
	other := mustNew(t, openDB(t), WithTable(table), WithLockedBy("survivor"))
	cfg := Config{Name: uniqueName(t), LockAtMostFor: time.Second}

	// The holder takes the lock and "crashes": it never unlocks, and its
	// Lease is dropped.
	if _, err := crashed.Lock(bg, cfg); err != nil {
		t.Fatal(err)
	}
	held := readRow(t, db, table, cfg.Name)
	began := time.Now()
	attempts := 0
	for {
		attempts++
		ran, err := other.Run(bg, cfg, func(context.Context) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if ran {
			break
		}
		// contract: a crashed holder's job is free once its lock_until
		// passes (LockAtMostFor, 1 s); 5 s only ends a wait that never does.
		if time.Since(began) > 5*time.Second {
			t.Fatal("the job never became free")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waited := time.Since(began)
	after := readRow(t, db, table, cfg.Name)
	if after.LockedBy != "survivor" {
		t.Errorf("locked_by %q after the survivor ran", after.LockedBy)
	}
	// In database time: the survivor took it no earlier than lock_until.
	if after.LockedAt < held.LockUntil {
		t.Errorf("survivor locked at %s, before the crashed holder's lock_until %s", after.LockedAt, held.LockUntil)
	}
	// contract: the job stays locked until lock_until (LockAtMostFor, 1 s;
	// the database-time check above is the exact one)...
	if waited < 800*time.Millisecond {
		t.Errorf("waited %v for a 1s LockAtMostFor", waited)
	}
	// contract: ...and is free soon after; 3 s (3× the second) only
	// catches a wait far past it.
	if waited > 3*time.Second {
		t.Errorf("waited %v for a 1s LockAtMostFor", waited)
	}
	t.Logf("crashed lock_until %s; survivor locked_at %s after %v and %d attempts", held.LockUntil, after.LockedAt, waited, attempts)
}

func TestRunResults(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := newTable(t, db)
	p := mustNew(t, db, WithTable(table))
	cfg := Config{Name: uniqueName(t), LockAtMostFor: time.Minute}

	t.Run("fn error is returned with ran", func(t *testing.T) {
		boom := errors.New("boom")
		ran, err := p.Run(bg, cfg, func(context.Context) error { return boom })
		if !ran || !errors.Is(err, boom) {
			t.Fatalf("ran %v err %v", ran, err)
		}
	})
	t.Run("panic unlocks then re-panics", func(t *testing.T) {
		func() {
			defer func() {
				if r := recover(); r != "kaboom" {
					t.Fatalf("recovered %v", r)
				}
			}()
			_, _ = p.Run(bg, cfg, func(context.Context) error { panic("kaboom") })
			t.Fatal("Run returned")
		}()
		r := readRow(t, db, table, cfg.Name)
		other := mustNew(t, db, WithTable(table))
		ran, err := other.Run(bg, cfg, func(context.Context) error { return nil })
		if !ran || err != nil {
			t.Fatalf("after the panic another instance: ran %v err %v (row %+v)", ran, err, r)
		}
	})
	t.Run("locked: ran false, nil error; Lock names the holder", func(t *testing.T) {
		holder := mustNew(t, db, WithTable(table), WithLockedBy("the-holder"))
		lease, err := holder.Lock(bg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ran, err := p.Run(bg, cfg, func(context.Context) error { t.Error("ran"); return nil })
		if ran || err != nil {
			t.Errorf("ran %v err %v", ran, err)
		}
		_, err = p.Lock(bg, cfg)
		if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "the-holder") {
			t.Errorf("Lock: %v", err)
		}
		if err := lease.Unlock(bg); err != nil {
			t.Fatal(err)
		}
		if err := lease.Unlock(bg); !errors.Is(err, ErrUnlocked) {
			t.Errorf("second Unlock: %v", err)
		}
		if !errors.Is(lease.Err(), ErrUnlocked) {
			t.Errorf("Err after Unlock: %v", lease.Err())
		}
		select {
		case <-lease.Done():
		default:
			t.Error("Done not closed after Unlock")
		}
		var nilLease *Lease
		if err := nilLease.Unlock(bg); !errors.Is(err, ErrUnlocked) {
			t.Errorf("nil Unlock: %v", err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(bg)
		cancel()
		ran, err := p.Run(ctx, cfg, func(context.Context) error { return nil })
		if ran || !errors.Is(err, context.Canceled) {
			t.Errorf("ran %v err %v", ran, err)
		}
	})
	t.Run("a deleted row is inserted again", func(t *testing.T) {
		if _, err := db.Exec("DELETE FROM `"+table+"` WHERE name = ?", cfg.Name); err != nil {
			t.Fatal(err)
		}
		ran, err := p.Run(bg, cfg, func(context.Context) error { return nil })
		if !ran || err != nil {
			t.Fatalf("ran %v err %v", ran, err)
		}
	})
}

// A job that outlives LockAtMostFor without keep-alive loses its row to
// another instance; the unlock notices and says so instead of staying
// silent (ShedLock's users saw such jobs run twice without a word).
func TestUnlockReportsTakeover(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := newTable(t, db)
	slow := mustNew(t, db, WithTable(table), WithLockedBy("slow"))
	fast := mustNew(t, db, WithTable(table), WithLockedBy("fast"))
	cfg := Config{Name: uniqueName(t), LockAtMostFor: 200 * time.Millisecond}
	ran, err := slow.Run(bg, cfg, func(context.Context) error {
		time.Sleep(300 * time.Millisecond)
		ran, err := fast.Run(bg, Config{Name: cfg.Name, LockAtMostFor: time.Minute, LockAtLeastFor: time.Minute},
			func(context.Context) error { return nil })
		if !ran || err != nil {
			t.Errorf("takeover: ran %v err %v", ran, err)
		}
		return nil
	})
	if !ran || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("ran %v err %v", ran, err)
	}
	if r := readRow(t, db, table, cfg.Name); r.LockedBy != "fast" {
		t.Errorf("the slow instance's unlock touched the new holder's row: %+v", r)
	}
	t.Log(err)
}

// Many goroutines of several instances hammer one name: never two inside.
func TestMutualExclusion(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := newTable(t, db)
	cfg := Config{Name: uniqueName(t), LockAtMostFor: 10 * time.Second}
	var inside, maxInside, runs atomic.Int32
	var wg sync.WaitGroup
	deadline := time.Now().Add(500 * time.Millisecond)
	for i := range 4 {
		p := mustNew(t, db, WithTable(table), WithLockedBy(fmt.Sprintf("node-%d", i)))
		for range 3 {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					_, err := p.Run(bg, cfg, func(context.Context) error {
						n := inside.Add(1)
						if n > maxInside.Load() {
							maxInside.Store(n)
						}
						runs.Add(1)
						time.Sleep(time.Millisecond)
						inside.Add(-1)
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if maxInside.Load() != 1 || runs.Load() == 0 {
		t.Fatalf("max inside %d, runs %d", maxInside.Load(), runs.Load())
	}
	t.Logf("%d runs, never more than one at a time", runs.Load())
}
