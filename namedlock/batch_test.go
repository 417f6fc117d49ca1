package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// batchFixture is a fenced Locker, its application pool, a counter table
// (row 1, v = 0) and a history table (caller, seen, token).
type batchFixture struct {
	in    *instance
	app   *sql.DB
	ctr   string
	hist  string
	key   string
	fence string
}

func newBatchFixture(t *testing.T, opts ...namedlock.Option) *batchFixture {
	t.Helper()
	srv := testdb.RequireReal(t)
	app := testdb.OpenDB(t, srv.DSN)
	in, fence := fenced(t, app, opts...)
	ctr := counterTable(t, sqlx.NewDb(app, "mysql"), 1)
	hist := "h_" + ctr[max(0, len(ctr)-60):]
	ctx := testCtx(t, 10*time.Second)
	if _, err := app.ExecContext(ctx, "CREATE TABLE "+hist+" (caller INT NOT NULL, seen INT NOT NULL, token BIGINT UNSIGNED NOT NULL, conn BIGINT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = app.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+hist) })
	return &batchFixture{in: in, app: app, ctr: ctr, hist: hist, key: uniqueKey(t, "batch"), fence: fence}
}

// increment is a section: read the counter, write it plus one, log
// (caller, what it read, its token, its connection) in the history.
func (f *batchFixture) increment(caller int) func(ctx context.Context, tx *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		var v int
		if err := tx.QueryRowContext(ctx, "SELECT v FROM "+f.ctr+" WHERE id = 1").Scan(&v); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE "+f.ctr+" SET v = ? WHERE id = 1", v+1); err != nil {
			return err
		}
		tok, _ := namedlock.TokenFromContext(ctx, f.key)
		_, err := tx.ExecContext(ctx, "INSERT INTO "+f.hist+" VALUES (?, ?, ?, CONNECTION_ID())", caller, v, tok)
		return err
	}
}

type histRow struct {
	caller, seen int
	token        uint64
	conn         int64
}

func (f *batchFixture) history(t *testing.T) (counter int, rows []histRow) {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	if err := f.app.QueryRowContext(ctx, "SELECT v FROM "+f.ctr+" WHERE id = 1").Scan(&counter); err != nil {
		t.Fatal(err)
	}
	rs, err := f.app.QueryContext(ctx, "SELECT caller, seen, token, conn FROM "+f.hist+" ORDER BY seen")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var r histRow
		if err := rs.Scan(&r.caller, &r.seen, &r.token, &r.conn); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return counter, rows
}

// lineUp holds key with an Acquire while n callers queue for it one after
// another (call(i) runs in a goroutine of its own, started once the
// callers before it are queued), then lets them go and waits for them.
func lineUp(t *testing.T, f *batchFixture, n int, call func(i int)) {
	t.Helper()
	lineUpThen(t, f, n, call, nil)
}

// lineUpThen is lineUp that runs then, if not nil, once all are queued,
// before it lets them go.
func lineUpThen(t *testing.T, f *batchFixture, n int, call func(i int), then func()) {
	t.Helper()
	k := mustAcquire(t, f.in.locker, f.key)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { call(i) })
		eventually(t, 10*time.Second, fmt.Sprintf("caller %d queued", i), func() bool { return namedlock.BatchPending(f.in.locker) == i+1 })
	}
	if then != nil {
		then()
	}
	if err := k.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// TestDoBatchSerialOrderOneCommit: 16 callers queued for one key run their
// sections one after another in queue order, each reading what the one
// before wrote, in one transaction committed once, with strictly
// increasing tokens.
func TestDoBatchSerialOrderOneCommit(t *testing.T) {
	leakCheck(t)
	f := newBatchFixture(t, namedlock.WithBatchLimits(64, time.Minute)) // no time bound on a loaded machine
	const n = 16
	ctx := testCtx(t, 30*time.Second)
	before := f.in.locker.Stats().FencedCommits
	errs := make([]error, n)
	lineUp(t, f, n, func(i int) { errs[i] = f.in.locker.DoBatch(ctx, f.key, f.app, f.increment(i)) })
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	counter, rows := f.history(t)
	if counter != n || len(rows) != n {
		t.Fatalf("counter %d, %d history rows, want %d", counter, len(rows), n)
	}
	for i, r := range rows {
		if r.caller != i || r.seen != i {
			t.Errorf("section %d: caller %d saw %d, want caller %d (queue order) seeing %d", i, r.caller, r.seen, i, i)
		}
		if i > 0 && r.token <= rows[i-1].token {
			t.Errorf("section %d: token %d not above %d", i, r.token, rows[i-1].token)
		}
		if r.conn != rows[0].conn {
			t.Errorf("section %d ran on connection %d, section 0 on %d: not one transaction", i, r.conn, rows[0].conn)
		}
	}
	if g := f.in.locker.Stats().FencedCommits - before; g != 1 {
		t.Errorf("%d COMMITs for %d sections queued at once, want 1", g, n)
	}
}

// TestDoBatchSectionErrorAndPanic: a section that returns an error, and
// one that panics, after writing, are rolled back to their savepoints
// alone: their callers get the error (the panic, in their own goroutine)
// and the other sections of the group commit.
func TestDoBatchSectionErrorAndPanic(t *testing.T) {
	leakCheck(t)
	f := newBatchFixture(t)
	ctx := testCtx(t, 30*time.Second)
	boom := errors.New("section failed")
	errs := make([]error, 5)
	var panicked any
	lineUp(t, f, 5, func(i int) {
		if i == 3 {
			defer func() { panicked = recover() }()
		}
		errs[i] = f.in.locker.DoBatch(ctx, f.key, f.app, func(ctx context.Context, tx *sql.Tx) error {
			if err := f.increment(i)(ctx, tx); err != nil {
				return err
			}
			switch i {
			case 1:
				return boom
			case 3:
				panic("section panicked")
			}
			return nil
		})
	})
	if panicked != "section panicked" {
		t.Errorf("caller 3 recovered %v, want its own panic", panicked)
	}
	for i, want := range []error{nil, boom, nil, nil, nil} {
		if i == 3 {
			continue
		}
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Errorf("caller %d: %v, want %v", i, errs[i], want)
		}
	}
	counter, rows := f.history(t)
	var callers []int
	for _, r := range rows {
		callers = append(callers, r.caller)
	}
	if counter != 3 || fmt.Sprint(callers) != "[0 2 4]" {
		t.Fatalf("counter %d, committed callers %v, want 3 and [0 2 4]", counter, callers)
	}
}

// TestDoBatchContextEnds: a caller whose ctx ends while it is queued leaves
// without its section running (ErrNotAcquired and ctx.Err()); one whose ctx
// ends during its section is rolled back to its savepoint and gets an
// error matching ctx.Err(), while its statements after that moment still
// run (fn's ctx is the group's: the connection is not closed) and the
// sections after it commit.
func TestDoBatchContextEnds(t *testing.T) {
	leakCheck(t)
	f := newBatchFixture(t)
	ctx := testCtx(t, 30*time.Second)
	errs := make([]error, 4)
	before, cancelBefore := context.WithCancel(ctx)
	during, cancelDuring := context.WithCancel(ctx)
	defer cancelBefore()
	defer cancelDuring()
	ran := make([]bool, 4)
	lineUpThen(t, f, 4, func(i int) {
		c := ctx
		switch i {
		case 1:
			c = before
		case 2:
			c = during
		}
		errs[i] = f.in.locker.DoBatch(c, f.key, f.app, func(ctx context.Context, tx *sql.Tx) error {
			ran[i] = true
			if i == 2 {
				cancelDuring()
				// A statement after the caller's ctx ended runs on the
				// group's ctx: the transaction goes on.
				if err := f.increment(i)(ctx, tx); err != nil {
					return err
				}
				return nil
			}
			return f.increment(i)(ctx, tx)
		})
	}, func() {
		cancelBefore()
		eventually(t, 10*time.Second, "caller 1 left the queue", func() bool { return namedlock.BatchPending(f.in.locker) == 3 })
	})
	if ran[1] || !errors.Is(errs[1], namedlock.ErrNotAcquired) || !errors.Is(errs[1], context.Canceled) {
		t.Errorf("caller 1 (ctx ended while queued): ran %v, %v, want ErrNotAcquired and context.Canceled", ran[1], errs[1])
	}
	if !errors.Is(errs[2], context.Canceled) || errs[2] == nil {
		t.Errorf("caller 2 (ctx ended during its section): %v, want context.Canceled", errs[2])
	}
	for _, i := range []int{0, 3} {
		if errs[i] != nil {
			t.Errorf("caller %d: %v", i, errs[i])
		}
	}
	counter, rows := f.history(t)
	var callers []int
	for _, r := range rows {
		callers = append(callers, r.caller)
	}
	want := "[0 3]"
	if fmt.Sprint(callers) != want || counter != len(rows) {
		t.Fatalf("counter %d, committed callers %v, want %s", counter, callers, want)
	}
}

// TestDoBatchBounds: a group takes at most WithBatchLimits' count of
// callers, and starts no section after its time bound (the callers it did
// not reach go, first, into the next group); every caller commits.
func TestDoBatchBounds(t *testing.T) {
	leakCheck(t)
	for _, tc := range []struct {
		name    string
		max     int
		maxTime time.Duration
		sleep   time.Duration
		n       int
		groups  int64
	}{
		{"count", 3, time.Minute, 0, 10, 4},
		{"time", 64, time.Millisecond, 5 * time.Millisecond, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newBatchFixture(t, namedlock.WithBatchLimits(tc.max, tc.maxTime))
			ctx := testCtx(t, 30*time.Second)
			before := f.in.locker.Stats().FencedCommits
			errs := make([]error, tc.n)
			lineUp(t, f, tc.n, func(i int) {
				errs[i] = f.in.locker.DoBatch(ctx, f.key, f.app, func(ctx context.Context, tx *sql.Tx) error {
					time.Sleep(tc.sleep)
					return f.increment(i)(ctx, tx)
				})
			})
			for i, err := range errs {
				if err != nil {
					t.Errorf("caller %d: %v", i, err)
				}
			}
			counter, rows := f.history(t)
			for i, r := range rows {
				if r.caller != i {
					t.Errorf("section %d was caller %d: not in queue order", i, r.caller)
				}
			}
			if g := f.in.locker.Stats().FencedCommits - before; counter != tc.n || g != tc.groups {
				t.Errorf("counter %d, %d groups; want %d, %d", counter, g, tc.n, tc.groups)
			}
		})
	}
}

// TestDoBatchSectionEndsTransaction: a section that commits the group's
// transaction itself (tx.Commit, or a COMMIT statement) is detected: every
// caller of the group still waiting, the offender included, gets an error
// matching ErrSectionEndedTx, and the group goes no further.
func TestDoBatchSectionEndsTransaction(t *testing.T) {
	leakCheck(t)
	for _, how := range []string{"tx.Commit", "COMMIT statement"} {
		t.Run(how, func(t *testing.T) {
			f := newBatchFixture(t, namedlock.WithBatchLimits(64, time.Minute))
			ctx := testCtx(t, 30*time.Second)
			errs := make([]error, 3)
			lineUp(t, f, 3, func(i int) {
				errs[i] = f.in.locker.DoBatch(ctx, f.key, f.app, func(ctx context.Context, tx *sql.Tx) error {
					if err := f.increment(i)(ctx, tx); err != nil {
						return err
					}
					if i != 1 {
						return nil
					}
					if how == "tx.Commit" {
						return tx.Commit()
					}
					_, err := tx.ExecContext(ctx, "COMMIT")
					return err
				})
			})
			for i, err := range errs {
				if !errors.Is(err, namedlock.ErrSectionEndedTx) {
					t.Errorf("caller %d: %v, want ErrSectionEndedTx", i, err)
				}
			}
			t.Logf("caller 0: %v", errs[0])
			// The Locker goes on: a later DoBatch commits.
			if err := f.in.locker.DoBatch(ctx, f.key, f.app, f.increment(9)); err != nil {
				t.Fatalf("DoBatch after: %v", err)
			}
		})
	}
}

// TestDoBatchRefused: DoBatch and NewMerger are always fenced: refused
// with ErrFencing on a Locker without WithFencing or on another db, with
// ErrInvalidArgument for a nil db or fn, before anything runs.
func TestDoBatchRefused(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	app := testdb.OpenDB(t, srv.DSN)
	other := testdb.OpenDB(t, srv.DSN)
	plain := newInstance(t, "")
	f, _ := fenced(t, app)
	ctx := testCtx(t, 10*time.Second)
	key := uniqueKey(t, "k")
	fn := func(context.Context, *sql.Tx) error { t.Error("fn ran"); return nil }
	mfn := func(context.Context, *sql.Tx, string, []int) ([]int, error) { t.Error("fn ran"); return nil, nil }
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"no fencing", plain.locker.DoBatch(ctx, key, app, fn), namedlock.ErrFencing},
		{"other db", f.locker.DoBatch(ctx, key, other, fn), namedlock.ErrFencing},
		{"nil db", f.locker.DoBatch(ctx, key, nil, fn), namedlock.ErrInvalidArgument},
		{"nil fn", f.locker.DoBatch(ctx, key, app, nil), namedlock.ErrInvalidArgument},
		{"empty key", f.locker.DoBatch(ctx, "", app, fn), namedlock.ErrInvalidKey},
		{"merger no fencing", second(namedlock.NewMerger(plain.locker, app, mfn)), namedlock.ErrFencing},
		{"merger other db", second(namedlock.NewMerger(f.locker, other, mfn)), namedlock.ErrFencing},
		{"merger nil fn", second(namedlock.NewMerger[int, int](f.locker, app, nil)), namedlock.ErrInvalidArgument},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if h := holderOf(t, admin(t), keyfmt.Portable(key)); h != 0 {
		t.Errorf("the key is held by session %d after refused calls", h)
	}
}

func second[T any](_ T, err error) error { return err }

// TestDoBatchClose: Close fails the callers queued for a group with
// ErrClosed, waits for the group workers (no goroutine outlives it), and
// a DoBatch after Close returns ErrClosed without running fn.
func TestDoBatchClose(t *testing.T) {
	leakCheck(t)
	f := newBatchFixture(t)
	ctx := testCtx(t, 30*time.Second)
	k := mustAcquire(t, f.in.locker, f.key)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = f.in.locker.DoBatch(ctx, f.key, f.app, f.increment(i)) })
	}
	eventually(t, 10*time.Second, "4 callers queued", func() bool { return namedlock.BatchPending(f.in.locker) == 4 })
	returnsWithin(t, 10*time.Second, "Close", func() { _ = f.in.locker.Close() })
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, namedlock.ErrClosed) {
			t.Errorf("caller %d: %v, want ErrClosed", i, err)
		}
	}
	_ = k.Release(ctx)
	if err := f.in.locker.DoBatch(ctx, f.key, f.app, func(context.Context, *sql.Tx) error { t.Error("fn ran after Close"); return nil }); !errors.Is(err, namedlock.ErrClosed) {
		t.Errorf("DoBatch after Close: %v, want ErrClosed", err)
	}
	if counter, rows := f.history(t); counter != 0 || len(rows) != 0 {
		t.Errorf("counter %d, %d rows, want nothing committed", counter, len(rows))
	}
}
