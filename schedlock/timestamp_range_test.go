package schedlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TIMESTAMP ends at 2038-01-19 03:14:07.999 UTC (issue 15). A lease whose
// lock_until would pass it is refused with ErrLeaseOutOfRange, and nothing
// is written: ShedLock's INSERT IGNORE would store a zero lock_until (with
// a warning), and the next instance would take the job while its holder
// still runs it.

// year is 365 days, as in "a one-year lease".
const year = 365 * 24 * time.Hour

// endOfTimestamp is the last second a TIMESTAMP column holds, in Unix time.
const endOfTimestamp = 1<<31 - 1

// TestLeasePastTimestampRange: instance a takes a job with a lease that ends
// past 2038; instance b, with one minute, tries while a would hold it. b
// never takes a job that a holds: a's lease is refused. The end is the
// server's: the same one-year lease is refused when the server's clock says
// 2037 and taken when it says today; and it is the session zone's (the
// server converts lock_until from it): a lease that fits at +00:00 does not
// at -05:00.
func TestLeasePastTimestampRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		params []string // the server clock and zone of both instances' sessions
		atMost time.Duration
		fits   bool
	}{
		{"15 years from today", nil, 15 * year, false},
		{"one year from today", nil, year, true},
		{"one year from 2037-06-07", []string{"timestamp=2128000000"}, year, false},
		{"six months from 2037-06-07", []string{"timestamp=2128000000"}, year / 2, true},
		{"6 h before the end, +00:00", []string{fmt.Sprintf("timestamp=%d", endOfTimestamp-8*3600), "time_zone='+00:00'"}, 6 * time.Hour, true},
		{"6 h before the end, -05:00", []string{fmt.Sprintf("timestamp=%d", endOfTimestamp-8*3600), "time_zone='-05:00'"}, 6 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbA, dbB := openDB(t, tc.params...), openDB(t, tc.params...)
			table := newTable(t, dbA)
			a := mustNew(t, dbA, WithTable(table), WithLockedBy("instance-a"))
			b := mustNew(t, dbB, WithTable(table), WithLockedBy("instance-b"))
			name := "report"
			var now string
			if err := dbA.QueryRow("SELECT CAST(UTC_TIMESTAMP(3) AS CHAR)").Scan(&now); err != nil {
				t.Fatal(err)
			}

			la, errA := a.Lock(bg, Config{Name: name, LockAtMostFor: tc.atMost})
			var until string
			_ = dbA.QueryRow("SELECT CAST(lock_until AS CHAR) FROM `"+table+"` WHERE name = ?", name).Scan(&until)
			lb, errB := b.Lock(bg, Config{Name: name, LockAtMostFor: time.Minute})
			t.Logf("server clock %s UTC (%v): a with LockAtMostFor %v: %v (lock_until %q); b with 1m: %v",
				now, tc.params, tc.atMost, errA, until, errB)
			if errA == nil && errB == nil {
				t.Fatalf("b took the job while a holds it (a's lock_until %q)", until)
			}
			if tc.fits {
				if errA != nil || !errors.Is(errB, ErrLocked) {
					t.Errorf("a = %v, b = %v; want a to hold the job and b ErrLocked", errA, errB)
				}
			} else {
				if !errors.Is(errA, ErrLeaseOutOfRange) {
					t.Errorf("a = %v, want ErrLeaseOutOfRange", errA)
				}
				if until != "" {
					t.Errorf("a's refused lease wrote lock_until %q", until)
				}
				if errB != nil {
					t.Errorf("b = %v, want the job (nobody holds it)", errB)
				}
			}
			for _, l := range []*Lease{la, lb} {
				if l != nil {
					if err := l.Unlock(bg); err != nil {
						t.Errorf("Unlock: %v", err)
					}
				}
			}
		})
	}
}

// TestExtendPastTimestampRange: a lease held with a server clock of 2037 is
// not extended past 2038 by Extend: the extension is refused with
// ErrLeaseOutOfRange, lock_until stays as it was, the lease is still held,
// and another instance still cannot take the job. In a strict session the
// server would refuse the value itself; in a non-strict one (an empty sql_mode)
// it would store a zero lock_until, with a warning.
func TestExtendPastTimestampRange(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"STRICT_TRANS_TABLES", ""} {
		t.Run("sql_mode '"+mode+"'", func(t *testing.T) {
			t.Parallel()
			params := []string{"timestamp=2128000000", "time_zone='+00:00'", "sql_mode='" + mode + "'"} // 2037-06-07
			dbA, dbB := openDB(t, params...), openDB(t, params...)
			table := newTable(t, dbA)
			a := mustNew(t, dbA, WithTable(table), WithLockedBy("instance-a"))
			b := mustNew(t, dbB, WithTable(table), WithLockedBy("instance-b"))
			l, err := a.Lock(bg, Config{Name: "report", LockAtMostFor: year / 2})
			if err != nil {
				t.Fatal(err)
			}
			before := readRow(t, dbA, table, "report")
			err = l.Extend(bg, year)
			after := readRow(t, dbA, table, "report")
			t.Logf("Extend by a year at 2037-06-07: %v; lock_until %s, then %s", err, before.LockUntil, after.LockUntil)
			if !errors.Is(err, ErrLeaseOutOfRange) || errors.Is(err, ErrLeaseLost) {
				t.Errorf("Extend = %v, want ErrLeaseOutOfRange", err)
			}
			if after != before {
				t.Errorf("row %+v after a refused Extend, was %+v", after, before)
			}
			if err := l.Err(); err != nil {
				t.Errorf("Err() = %v after a refused Extend, want nil: the lease is still held", err)
			}
			if lb, err := b.Lock(bg, Config{Name: "report", LockAtMostFor: time.Minute}); !errors.Is(err, ErrLocked) {
				t.Errorf("b = %v, want ErrLocked", err)
				if lb != nil {
					_ = lb.Unlock(bg)
				}
			}
			if err := l.Extend(bg, time.Hour); err != nil {
				t.Errorf("Extend by an hour: %v", err)
			}
			if err := l.Unlock(bg); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestKeepAlivePastTimestampRange: the keep-alive extends by LockAtMostFor
// from the server's now, so as the server's clock nears the end of
// TIMESTAMP, its extensions stop fitting. They are refused, lock_until stays
// as it was, the lease ends at it (the job's ctx is cancelled with
// ErrLeaseLost, the refusal as its last error), and another instance never
// takes the job meanwhile. The session is non-strict (an empty sql_mode), where
// the server would store the extension as a zero lock_until.
func TestKeepAlivePastTimestampRange(t *testing.T) {
	t.Parallel()
	params := []string{"time_zone='+00:00'", "sql_mode=''"}
	db := openDB(t, params...) // one session, whose clock the test moves
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	other := openDB(t, append(params, fmt.Sprintf("timestamp=%d", endOfTimestamp-1))...) // 03:14:06
	table := newTable(t, other)
	a := mustNew(t, db, WithTable(table), WithLockedBy("instance-a"))
	b := mustNew(t, other, WithTable(table), WithLockedBy("instance-b"))
	setDBTime(t, db, endOfTimestamp-1) // 03:14:06: lock_until 03:14:07.500 fits

	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	var cause error
	var takenByB bool
	var rows []string
	start := time.Now()
	ran, err := a.Run(ctx, Config{Name: "long", LockAtMostFor: 1500 * time.Millisecond, KeepAlive: 300 * time.Millisecond}, func(ctx context.Context) error {
		// 03:14:06.600: the lease (to 03:14:07.500) still runs, and now +
		// 1.5 s is past the end (03:14:07.999).
		setDBTime(t, db, endOfTimestamp-0.4)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return nil
			case <-tick.C:
			}
			rows = append(rows, readRow(t, other, table, "long").LockUntil)
			// b's lease ends before TIMESTAMP does: b can take the job
			// as soon as a's lock_until passes.
			lb, err := b.Lock(bg, Config{Name: "long", LockAtMostFor: 100 * time.Millisecond})
			if err == nil {
				takenByB = true
				_ = lb.Unlock(bg)
				return errors.New("b took the job")
			}
			if !errors.Is(err, ErrLocked) {
				return fmt.Errorf("b: %w", err)
			}
			// contract: the job's ctx is cancelled when its lease runs
			// out at the end of TIMESTAMP; 5 s only ends a job never told.
			if time.Since(start) > 5*time.Second {
				return errors.New("the job's ctx was not cancelled within 5 s")
			}
		}
	})
	t.Logf("Run: %v, %v after %v; job's ctx cause: %v; lock_until seen: %q", ran, err, time.Since(start).Round(time.Millisecond), cause, rows)
	if takenByB {
		t.Error("b took the job while a ran it")
	}
	if !ran || !errors.Is(err, ErrLeaseLost) || !errors.Is(cause, ErrLeaseLost) || !errors.Is(cause, ErrLeaseOutOfRange) {
		t.Errorf("Run = %v, %v (cause %v); want ran, ErrLeaseLost, with ErrLeaseOutOfRange as the last error", ran, err, cause)
	}
	for _, r := range rows {
		if r != "2038-01-19 03:14:07.500" {
			t.Errorf("lock_until moved while the lease was held: %q", rows)
			break
		}
	}
}
