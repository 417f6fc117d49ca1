package schedlock

import (
	"database/sql"
	"errors"
	"fmt"
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
		a := New(db, WithTable(table), WithLockedBy("a"))
		c := New(db, WithTable(table), WithLockedBy("c"))
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
		a := New(db, WithTable(table), WithLockedBy("a"))
		c := New(openDB(t), WithTable(table), WithLockedBy("c"))
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
			p := New(db, WithTable(table))
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
