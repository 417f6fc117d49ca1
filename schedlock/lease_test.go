package schedlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// A Provider can hold several leases of one job over time: its lock
// statement re-takes its own expired row. The older lease's Extend and
// Unlock must not act on the newer one: they report ErrLeaseLost, leave the
// row as it is, and another instance still finds the job held.
func TestStaleLeaseChangesNothing(t *testing.T) {
	t.Parallel()
	cfg := func(name string) Config { return Config{Name: name, LockAtMostFor: 300 * time.Millisecond} }
	check := func(t *testing.T, a, c *Provider, db *sql.DB, table string, stale *Lease) {
		t.Helper()
		name := stale.Name()
		newer, err := a.Lock(bg, cfg(name))
		if err != nil {
			t.Fatalf("second lease of the same Provider: %v", err)
		}
		held := readRow(t, db, table, name)
		if err := stale.Extend(bg, time.Hour); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("stale lease's Extend: %v, want ErrLeaseLost", err)
		}
		if got := readRow(t, db, table, name); got != held {
			t.Errorf("stale lease's Extend changed the row: %+v, was %+v", got, held)
		}
		if err := stale.Unlock(bg); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("stale lease's Unlock: %v, want ErrLeaseLost", err)
		}
		if got := readRow(t, db, table, name); got != held {
			t.Errorf("stale lease's Unlock changed the row: %+v, was %+v", got, held)
		}
		if _, err := c.Lock(bg, cfg(name)); !errors.Is(err, ErrLocked) {
			t.Errorf("another instance's Lock while the newer lease holds the job: %v, want ErrLocked", err)
		}
		// The newer lease is untouched and still works.
		if err := newer.Extend(bg, 300*time.Millisecond); err != nil {
			t.Errorf("newer lease's Extend: %v", err)
		}
		if err := newer.Unlock(bg); err != nil {
			t.Errorf("newer lease's Unlock: %v", err)
		}
		t.Logf("newer lease's row %+v; the stale lease changed nothing", held)
	}

	// The database clock is frozen and moved by hand past the first
	// lease's lock_until: no timing is involved.
	t.Run("frozen clock", func(t *testing.T) {
		t.Parallel()
		db := singleConn(t)
		table := newTable(t, db)
		a := mustNew(t, db, WithTable(table), WithLockedBy("a"))
		c := mustNew(t, db, WithTable(table), WithLockedBy("c"))
		name := uniqueName(t)
		setDBTime(t, db, 1_700_000_000.25)
		stale, err := a.Lock(bg, cfg(name))
		if err != nil {
			t.Fatal(err)
		}
		setDBTime(t, db, 1_700_000_000.65)
		check(t, a, c, db, table, stale)
	})
	// The live clock, as a long job would see it: the first lease runs out
	// while its holder sleeps (sleeps are never shorter than asked).
	t.Run("live clock", func(t *testing.T) {
		t.Parallel()
		db := openDB(t)
		table := newTable(t, db)
		a := mustNew(t, db, WithTable(table), WithLockedBy("a"))
		c := mustNew(t, openDB(t), WithTable(table), WithLockedBy("c"))
		name := uniqueName(t)
		stale, err := a.Lock(bg, cfg(name))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		check(t, a, c, db, table, stale)
	})
}

// An Extend racing Unlock must not land after Unlock: once Unlock returned,
// the row keeps the unlock's lock_until (here locked_at + LockAtLeastFor),
// not now + LockAtMostFor from an extension that was still on its way.
// 200 leases, each with an Extend loop (or a keep-alive extending every
// millisecond) running while Unlock is called.
func TestExtendAfterUnlockNeverLands(t *testing.T) {
	t.Parallel()
	const leases = 200
	const atMost, atLeast = 20 * time.Second, 5 * time.Second
	for _, mode := range []string{"Extend loop", "keep-alive"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			db := openDB(t)
			table := newTable(t, db)
			p := mustNew(t, db, WithTable(table))
			revived, extends := 0, 0
			for i := range leases {
				cfg := Config{Name: fmt.Sprintf("job-%d", i), LockAtMostFor: atMost, LockAtLeastFor: atLeast}
				if mode == "keep-alive" {
					cfg.KeepAlive = time.Millisecond
				}
				lease, err := p.Lock(bg, cfg)
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				n := 0
				if mode == "Extend loop" {
					wg.Go(func() {
						for {
							err := lease.Extend(bg, atMost)
							if errors.Is(err, ErrUnlocked) {
								return
							}
							if err != nil {
								t.Errorf("lease %d: Extend: %v", i, err)
								return
							}
							n++
						}
					})
				}
				time.Sleep(time.Duration(i%4) * time.Millisecond)
				if err := lease.Unlock(bg); err != nil {
					t.Fatalf("lease %d: Unlock: %v", i, err)
				}
				after := readRow(t, db, table, cfg.Name)
				wg.Wait()
				extends += n
				// Statements still on their way would land within a few
				// milliseconds; look again after a while.
				time.Sleep(5 * time.Millisecond)
				var late bool
				if err := db.QueryRow("SELECT lock_until > TIMESTAMPADD(MICROSECOND, ?, locked_at) FROM `"+table+"` WHERE name = ?",
					(atLeast + time.Millisecond).Microseconds(), cfg.Name).Scan(&late); err != nil {
					t.Fatal(err)
				}
				if now := readRow(t, db, table, cfg.Name); late || now != after {
					revived++
					if revived <= 3 {
						t.Errorf("lease %d: after Unlock the row was %+v, later %+v: an extension landed after Unlock", i, after, now)
					}
				}
			}
			if revived != 0 {
				t.Errorf("%d of %d leases revived after Unlock", revived, leases)
			}
			t.Logf("%s: %d leases, %d revived after Unlock (Extend calls answered before it: %d)", mode, leases, revived, extends)
		})
	}
}

// An extension held up at the server (another transaction holds the row)
// outlives Extend's ctx: Extend returns, but the statement is not cut off,
// and Unlock waits for its answer before it unlocks; the row then has the
// unlock's lock_until. With an unlock timeout shorter than the hold-up,
// Unlock cuts the extension off, still unlocks, and says the extension may
// land after it.
func TestUnlockWaitsForHeldUpExtension(t *testing.T) {
	t.Parallel()
	const atMost, atLeast = 20 * time.Second, 5 * time.Second
	hold := func(t *testing.T, db *sql.DB, table, name string) *sql.Tx {
		t.Helper()
		tx, err := db.BeginTx(bg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		var n int
		if err := tx.QueryRow("SELECT COUNT(*) FROM `"+table+"` WHERE name = ? FOR UPDATE", name).Scan(&n); err != nil || n != 1 {
			t.Fatalf("hold the row: %d rows, %v", n, err)
		}
		return tx
	}
	extendHeldUp := func(t *testing.T, lease *Lease) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
		defer cancel()
		err := lease.Extend(ctx, atMost)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Extend while the row is held: %v, want DeadlineExceeded", err)
		}
		checkMessage(t, err)
	}

	t.Run("waits", func(t *testing.T) {
		t.Parallel()
		db := openDB(t)
		table := newTable(t, db)
		p := mustNew(t, db, WithTable(table))
		name := uniqueName(t)
		lease, err := p.Lock(bg, Config{Name: name, LockAtMostFor: atMost, LockAtLeastFor: atLeast})
		if err != nil {
			t.Fatal(err)
		}
		tx := hold(t, openDB(t), table, name)
		extendHeldUp(t, lease)
		unlocked, again := make(chan error, 1), make(chan error, 1)
		go func() { unlocked <- lease.Unlock(bg) }()
		go func() {
			for !errors.Is(lease.Err(), ErrUnlocked) { // the first Unlock has begun
				time.Sleep(time.Millisecond)
			}
			again <- lease.Unlock(bg)
		}()
		// The extension cannot be answered while tx holds the row, and
		// Unlock (timeout 5 s) must not unlock before it is; nor may a
		// second Unlock return before the first.
		select {
		case err := <-unlocked:
			t.Fatalf("Unlock returned (%v) while its extension was unanswered", err)
		case err := <-again:
			t.Fatalf("a second Unlock returned (%v) while the first waited", err)
		case <-time.After(300 * time.Millisecond):
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-unlocked; err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if err := <-again; !errors.Is(err, ErrUnlocked) {
			t.Fatalf("second Unlock: %v, want ErrUnlocked", err)
		}
		var atLeastEnd bool
		if err := db.QueryRow("SELECT lock_until <= TIMESTAMPADD(MICROSECOND, ?, locked_at) FROM `"+table+"` WHERE name = ?",
			(atLeast + time.Millisecond).Microseconds(), name).Scan(&atLeastEnd); err != nil {
			t.Fatal(err)
		}
		if !atLeastEnd {
			t.Errorf("row %+v: the extension landed after the unlock", readRow(t, db, table, name))
		}
		t.Logf("row after Unlock: %+v", readRow(t, db, table, name))
	})
	t.Run("cuts off after the unlock timeout", func(t *testing.T) {
		t.Parallel()
		db := openDB(t)
		table := newTable(t, db)
		const unlockTimeout = time.Second
		p := mustNew(t, db, WithTable(table), WithUnlockTimeout(unlockTimeout))
		name := uniqueName(t)
		lease, err := p.Lock(bg, Config{Name: name, LockAtMostFor: atMost, LockAtLeastFor: atLeast})
		if err != nil {
			t.Fatal(err)
		}
		tx := hold(t, openDB(t), table, name)
		extendHeldUp(t, lease)
		began := time.Now()
		err = lease.Unlock(bg) // the unlock is held up too, and times out
		took := time.Since(began)
		if err == nil || !strings.Contains(err.Error(), "was cut off") || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Unlock: %v; want its timeout and the cut-off extension", err)
		}
		checkMessage(t, err)
		// contract: one deadline for the wait and the statement
		// (WithUnlockTimeout): a timeout for each would take at least
		// twice the unlock timeout, the bound that tells them apart.
		if took >= 2*unlockTimeout {
			t.Errorf("Unlock took %v with an unlock timeout of %v", took, unlockTimeout)
		}
		t.Logf("Unlock returned after %v (unlock timeout %v)", took.Round(time.Millisecond), unlockTimeout)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		t.Log(err)
	})
	// The keep-alive does not cut its extensions off either; while they are
	// held up, the lease is still found lost by its local expiry timer.
	t.Run("keep-alive held up", func(t *testing.T) {
		t.Parallel()
		db := openDB(t)
		table := newTable(t, db)
		p := mustNew(t, db, WithTable(table), WithUnlockTimeout(300*time.Millisecond))
		name := uniqueName(t)
		cfg := Config{Name: name, LockAtMostFor: 400 * time.Millisecond, KeepAlive: 100 * time.Millisecond}
		lease, err := p.Lock(bg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		tx := hold(t, openDB(t), table, name)
		began := time.Now()
		// contract: the lease's local expiry timer finds it lost at
		// LockAtMostFor (400 ms) although its extensions are held up;
		// 5 s, 12× that, only catches a lease never found lost.
		select {
		case <-lease.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the lease was not found lost while its extensions were held up")
		}
		if took := time.Since(began); !errors.Is(lease.Err(), ErrLeaseLost) || took > 5*time.Second {
			t.Fatalf("after %v: Err %v", took, lease.Err())
		}
		err = lease.Unlock(bg)
		if err == nil || !strings.Contains(err.Error(), "was cut off") {
			t.Fatalf("Unlock: %v; want the cut-off extension", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		t.Logf("lost: %v; Unlock: %v", lease.Err(), err)
	})
}

// Unlock is idempotent: of concurrent calls one unlocks and the others
// return ErrUnlocked once it has; a later call sends nothing (a row moved
// by hand after the unlock stays as it is); after a lease found lost, a
// later call returns the same loss.
func TestUnlockIdempotent(t *testing.T) {
	t.Parallel()
	t.Run("concurrent and later calls", func(t *testing.T) {
		t.Parallel()
		db := openDB(t)
		table := newTable(t, db)
		p := mustNew(t, db, WithTable(table))
		name := uniqueName(t)
		lease, err := p.Lock(bg, Config{Name: name, LockAtMostFor: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		const callers = 8
		start := make(chan struct{})
		errs := make(chan error, callers)
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				<-start
				errs <- lease.Unlock(bg)
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		unlocked, again := 0, 0
		for err := range errs {
			switch {
			case err == nil:
				unlocked++
			case errors.Is(err, ErrUnlocked):
				again++
			default:
				t.Errorf("Unlock: %v", err)
			}
		}
		if unlocked != 1 || again != callers-1 {
			t.Errorf("%d Unlocks returned nil and %d ErrUnlocked; want 1 and %d", unlocked, again, callers-1)
		}
		// Every call returned after the unlock: the row is free now.
		var free bool
		if err := db.QueryRow("SELECT lock_until <= NOW(3) FROM `"+table+"` WHERE name = ?", name).Scan(&free); err != nil || !free {
			t.Fatalf("row %+v after every Unlock returned: free %v, %v", readRow(t, db, table, name), free, err)
		}
		// Lock the row again by hand for this lease (same locked_by and
		// locked_at): an unlock statement, if one were sent, would free it.
		if _, err := db.Exec("UPDATE `"+table+"` SET lock_until = TIMESTAMPADD(HOUR, 1, NOW(3)) WHERE name = ?", name); err != nil {
			t.Fatal(err)
		}
		before := readRow(t, db, table, name)
		if err := lease.Unlock(bg); !errors.Is(err, ErrUnlocked) {
			t.Errorf("Unlock after Unlock: %v, want ErrUnlocked", err)
		}
		if got := readRow(t, db, table, name); got != before {
			t.Errorf("a later Unlock changed the row: %+v, was %+v", got, before)
		}
		if err := lease.Err(); !errors.Is(err, ErrUnlocked) {
			t.Errorf("Err: %v, want ErrUnlocked", err)
		}
	})
	// The database clock is frozen and moved by hand past lock_until.
	t.Run("after a loss", func(t *testing.T) {
		t.Parallel()
		db := singleConn(t)
		table := newTable(t, db)
		p := mustNew(t, db, WithTable(table))
		setDBTime(t, db, 1_700_000_000.25)
		lease, err := p.Lock(bg, Config{Name: uniqueName(t), LockAtMostFor: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		setDBTime(t, db, 1_700_000_000.65)
		first := lease.Unlock(bg)
		if !errors.Is(first, ErrLeaseLost) {
			t.Fatalf("Unlock of a lease that ran out: %v, want ErrLeaseLost", first)
		}
		for range 2 {
			if err := lease.Unlock(bg); err != first {
				t.Errorf("Unlock after a loss: %v, want the first Unlock's %v", err, first)
			}
		}
		if err := lease.Err(); err != first {
			t.Errorf("Err after a loss: %v, want %v", err, first)
		}
		if err := lease.Extend(bg, time.Second); !errors.Is(err, ErrUnlocked) {
			t.Errorf("Extend after Unlock: %v, want ErrUnlocked", err)
		}
	})
}
