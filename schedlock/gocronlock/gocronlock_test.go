package gocronlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-co-op/gocron/v2"
	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
	"github.com/namedlock/mysql/schedlock"
)

const ticks = 4

// Three schedulers (three instances, each with its own pool and Provider)
// fire a job every second; with the lease locker each tick runs once. The
// job has no name, so gocron's key is the closure's full name, over 64
// characters: LeaseName maps it.
func TestLeaseLockerOncePerTick(t *testing.T) {
	t.Parallel()
	srv := testdb.RequireReal(t)
	setup := testdb.OpenDB(t, srv.DSN)
	table := uniqueName(t)
	if err := mustProvider(t, setup, schedlock.WithTable(table)).CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = setup.Exec("DROP TABLE IF EXISTS `" + table + "`") })

	var lockers []gocron.Locker
	var counting []*countingLocker
	for i := range 3 {
		p := mustProvider(t, testdb.OpenDB(t, srv.DSN), schedlock.WithTable(table),
			schedlock.WithLockedBy(fmt.Sprintf("instance-%d", i)))
		c := &countingLocker{Locker: mustLease(t, p, LeaseOptions{LockAtMostFor: 10 * time.Second, LockAtLeastFor: 500 * time.Millisecond})}
		counting = append(counting, c)
		lockers = append(lockers, c)
	}
	began := time.Now()
	runs := runSchedulers(t, lockers, "", ticks, nil)
	checkOncePerTick(t, runs, ticks-1)
	refused := 0
	for _, c := range counting {
		for _, err := range c.refused {
			if !errors.Is(err, schedlock.ErrLocked) {
				t.Errorf("Lock refused with %v", err)
			}
			refused++
		}
	}
	if refused < 2*(ticks-1) {
		t.Errorf("%d refused locks for %d ticks", refused, len(runs))
	}
	var names []string
	rows, err := setup.Query("SELECT name FROM `" + table + "`")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || utf8.RuneCountInString(names[0]) != 64 || !strings.Contains(names[0], "#") {
		t.Errorf("rows %q, want one 64-character mapped name", names)
	}
	t.Logf("runs per tick %v, %d refused locks, row %q, took %v", runs, refused, names, time.Since(began))
}

// The same with the named-lock locker. The job runs longer than the skew
// between the schedulers' ticks (they are in one process: milliseconds), so
// the lock, held while it runs, covers each tick.
func TestNamedLockerOncePerTick(t *testing.T) {
	t.Parallel()
	srv := testdb.RequireReal(t)
	namedOncePerTick(t, srv.DSN)
}

// TestNamedLockerOncePerTickSlowTry: on TiDB, for a user without the
// privileges the fast try needs (on mysql.advisory_locks), TryAcquire waits
// 1 s for a held lock and would get it when the first instance's 300 ms run
// ends; the adapter skips such a late try, and the job still runs once per
// tick.
func TestNamedLockerOncePerTickSlowTry(t *testing.T) {
	t.Parallel()
	srv := testdb.RequireReal(t)
	if !srv.Flavor.TryWaits() {
		t.Skipf("%s: only a server whose GET_LOCK(name, 0) waits (TiDB) has slow tries", srv.Name)
	}
	admin := testdb.OpenDB(t, srv.DSN)
	cfg, err := mysql.ParseDSN(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	user := "nl_noprobe"
	for _, q := range []string{
		"CREATE USER IF NOT EXISTS '" + user + "'@'%'",
		"GRANT ALL PRIVILEGES ON `" + cfg.DBName + "`.* TO '" + user + "'@'%'",
	} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cfg.User, cfg.Passwd = user, ""
	var n int
	err = testdb.OpenDB(t, cfg.FormatDSN()).QueryRow("SELECT COUNT(*) FROM mysql.advisory_locks").Scan(&n)
	if !flavor.IsProbeRefused(err) {
		t.Fatalf("%s reading mysql.advisory_locks: %v, want a refusal (the fast try must be unavailable to it)", user, err)
	}
	namedOncePerTick(t, cfg.FormatDSN())
}

// namedOncePerTick: three schedulers on the named-lock adapter, each with
// its own lock pool on dsn, run a 300 ms job once per tick.
func namedOncePerTick(t *testing.T, dsn string) {
	var lockers []gocron.Locker
	for range 3 {
		db, err := pool.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		l := mustLocker(t, db)
		t.Cleanup(func() {
			if err := l.Close(); err != nil {
				t.Error(err)
			}
			_ = db.Close()
		})
		lockers = append(lockers, mustNamed(t, l))
	}
	began := time.Now()
	runs := runSchedulers(t, lockers, testdb.UniqueName(t), ticks, func(string) {
		time.Sleep(300 * time.Millisecond)
	})
	checkOncePerTick(t, runs, ticks-1)
	t.Logf("runs per tick %v, took %v", runs, time.Since(began))
}

// Direct use: Lock, a refused Lock, Unlock, for both adapters.
func TestAdapters(t *testing.T) {
	t.Parallel()
	srv := testdb.RequireReal(t)
	ctx := context.Background()

	t.Run("lease", func(t *testing.T) {
		db := testdb.OpenDB(t, srv.DSN)
		table := uniqueName(t)
		a := mustProvider(t, db, schedlock.WithTable(table), schedlock.WithLockedBy("a"))
		if err := a.CreateTable(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS `" + table + "`") })
		b := mustProvider(t, db, schedlock.WithTable(table), schedlock.WithLockedBy("b"))
		la, lb := mustLease(t, a, LeaseOptions{LockAtMostFor: time.Minute}), mustLease(t, b, LeaseOptions{LockAtMostFor: time.Minute})
		lk, err := la.Lock(ctx, "report")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lb.Lock(ctx, "report"); !errors.Is(err, schedlock.ErrLocked) {
			t.Fatalf("second Lock: %v", err)
		}
		// gocron unlocks with the job's context, cancelled at shutdown.
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if err := lk.Unlock(cancelled); err != nil {
			t.Fatal(err)
		}
		lk, err = lb.Lock(ctx, "report")
		if err != nil {
			t.Fatalf("Lock after Unlock: %v", err)
		}
		// The same Locker refuses a second run while the first is not
		// unlocked, even once its lease has run out.
		short := mustLease(t, a, LeaseOptions{LockAtMostFor: 50 * time.Millisecond})
		first, err := short.Lock(ctx, "nightly")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if _, err := short.Lock(ctx, "nightly"); !errors.Is(err, schedlock.ErrLocked) || !strings.Contains(err.Error(), "previous run") {
			t.Fatalf("Lock while this Locker's previous run goes on: %v", err)
		}
		// The first run's lease ran out: its Unlock says so and changes
		// nothing, and still ends the run for the Locker.
		if err := first.Unlock(ctx); !errors.Is(err, schedlock.ErrLeaseLost) {
			t.Fatalf("Unlock of a run whose lease ran out: %v, want ErrLeaseLost", err)
		}
		second, err := short.Lock(ctx, "nightly")
		if err != nil {
			t.Fatalf("Lock after the previous run's Unlock: %v", err)
		}
		if err := second.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// With KeepAlive a run outlives LockAtMostFor and keeps others out.
		kept := mustLease(t, a, LeaseOptions{LockAtMostFor: time.Second, KeepAlive: 100 * time.Millisecond})
		long, err := kept.Lock(ctx, "weekly")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		if _, err := mustLease(t, b, LeaseOptions{LockAtMostFor: time.Second}).Lock(ctx, "weekly"); !errors.Is(err, schedlock.ErrLocked) {
			t.Fatalf("another instance's Lock 1.5 s into a kept-alive run with LockAtMostFor 1s: %v", err)
		}
		if err := long.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); !errors.Is(err, schedlock.ErrUnlocked) {
			t.Fatalf("second Unlock: %v", err)
		}
	})
	t.Run("named", func(t *testing.T) {
		var lockers []gocron.Locker
		for range 2 {
			db, err := pool.Open(srv.DSN)
			if err != nil {
				t.Fatal(err)
			}
			l := mustLocker(t, db)
			t.Cleanup(func() { _ = l.Close(); _ = db.Close() })
			lockers = append(lockers, mustNamed(t, l))
		}
		key := testdb.UniqueName(t)
		lk, err := lockers[0].Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lockers[1].Lock(ctx, key); !errors.Is(err, namedlock.ErrNotAcquired) {
			t.Fatalf("second Lock: %v", err)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if err := lk.Unlock(cancelled); err != nil {
			t.Fatal(err)
		}
		lk, err = lockers[1].Lock(ctx, key)
		if err != nil {
			t.Fatalf("Lock after Unlock: %v", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// The named-lock adapter on Lockers with fencing: every Lock mints a token
// (the fence row moves on once per holder), and exclusion is unchanged.
func TestNamedLockerFenced(t *testing.T) {
	t.Parallel()
	srv := testdb.RequireReal(t)
	ctx := context.Background()
	app := testdb.OpenDB(t, srv.DSN)
	fence := uniqueName(t)
	if err := namedlock.CreateFenceTable(ctx, app, fence); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = app.Exec("DROP TABLE IF EXISTS `" + fence + "`") })
	var lockers []gocron.Locker
	for range 2 {
		db, err := pool.Open(srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		l := mustLocker(t, db, namedlock.WithFencing(app, fence))
		t.Cleanup(func() { _ = l.Close(); _ = db.Close() })
		lockers = append(lockers, mustNamed(t, l))
	}
	job := testdb.UniqueName(t)
	lk, err := lockers[0].Lock(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockers[1].Lock(ctx, job); !errors.Is(err, namedlock.ErrNotAcquired) {
		t.Fatalf("second Lock: %v", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk, err = lockers[1].Lock(ctx, job)
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var rows int
	var token uint64
	name := keyfmt.Portable(keyfmt.Key(NamedKeyPrefix, job))
	if err := app.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(MAX(token), 0) FROM `"+fence+"` WHERE name = ?", name).Scan(&rows, &token); err != nil {
		t.Fatal(err)
	}
	// Two holders, each from the server: two blocks minted.
	if rows != 1 || token < 2 {
		t.Errorf("fence row of %q: %d rows, token %d; want one row moved on by both holders", name, rows, token)
	}
}

func TestLeaseName(t *testing.T) {
	t.Parallel()
	short := strings.Repeat("é", 64)
	if LeaseName(short) != short || LeaseName("report") != "report" {
		t.Error("names of up to 64 characters must stay as they are")
	}
	long1 := "github.com/acme/service/internal/jobs.(*Runner).NightlyReport-fm"
	long2 := long1 + "2"
	long1 += "1"
	n1, n2 := LeaseName(long1), LeaseName(long2)
	for _, n := range []string{n1, n2, LeaseName(strings.Repeat("ü", 100)), LeaseName(strings.Repeat("\xff", 80))} {
		if c := utf8.RuneCountInString(n); c != 64 || !utf8.ValidString(n) {
			t.Errorf("%q: %d characters", n, c)
		}
		cfg := schedlock.Config{Name: n, LockAtMostFor: time.Second}
		if err := cfg.Validate(); err != nil {
			t.Error(err)
		}
	}
	if n1 == n2 || n1 != LeaseName(long1) || !strings.HasPrefix(n1, long1[:43]) {
		t.Errorf("%q %q", n1, n2)
	}
	t.Logf("%s -> %s", long1, n1)
}

func TestConstructorErrors(t *testing.T) {
	t.Parallel()
	p := mustProvider(t, &sql.DB{})
	for _, tc := range []struct {
		name string
		f    func() (gocron.Locker, error)
		is   error
		want string
	}{
		{"nil provider", func() (gocron.Locker, error) { return NewLeaseLocker(nil, LeaseOptions{LockAtMostFor: time.Second}) },
			schedlock.ErrInvalidArgument, "schedlock: invalid argument: gocronlock: NewLeaseLocker: nil *schedlock.Provider"},
		{"zero options", func() (gocron.Locker, error) { return NewLeaseLocker(p, LeaseOptions{}) },
			schedlock.ErrInvalidConfig, "schedlock: invalid configuration: gocronlock: NewLeaseLocker: LeaseOptions.LockAtMostFor must be at least 1ms, got 0s"},
		{"at least > most (swapped)", func() (gocron.Locker, error) {
			return NewLeaseLocker(p, LeaseOptions{LockAtMostFor: time.Second, LockAtLeastFor: time.Minute})
		},
			schedlock.ErrInvalidConfig, "schedlock: invalid configuration: gocronlock: NewLeaseLocker: LeaseOptions.LockAtLeastFor (1m0s) must not exceed LockAtMostFor (1s)"},
		{"negative at least", func() (gocron.Locker, error) {
			return NewLeaseLocker(p, LeaseOptions{LockAtMostFor: time.Second, LockAtLeastFor: -1})
		},
			schedlock.ErrInvalidConfig, "schedlock: invalid configuration: gocronlock: NewLeaseLocker: LeaseOptions.LockAtLeastFor must not be negative, got -1ns"},
		{"negative keep-alive", func() (gocron.Locker, error) {
			return NewLeaseLocker(p, LeaseOptions{LockAtMostFor: time.Second, KeepAlive: -1})
		},
			schedlock.ErrInvalidConfig, "schedlock: invalid configuration: gocronlock: NewLeaseLocker: LeaseOptions.KeepAlive must not be negative, got -1ns"},
		{"keep-alive not shorter", func() (gocron.Locker, error) {
			return NewLeaseLocker(p, LeaseOptions{LockAtMostFor: time.Second, KeepAlive: time.Second})
		},
			schedlock.ErrInvalidConfig, "schedlock: invalid configuration: gocronlock: NewLeaseLocker: LeaseOptions.KeepAlive (1s) must be shorter than LockAtMostFor (1s)"},
		{"nil named locker", func() (gocron.Locker, error) { return NewNamedLocker(nil) },
			namedlock.ErrInvalidArgument, "namedlock: invalid argument: gocronlock: NewNamedLocker: nil *namedlock.Locker"},
	} {
		l, err := tc.f()
		if l != nil || !errors.Is(err, tc.is) || err.Error() != tc.want {
			t.Errorf("%s: %v, %v; want nil, %q", tc.name, l, err, tc.want)
		}
	}
	// In range, including LockAtLeastFor equal to LockAtMostFor.
	for _, o := range []LeaseOptions{
		{LockAtMostFor: time.Millisecond, LockAtLeastFor: time.Millisecond},
		{LockAtMostFor: time.Second, KeepAlive: time.Second / 3},
	} {
		if l, err := NewLeaseLocker(p, o); l == nil || err != nil {
			t.Errorf("%+v: %v, %v", o, l, err)
		}
	}
}
