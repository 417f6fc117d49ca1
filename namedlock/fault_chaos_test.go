package namedlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
)

// TestFaultChaosKills: 4 Lockers (4 instances, each with its own lock pool)
// × 8 goroutines run a fixed number of critical sections on 4 keys, while a
// chaos goroutine KILLs a random holder's session (found with IS_USED_LOCK
// from outside) every 20–50 ms. Each section is a Do whose fn runs a
// transaction on the primary pool: read a per-key counter, pause 1–12 ms,
// write it back plus one, log (section, key, value read), and COMMIT only if
// fn's ctx is still live (the lock not found lost), as DoTx does.
//
// The guarantee under test: every critical section either ran under an
// unbroken lock (Do returned nil: the final RELEASE_LOCK answered 1, or the
// ownership check after a handoff proved that the session still held the
// lock) or was told ErrLockLost. So on one key the spans of the sections
// not told (fn began .. COMMIT returned) never overlap, and each of them
// committed. A told section may still have committed: its loss was found
// after its COMMIT (a lock is not a fencing token), and its write may then
// overwrite another's — those are counted and logged; when there are none,
// the counters add up exactly to the number of sections not told.
func TestFaultChaosKills(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	const (
		instances = 4
		workers   = 8
		keys      = 4
		sections  = 480
		// maxSections bounds the run when the chaos lands few KILLs.
		maxSections = 8 * sections
		keepAlive   = 100 * time.Millisecond
	)
	// bitten: enough KILLs landed for the run to test loss handling.
	bitten := func(kills int64) bool { return kills >= 5 }
	adm := faultAdmin(t, srv.DSN)
	prim := sqlx.NewDb(testdb.OpenDB(t, srv.DSN), "mysql")
	prim.SetMaxOpenConns(instances*workers + 4)
	base := faultBase(t)
	ctr, logt := tableName(t), tableName(t)
	ctx := testCtx(t, 2*time.Minute)
	for _, q := range []string{
		"CREATE TABLE " + ctr + " (k VARCHAR(64) PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE " + logt + " (sec INT PRIMARY KEY, k VARCHAR(64) NOT NULL, readv INT NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := prim.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = prim.Exec("DROP TABLE IF EXISTS " + ctr + ", " + logt)
	})
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("%s:k%d", base, i)
		if _, err := prim.ExecContext(ctx, "INSERT INTO "+ctr+" (k, v) VALUES (?, 0)", names[i]); err != nil {
			t.Fatal(err)
		}
	}
	insts := make([]*instance, instances)
	for i := range insts {
		insts[i] = newInstance(t, srv.DSN, namedlock.WithKeepAlive(keepAlive), namedlock.WithCheckTimeout(time.Second))
	}

	// The chaos goroutine.
	stop := make(chan struct{})
	var kills atomic.Int64
	var chaos sync.WaitGroup
	chaos.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-stop:
				return
			case <-timer.C:
			}
			kctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if id, err := faultHolder(kctx, adm, names[rng.IntN(keys)]); err == nil && id != 0 {
				if faultKill(kctx, adm, id) == nil {
					kills.Add(1)
				}
			}
			cancel()
			timer.Reset(time.Duration(20+rng.IntN(31)) * time.Millisecond)
		}
	})

	type result struct {
		key        string
		told       bool      // Do returned ErrLockLost
		start, end time.Time // fn began; its COMMIT returned (zero if none)
	}
	var (
		mu          sync.Mutex
		results     = make(map[int]result)
		acqFailures int
		budget      atomic.Int64
		wg          sync.WaitGroup
	)
	// section is one critical section: a transaction on the primary pool
	// that commits only if the lock is intact right before COMMIT (fn's ctx
	// not cancelled), as DoTx does; it returns when fn began and when its
	// COMMIT returned, both inside the lock's hold.
	section := func(ctx context.Context, sec int, key string, pause time.Duration) (start, end time.Time, err error) {
		start = time.Now()
		tx, err := prim.BeginTxx(ctx, nil)
		if err != nil {
			return start, end, err
		}
		committed := false
		defer func() {
			if !committed {
				_ = tx.Rollback()
			}
		}()
		var v int
		if err := tx.QueryRowContext(ctx, "SELECT v FROM "+ctr+" WHERE k = ?", key).Scan(&v); err != nil {
			return start, end, err
		}
		timer := time.NewTimer(pause)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return start, end, context.Cause(ctx)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE "+ctr+" SET v = ? WHERE k = ?", v+1, key); err != nil {
			return start, end, err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+logt+" (sec, k, readv) VALUES (?, ?, ?)", sec, key, v); err != nil {
			return start, end, err
		}
		if ctx.Err() != nil {
			return start, end, context.Cause(ctx)
		}
		if err := tx.Commit(); err != nil {
			return start, end, err
		}
		committed = true
		return start, time.Now(), nil
	}
	for i, in := range insts {
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
				for {
					sec := int(budget.Add(1))
					// Past the planned sections the run goes on until
					// the chaos has bitten (a slow server or a busy
					// machine lands fewer KILLs per section), up to
					// maxSections.
					if sec > maxSections || (sec > sections && bitten(kills.Load())) {
						return
					}
					key := names[rng.IntN(keys)]
					pause := time.Duration(1+rng.IntN(12)) * time.Millisecond
					for {
						ran := false
						var r result
						err := in.locker.Do(ctx, key, func(ctx context.Context) error {
							ran = true
							var err error
							r.start, r.end, err = section(ctx, sec, key, pause)
							return err
						})
						if ctx.Err() != nil {
							t.Errorf("section %d: test context ended: %v", sec, err)
							return
						}
						if !ran {
							// The chaos hit the session while it was
							// acquiring (a KILL aimed at a holder that
							// had just released): no critical section ran.
							mu.Lock()
							acqFailures++
							mu.Unlock()
							continue
						}
						switch {
						case err == nil:
						case errors.Is(err, namedlock.ErrLockLost):
						default:
							t.Errorf("section %d: Do = %v: neither nil nor ErrLockLost", sec, err)
						}
						r.key, r.told = key, err != nil
						mu.Lock()
						results[sec] = r
						mu.Unlock()
						break
					}
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	chaos.Wait()

	// What committed: the log, read on the primary pool.
	committed := make(map[int]int) // section -> value read
	rows, err := prim.QueryContext(ctx, "SELECT sec, readv FROM "+logt)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var sec, v int
		if err := rows.Scan(&sec, &v); err != nil {
			t.Fatal(err)
		}
		committed[sec] = v
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}

	var told, notTold, zombies, rolledBack int
	untold := make(map[string][]result) // by key
	for sec, r := range results {
		_, ok := committed[sec]
		switch {
		case r.told && ok:
			told++
			zombies++
		case r.told:
			told++
			rolledBack++
		case !ok || r.end.IsZero():
			notTold++
			t.Errorf("section %d was not told of a loss but did not commit", sec)
		default:
			notTold++
			untold[r.key] = append(untold[r.key], r)
		}
	}
	// Sections not told held an unbroken lock from before fn began until
	// after their COMMIT returned: on one key, those spans never overlap.
	overlaps := 0
	for key, rs := range untold {
		slices.SortFunc(rs, func(a, b result) int { return a.start.Compare(b.start) })
		var last time.Time
		for _, r := range rs {
			if r.start.Before(last) {
				overlaps++
				if overlaps <= 5 {
					t.Errorf("key %s: a section not told of any loss began %v before the previous one (also not told) committed: two unbroken locks at once", key, last.Sub(r.start))
				}
			}
			if r.end.After(last) {
				last = r.end
			}
		}
	}
	if overlaps > 0 {
		t.Errorf("%d overlaps between sections not told of a loss", overlaps)
	}
	// Lost updates: committed sections of one key that read the same value.
	readers := make(map[string]int)
	lostUpdates := 0
	for sec, v := range committed {
		k := results[sec].key + "=" + strconv.Itoa(v)
		if readers[k]++; readers[k] > 1 {
			lostUpdates++
		}
	}
	total := 0
	for _, name := range names {
		var v int
		if err := prim.QueryRowContext(ctx, "SELECT v FROM "+ctr+" WHERE k = ?", name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		total += v
	}
	var lost int64
	for i, in := range insts {
		st := in.locker.Stats()
		lost += st.Lost
		if st.Held != 0 || st.Waiting != 0 || st.Queued != 0 {
			t.Errorf("instance %d: Stats = %+v, want Held 0, Waiting 0, Queued 0", i, st)
		}
		faultInUse(t, in.db, 0, time.Second)
	}
	t.Logf("chaos: %d sections (%d not told, %d told ErrLockLost, of which %d had committed before the loss was found), %d KILLs, %d failed acquisitions retried, Stats.Lost %d over the instances",
		len(results), notTold, told, zombies, kills.Load(), acqFailures, lost)
	if want := int64(told); lost != want {
		t.Errorf("Stats.Lost = %d over the instances, want the %d locks whose holders were told", lost, want)
	}
	t.Logf("chaos: counters total %d; %d sections committed, %d told sections rolled back; %d committed sections read a value another had read too (lost updates, all caused by told sections committing after their loss)",
		total, len(committed), rolledBack, lostUpdates)
	if n := int(min(budget.Load()-int64(instances*workers), maxSections)); len(results) != n {
		t.Errorf("%d sections recorded, want %d", len(results), n)
	}
	if !bitten(kills.Load()) || told == 0 {
		t.Errorf("only %d KILLs and %d told sections: the chaos did not bite", kills.Load(), told)
	}
	if zombies == 0 && total != notTold {
		t.Errorf("counters total %d, want the %d sections not told (no told section committed)", total, notTold)
	}
}
