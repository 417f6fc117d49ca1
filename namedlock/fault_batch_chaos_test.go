package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// TestFaultBatchChaos: 4 Lockers (each with its own lock pool and its own
// application pool) × 8 goroutines run DoBatch (or Merger.Do) on one hot
// key for 4 s: read a counter, write it back plus one (plus n for a
// Merger group), and log (request, what it read, its token) in a history
// table, in the group's transaction. Every 30 ms the chaos KILLs, in turn,
// the lock session holding the key and the application connection a
// section last ran on. DoBatch sections fail (return an error after
// writing), panic, or see their caller's ctx end mid-section; some callers'
// ctx end while they wait; Merger groups fail or panic in fn.
//
// Whatever happens, the final counter equals the history rows, which are
// exactly the requests that returned nil, plus some of those whose COMMIT
// got no answer (ErrCommitUnknown: the application connection was KILLed
// under the COMMIT; counted and logged, each may or may not have a row);
// no request that returned another error has a row; the committed tokens
// strictly increase in commit order (no lost update).
func TestFaultBatchChaos(t *testing.T) {
	for _, form := range []string{"DoBatch", "Merger"} {
		t.Run(form, func(t *testing.T) {
			leakCheck(t)
			runBatchChaos(t, testdb.RequireReal(t), form)
		})
	}
}

func runBatchChaos(t *testing.T, srv *testdb.Server, form string) {
	const (
		instances = 4
		workers   = 8
		runFor    = 4 * time.Second
		maxRun    = 30 * time.Second
		keepAlive = 100 * time.Millisecond
	)
	adm := faultAdmin(t, srv.DSN)
	ctx := testCtx(t, 2*time.Minute)
	base := tableName(t)
	base = base[max(0, len(base)-56):]
	ctr, hist, fence := "c_"+base, "h_"+base, "f_"+base
	for _, q := range []string{
		"CREATE TABLE " + ctr + " (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB",
		"INSERT INTO " + ctr + " VALUES (1, 0)",
		"CREATE TABLE " + hist + " (req BIGINT PRIMARY KEY, seen BIGINT NOT NULL, token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := adm.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = adm.Exec("DROP TABLE IF EXISTS " + ctr + ", " + hist + ", " + fence) })
	if err := namedlock.CreateFenceTable(ctx, adm, fence); err != nil {
		t.Fatal(err)
	}
	key := keyfmt.Key(base, "counter")

	var bizConn atomic.Int64 // the application connection a section last ran on
	type inst struct {
		locker *namedlock.Locker
		app    *sql.DB
		merger *namedlock.Merger[int64, int64]
	}
	insts := make([]inst, instances)
	var (
		failures, panics, midCancels atomic.Int64
		mergerFail                   = errors.New("the Merger's fn failed")
	)
	for i := range insts {
		app := testdb.OpenDB(t, srv.DSN)
		app.SetMaxOpenConns(workers + 2)
		l := newInstance(t, srv.DSN, namedlock.WithKeepAlive(keepAlive), namedlock.WithCheckTimeout(time.Second),
			namedlock.WithFencing(app, fence)).locker
		in := inst{locker: l, app: app}
		if form == "Merger" {
			m, err := namedlock.NewMerger(l, app, func(ctx context.Context, tx *sql.Tx, key string, reqs []int64) ([]int64, error) {
				var id int64
				if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
					return nil, err
				}
				bizConn.Store(id)
				var v int64
				if err := tx.QueryRowContext(ctx, "SELECT v FROM "+ctr+" WHERE id = 1").Scan(&v); err != nil {
					return nil, err
				}
				if _, err := tx.ExecContext(ctx, "UPDATE "+ctr+" SET v = ? WHERE id = 1", v+int64(len(reqs))); err != nil {
					return nil, err
				}
				first, _ := namedlock.TokenFromContext(ctx, key)
				res := make([]int64, len(reqs))
				for i, r := range reqs {
					if _, err := tx.ExecContext(ctx, "INSERT INTO "+hist+" VALUES (?, ?, ?)", r, v+int64(i), first+uint64(i)); err != nil {
						return nil, err
					}
					res[i] = r
				}
				switch x := rand.IntN(100); {
				case x < 8:
					failures.Add(1)
					return nil, mergerFail
				case x < 11:
					panics.Add(1)
					panic("chaos: fn panicked")
				}
				return res, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			in.merger = m
		}
		insts[i] = in
	}

	stop := make(chan struct{})
	var chaos sync.WaitGroup
	var lockKills, bizKills atomic.Int64
	chaos.Go(func() {
		tick := time.NewTicker(30 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			kctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if n%2 == 0 {
				if faultKillHolder(kctx, adm, keyfmt.Portable(key), 25*time.Millisecond) {
					lockKills.Add(1)
				}
			} else if id := bizConn.Load(); id != 0 && faultKill(kctx, adm, id) == nil {
				bizKills.Add(1)
			}
			cancel()
		}
	})

	var (
		seq, calls, returnedNil, unknown atomic.Int64
		mu                               sync.Mutex
		okReqs                           = map[int64]bool{}
		unknownReqs                      = map[int64]bool{}
		errCounts                        = map[string]int{}
	)
	// The run lasts runFor, and longer (up to maxRun) until every kind of
	// fault below has happened at least once: the test is void otherwise.
	start := time.Now()
	happened := func() bool {
		return lockKills.Load() > 0 && bizKills.Load() > 0 && failures.Load() > 0 && panics.Load() > 0
	}
	running := func() bool {
		ran := time.Since(start)
		return ran < runFor || ran < maxRun && !happened()
	}
	var wg sync.WaitGroup
	for i := range insts {
		in := insts[i]
		for range workers {
			wg.Go(func() {
				for running() {
					req := seq.Add(1)
					calls.Add(1)
					cctx, cancel := context.WithCancel(ctx)
					if rand.IntN(10) == 0 { // some callers give up while they wait
						cctx, cancel = context.WithTimeout(ctx, time.Duration(1+rand.IntN(20))*time.Millisecond)
					}
					var err error
					func() {
						defer func() {
							if r := recover(); r != nil {
								err = fmt.Errorf("panicked: %v", r)
							}
						}()
						if form == "Merger" {
							_, err = in.merger.Do(cctx, key, req)
							return
						}
						err = in.locker.DoBatch(cctx, key, in.app, func(ctx context.Context, tx *sql.Tx) error {
							var id int64
							if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
								return err
							}
							bizConn.Store(id)
							var v int64
							if err := tx.QueryRowContext(ctx, "SELECT v FROM "+ctr+" WHERE id = 1").Scan(&v); err != nil {
								return err
							}
							if _, err := tx.ExecContext(ctx, "UPDATE "+ctr+" SET v = ? WHERE id = 1", v+1); err != nil {
								return err
							}
							tok, _ := namedlock.TokenFromContext(ctx, key)
							if _, err := tx.ExecContext(ctx, "INSERT INTO "+hist+" VALUES (?, ?, ?)", req, v, tok); err != nil {
								return err
							}
							switch x := rand.IntN(100); {
							case x < 5:
								failures.Add(1)
								return errors.New("chaos: section failed")
							case x < 8:
								panics.Add(1)
								panic("chaos: section panicked")
							case x < 11:
								midCancels.Add(1)
								cancel()
							}
							return nil
						})
					}()
					cancel()
					mu.Lock()
					switch {
					case err == nil:
						returnedNil.Add(1)
						okReqs[req] = true
					case errors.Is(err, namedlock.ErrCommitUnknown):
						if unknown.Add(1) < 3 {
							t.Logf("unknown: %v", err)
						}
						unknownReqs[req] = true
					default:
						errCounts[errClass(err)]++
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	chaos.Wait()

	var counter int64
	if err := adm.QueryRowContext(ctx, "SELECT v FROM "+ctr+" WHERE id = 1").Scan(&counter); err != nil {
		t.Fatal(err)
	}
	rows, err := adm.QueryContext(ctx, "SELECT req, seen, token FROM "+hist+" ORDER BY seen")
	if err != nil {
		t.Fatal(err)
	}
	var committed, committedErr, gaps int64
	ordered := true
	var prevTok uint64
	prevSeen := int64(-1)
	for rows.Next() {
		var req, seen int64
		var tok uint64
		if err := rows.Scan(&req, &seen, &tok); err != nil {
			t.Fatal(err)
		}
		committed++
		if !okReqs[req] && !unknownReqs[req] {
			committedErr++
		}
		delete(okReqs, req)
		if tok <= prevTok {
			ordered = false
		}
		if seen != prevSeen+1 {
			gaps++
		}
		prevTok, prevSeen = tok, seen
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	_ = rows.Close()
	t.Logf("%s, 4 instances x 8 goroutines, %v: %d calls, %d returned nil, %d committed, counter %d, %d KILLs of the lock session, %d of the application connection; %d failed, %d panicked, %d ctx ended mid-section; %d commits unknown",
		form, time.Since(start).Round(time.Millisecond), calls.Load(), returnedNil.Load(), committed, counter, lockKills.Load(), bizKills.Load(), failures.Load(), panics.Load(), midCancels.Load(), unknown.Load())
	t.Logf("errors by kind: %v", errCounts)
	if lockKills.Load() == 0 || bizKills.Load() == 0 || committed == 0 || failures.Load() == 0 || panics.Load() == 0 {
		t.Fatalf("the chaos did not happen: %d lock KILLs, %d application KILLs, %d committed, %d failures, %d panics",
			lockKills.Load(), bizKills.Load(), committed, failures.Load(), panics.Load())
	}
	if counter != committed || gaps != 0 {
		t.Errorf("counter %d, %d history rows, %d gaps in what sections read: lost updates", counter, committed, gaps)
	}
	if committedErr != 0 || len(okReqs) != 0 {
		t.Errorf("%d requests committed but returned an error (other than ErrCommitUnknown), %d returned nil but did not commit", committedErr, len(okReqs))
	}
	if !ordered {
		t.Error("committed tokens do not strictly increase in commit order")
	}
}

// errClass is a short name for the kind of err, for the chaos test's log.
func errClass(err error) string {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if errors.Is(err, namedlock.ErrNotAcquired) {
			return "ctx before section"
		}
		return "ctx"
	case errors.Is(err, namedlock.ErrSectionEndedTx):
		return "section ended tx"
	case errors.Is(err, namedlock.ErrLockLost):
		return "lock lost"
	case errors.Is(err, namedlock.ErrNotAcquired):
		return "not acquired"
	}
	s := err.Error()
	if i := strings.Index(s, "\": "); i >= 0 {
		s = s[i+3:]
	}
	if len(s) > 70 {
		s = s[:70]
	}
	return s
}
