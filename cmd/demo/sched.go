package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/schedlock"
)

// The scheduled-job round: every instance's scheduler fires the same job on
// the same tick, each a little late by its own clock. Without a lock the job
// runs once per instance per tick; with schedlock.Run (a ShedLock-compatible
// lease row, in database time) once per tick.
const (
	schedInstances = 3
	schedTicks     = 5
	schedPeriod    = time.Second
	schedMaxLate   = 30 * time.Millisecond // how late an instance's tick may fire
	schedJobTime   = 20 * time.Millisecond // how long one run of the job takes
	// schedAtLeast keeps the job locked after a fast run, so that a late
	// instance does not run it again for the same tick; it must stay below
	// the period so that the next tick can run it. Half the period leaves
	// the most room on both sides (schedSlack).
	schedAtLeast = schedPeriod / 2
	schedAtMost  = 10 * time.Second
	// schedSlack is how late, after its tick began, a firing's Run may
	// return with the lease still guaranteeing one run per tick: a run of
	// tick k locks the job from its acquisition, which is at or after the
	// tick's start, until at most its Run's return plus schedAtLeast, so
	// the next tick finds it free if every Run returns within schedPeriod
	// less schedAtLeast; and a second instance runs tick k again only if
	// its own Run acquires more than schedAtLeast after the first one, so
	// after the tick's start. A slower firing (a machine so busy that one
	// statement stalls this long) may make a tick run twice or not at all.
	// Less 5 ms for the lease row's millisecond times.
	schedSlack = min(schedAtLeast, schedPeriod-schedAtLeast) - 5*time.Millisecond
)

// SchedResult is one half of the scheduled-job round.
type SchedResult struct {
	Locked  bool
	Runs    []int // job runs per tick
	Failed  int   // Run calls that returned an error
	Errors  []string
	Elapsed time.Duration
	// Slowest is the longest time from a tick's start to the return of a
	// Run (or job) fired for it.
	Slowest time.Duration
}

// InSlack reports whether every firing returned within schedSlack of its
// tick's start, where the lease guarantees one run per tick: a locked
// round that is not Exact although InSlack is a real failure.
func (r SchedResult) InSlack() bool { return r.Slowest <= schedSlack }

// Total is the number of job runs over all ticks.
func (r SchedResult) Total() int {
	n := 0
	for _, x := range r.Runs {
		n += x
	}
	return n
}

// Exact reports whether the job ran exactly once on every tick.
func (r SchedResult) Exact() bool {
	for _, x := range r.Runs {
		if x != 1 {
			return false
		}
	}
	return r.Failed == 0 && len(r.Runs) > 0
}

// schedJob is the job name in the lease table.
func (d *demo) schedJob() string { return d.cfg.Prefix + "report" }

// schedTable is the lease table, ShedLock's schema.
func (d *demo) schedTable() string { return d.cfg.Prefix + "shedlock" }

// schedRound fires the job on schedInstances instances for schedTicks ticks,
// through schedlock.Run when locked, else directly. Each instance has its
// own pool and Provider (its own locked_by). done counts the firings.
func (d *demo) schedRound(ctx context.Context, dsn string, locked bool, done *atomic.Int64) (SchedResult, error) {
	var providers []*schedlock.Provider
	if locked {
		ps, closePools, err := d.schedProviders(ctx, dsn)
		if err != nil {
			return SchedResult{}, err
		}
		defer closePools()
		providers = ps
	}
	s := &schedFirings{runs: make([]atomic.Int64, schedTicks)}
	cfg := schedlock.Config{Name: d.schedJob(), LockAtMostFor: schedAtMost, LockAtLeastFor: schedAtLeast}
	start := time.Now().Add(schedMaxLate) // every instance starts on the same clock
	var wg sync.WaitGroup
	for i := range schedInstances {
		fire := func(tick int) error {
			if locked {
				_, err := providers[i].Run(ctx, cfg, s.job(tick))
				return err
			}
			return s.job(tick)(ctx)
		}
		wg.Go(func() { s.fireInstance(ctx, start, fire, done) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return SchedResult{}, err
	}
	return s.result(locked, start), nil
}

// schedProviders opens a pool of one connection and a Provider on it for
// each instance, creates the lease table and empties it. closePools closes
// the pools; on an error they are closed already.
func (d *demo) schedProviders(ctx context.Context, dsn string) (providers []*schedlock.Provider, closePools func(), err error) {
	var dbs []*sqlx.DB
	closePools = func() {
		for _, db := range dbs {
			db.Close()
		}
	}
	defer func() {
		if err != nil {
			closePools()
		}
	}()
	for range schedInstances {
		db, err := openPrimary(dsn, 1)
		if err != nil {
			return nil, nil, err
		}
		dbs = append(dbs, db)
		p, err := schedlock.New(db.DB, schedlock.WithTable(d.schedTable()))
		if err != nil {
			return nil, nil, err
		}
		providers = append(providers, p)
	}
	if err := providers[0].CreateTable(ctx); err != nil {
		return nil, nil, fmt.Errorf("create the job lock table: %w", err)
	}
	if _, err := d.db.ExecContext(ctx, "DELETE FROM "+d.schedTable()); err != nil {
		return nil, nil, fmt.Errorf("reset the job lock table: %w", err)
	}
	return providers, closePools, nil
}

// schedFirings collects a round's firings from every instance.
type schedFirings struct {
	runs    []atomic.Int64 // job runs per tick
	mu      sync.Mutex     // guards t and slowest
	t       tally
	slowest time.Duration
}

// job returns the job for tick: it counts a run of the tick and takes
// schedJobTime.
func (s *schedFirings) job(tick int) func(context.Context) error {
	return func(ctx context.Context) error {
		s.runs[tick].Add(1)
		return sleep(ctx, schedJobTime)
	}
}

// fireInstance is one instance's scheduler: it calls fire for each of
// schedTicks ticks from start, each up to schedMaxLate late, and records
// each firing's error and time since its tick's start. It stops early when
// ctx ends.
func (s *schedFirings) fireInstance(ctx context.Context, start time.Time, fire func(tick int) error, done *atomic.Int64) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for tick := range schedTicks {
		late := rand.N(schedMaxLate)
		tickStart := start.Add(time.Duration(tick) * schedPeriod)
		timer.Reset(time.Until(tickStart.Add(late)))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		err := fire(tick)
		took := time.Since(tickStart)
		s.mu.Lock()
		s.t.record(err == nil, err)
		s.slowest = max(s.slowest, took)
		s.mu.Unlock()
		done.Add(1)
	}
}

// result is the round's SchedResult, once every instance has returned.
func (s *schedFirings) result(locked bool, start time.Time) SchedResult {
	r := SchedResult{Locked: locked, Failed: s.t.Failed, Errors: s.t.Errors, Elapsed: time.Since(start), Slowest: s.slowest}
	for i := range s.runs {
		r.Runs = append(r.Runs, int(s.runs[i].Load()))
	}
	return r
}

// dropSched removes the job lock table.
func (d *demo) dropSched(ctx context.Context) error {
	_, err := d.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+d.schedTable())
	return err
}

// playSched runs the scheduled-job round without and with the lock and
// prints its table.
func playSched(ctx context.Context, d *demo, dsn string, out io.Writer, tty bool) ([]SchedResult, error) {
	var results []SchedResult
	for _, locked := range []bool{false, true} {
		p := startProgress(out, tty, "round 4 (scheduled job, "+schedLabel(locked)+")", schedInstances*schedTicks, "firings")
		r, err := d.schedRound(ctx, dsn, locked, &p.Done)
		p.finish()
		if err != nil {
			return nil, fmt.Errorf("scheduled-job round: %w", err)
		}
		results = append(results, r)
	}
	return results, nil
}

func schedLabel(locked bool) string {
	if locked {
		return "schedlock.Run"
	}
	return "no lock"
}

// writeSchedResults prints the scheduled-job table.
func writeSchedResults(w io.Writer, results []SchedResult) {
	fmt.Fprintf(w, "scheduled job: %d instances fire the same job every %v for %d ticks, each up to %v late;\n"+
		"       with the lock: schedlock.Run, lockAtLeastFor %v (a ShedLock-compatible lease row, database time)\n\n",
		schedInstances, schedPeriod, schedTicks, schedMaxLate, schedAtLeast)
	rows := [][]string{{"round", "ticks", "job runs", "runs per tick", "time", ""}}
	for i, r := range results {
		per := make([]string, len(r.Runs))
		for j, n := range r.Runs {
			per[j] = strconv.Itoa(n)
		}
		v := "exact: once per tick"
		switch {
		case r.Exact():
		case r.Locked && r.Failed == 0 && !r.InSlack():
			v = fmt.Sprintf("not once per tick: a firing took %v, past the %v slack (machine too busy)", fmtDuration(r.Slowest), schedSlack)
		default:
			v = "WRONG: not once per tick"
			if r.Failed > 0 {
				v += fmt.Sprintf(", %d failed", r.Failed)
			}
		}
		rows = append(rows, []string{
			fmt.Sprintf("4%c %s", 'a'+i, schedLabel(r.Locked)),
			strconv.Itoa(len(r.Runs)), strconv.Itoa(r.Total()), strings.Join(per, " "), fmtDuration(r.Elapsed), v,
		})
	}
	writeTable(w, rows)
}
