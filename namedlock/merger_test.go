package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/namedlock/mysql/namedlock"
)

// addAll is a Merger fn over the fixture's tables: it adds one to the
// counter per request with one read and one write, logs a history row per
// request (its token is the group's first plus its index) and returns the
// counter value each request made.
func (f *batchFixture) addAll(ctx context.Context, tx *sql.Tx, key string, callers []int) ([]int, error) {
	var v int
	if err := tx.QueryRowContext(ctx, "SELECT v FROM "+f.ctr+" WHERE id = 1").Scan(&v); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+f.ctr+" SET v = ? WHERE id = 1", v+len(callers)); err != nil {
		return nil, err
	}
	first, _ := namedlock.TokenFromContext(ctx, key)
	res := make([]int, len(callers))
	for i, c := range callers {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+f.hist+" VALUES (?, ?, ?, CONNECTION_ID())", c, v+i, first+uint64(i)); err != nil {
			return nil, err
		}
		res[i] = v + i + 1
	}
	return res, nil
}

// TestMergerOneGroup: 16 requests queued for one key go to fn at once, in
// queue order, and are committed once; each gets its own result, and the
// tokens strictly increase.
func TestMergerOneGroup(t *testing.T) {
	leakCheck(t)
	f := newBatchFixture(t)
	m, err := namedlock.NewMerger(f.in.locker, f.app, f.addAll)
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	ctx := testCtx(t, 30*time.Second)
	before := f.in.locker.Stats().FencedCommits
	res := make([]int, n)
	errs := make([]error, n)
	lineUp(t, f, n, func(i int) { res[i], errs[i] = m.Do(ctx, f.key, i) })
	for i := range n {
		if errs[i] != nil || res[i] != i+1 {
			t.Errorf("request %d: %d, %v; want %d, nil", i, res[i], errs[i], i+1)
		}
	}
	counter, rows := f.history(t)
	if counter != n || len(rows) != n {
		t.Fatalf("counter %d, %d rows, want %d", counter, len(rows), n)
	}
	for i, r := range rows {
		if r.caller != i || (i > 0 && r.token <= rows[i-1].token) {
			t.Errorf("row %d: caller %d token %d (previous token %d)", i, r.caller, r.token, rows[max(i-1, 0)].token)
		}
	}
	if g := f.in.locker.Stats().FencedCommits - before; g != 1 {
		t.Errorf("%d COMMITs, want 1", g)
	}
}

// TestMergerGroupFails: fn's error, a wrong number of results, or a panic
// of fn fail every request of the group, and nothing of it is committed;
// the panic goes on in the goroutine that ran fn (the group's first
// caller). A request whose ctx ends while queued is left out of fn's.
func TestMergerGroupFails(t *testing.T) {
	leakCheck(t)
	boom := errors.New("fn failed")
	for _, how := range []string{"error", "results", "panic", "ctx"} {
		t.Run(how, func(t *testing.T) {
			f := newBatchFixture(t)
			var got []int
			m, err := namedlock.NewMerger(f.in.locker, f.app, func(ctx context.Context, tx *sql.Tx, key string, reqs []int) ([]int, error) {
				got = append([]int(nil), reqs...)
				res, err := f.addAll(ctx, tx, key, reqs)
				switch how {
				case "error":
					return nil, boom
				case "results":
					return res[1:], err
				case "panic":
					panic("fn panicked")
				}
				return res, err
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx := testCtx(t, 30*time.Second)
			gone, leave := context.WithCancel(ctx)
			defer leave()
			errs := make([]error, 4)
			panics := make([]any, 4)
			lineUpThen(t, f, 4, func(i int) {
				defer func() { panics[i] = recover() }()
				c := ctx
				if i == 2 {
					c = gone
				}
				_, errs[i] = m.Do(c, f.key, i)
			}, func() {
				if how == "ctx" {
					leave()
					eventually(t, 10*time.Second, "request 2 left", func() bool { return namedlock.BatchPending(f.in.locker) == 3 })
				}
			})
			counter, rows := f.history(t)
			if how == "ctx" {
				if fmt.Sprint(got) != "[0 1 3]" || counter != 3 || len(rows) != 3 {
					t.Errorf("fn got %v, counter %d, %d rows; want [0 1 3], 3, 3", got, counter, len(rows))
				}
				if !errors.Is(errs[2], namedlock.ErrNotAcquired) || !errors.Is(errs[2], context.Canceled) {
					t.Errorf("request 2: %v, want ErrNotAcquired and Canceled", errs[2])
				}
				return
			}
			if counter != 0 || len(rows) != 0 {
				t.Errorf("counter %d, %d rows after a failed group, want 0", counter, len(rows))
			}
			for i := range 4 {
				switch {
				case how == "panic" && i == 0:
					if panics[0] != "fn panicked" {
						t.Errorf("request 0 (ran fn): recovered %v, want fn's panic", panics[0])
					}
				case how == "error" && !errors.Is(errs[i], boom):
					t.Errorf("request %d: %v, want fn's error", i, errs[i])
				case how == "results" && !errors.Is(errs[i], namedlock.ErrInvalidArgument):
					t.Errorf("request %d: %v, want ErrInvalidArgument", i, errs[i])
				case errs[i] == nil || panics[i] != nil && i != 0:
					t.Errorf("request %d: %v, panic %v", i, errs[i], panics[i])
				}
			}
		})
	}
}
