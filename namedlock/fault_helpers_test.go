package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// Helpers of the fault-injection tests (fault_*_test.go). They observe and
// hurt the server from outside the Locker: a plain pool that reads
// IS_USED_LOCK and the process list and runs KILL, as an operator would.

// faultBase returns a portable, unique prefix for the lock names of one
// test: the tail of testdb.UniqueName (which ends in "-<counter>-<pid>"), at
// most 40 characters, so that base + ":" + a short suffix stays portable
// (names equal keys) and the process list can be searched by the base.
func faultBase(t testing.TB) string {
	t.Helper()
	n := testdb.UniqueName(t)
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	n = strings.TrimLeft(n, "-")
	if !keyfmt.IsPortable(n + ":" + strings.Repeat("x", 20)) {
		t.Fatalf("faultBase: %q is not portable", n)
	}
	return n
}

// faultAdmin opens a plain pool on dsn for looking at the server from
// outside (IS_USED_LOCK, the process list) and for KILL, closed at the end of
// the test.
func faultAdmin(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db := testdb.OpenDB(t, dsn)
	db.SetMaxOpenConns(4)
	return db
}

// faultKill runs KILL CONNECTION id on db. A session that already ended
// (error 1094, unknown thread) is not an error.
func faultKill(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1094 {
		return nil
	}
	return err
}

// faultMustKill is faultKill that fails the test on error.
func faultMustKill(t testing.TB, db *sql.DB, id int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if id == 0 {
		t.Fatal("faultMustKill: no session id (the lock is not held at the server?)")
	}
	if err := faultKill(ctx, db, id); err != nil {
		t.Fatalf("KILL CONNECTION %d: %v", id, err)
	}
}

// faultHolder returns the session holding name on the server (IS_USED_LOCK),
// or 0, without failing the test (usable from any goroutine).
func faultHolder(ctx context.Context, db *sql.DB, name string) (int64, error) {
	return testdb.HolderOf(ctx, db, name)
}

// faultKillHolder KILLs the session holding name, looking for one
// (faultHolder) every few milliseconds for up to within, and reports
// whether it KILLed one. On TiDB a lock that goes from instance to instance
// through the server stays free there for a while between two holders, so a
// single look per chaos tick can miss every holder of a whole run.
func faultKillHolder(ctx context.Context, db *sql.DB, name string, within time.Duration) bool {
	end := time.Now().Add(within)
	for {
		if id, err := faultHolder(ctx, db, name); err == nil && id != 0 {
			return faultKill(ctx, db, id) == nil
		}
		// contract: none; how long one chaos tick looks for a holder (the
		// run goes on until it found one, or its own limit).
		if ctx.Err() != nil || !time.Now().Before(end) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// faultWaiters returns the ids of server sessions waiting in GET_LOCK
// (flavor.IsLockWait: MariaDB state "User lock", MySQL "Waiting for user
// level lock", TiDB a running GET_LOCK statement) for a name
// that contains pattern.
func faultWaiters(t testing.TB, db *sql.DB, pattern string) []int64 {
	t.Helper()
	var ids []int64
	for _, s := range sessions(t, db) {
		if flavor.IsLockWait(s.state, s.info) && strings.Contains(s.info, pattern) {
			ids = append(ids, s.id)
		}
	}
	slices.Sort(ids)
	return ids
}

// faultSessionExists reports whether server session id is still in the
// process list, in any state.
func faultSessionExists(t testing.TB, db *sql.DB, id int64) bool {
	t.Helper()
	for _, s := range sessions(t, db) {
		if s.id == id {
			return true
		}
	}
	return false
}

// faultPoll calls cond every 10 ms until it returns true or d has passed. It
// returns how long that took and whether cond became true.
func faultPoll(d time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if cond() {
			return time.Since(start), true
		}
		// contract: the caller's, who fails on false; d is its
		// generous bound.
		if time.Since(start) > d {
			return time.Since(start), false
		}
		<-t.C
	}
}

// faultClosedWithin waits up to d for ch to close and returns how long
// after since it was observed closed, and whether it was.
func faultClosedWithin(ch <-chan struct{}, since time.Time, d time.Duration) (time.Duration, bool) {
	timer := time.NewTimer(time.Until(since.Add(d)))
	defer timer.Stop()
	select {
	case <-ch:
		return time.Since(since), true
	case <-timer.C:
		return time.Since(since), false
	}
}

// faultInUse waits up to d for db to have exactly n connections in use and
// fails the test if it never does.
func faultInUse(t testing.TB, db *sql.DB, n int, d time.Duration) {
	t.Helper()
	if _, ok := faultPoll(d, func() bool { return db.Stats().InUse == n }); !ok {
		t.Errorf("lock pool: %d connections in use after %v, want %d (%+v)", db.Stats().InUse, d, n, db.Stats())
	}
}

// faultRelease releases k within 5 s and returns its error.
func faultRelease(k *namedlock.Lock) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return k.Release(ctx)
}

// faultAcquire acquires key on l within d.
func faultAcquire(t testing.TB, l *namedlock.Locker, key string, d time.Duration) *namedlock.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	k, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	t.Cleanup(func() { _ = faultRelease(k) })
	return k
}
