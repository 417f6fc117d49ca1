package gocronlock

import (
	"context"
	"database/sql"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/schedlock"
)

// leaseRun is one run as a recordingLocker saw it: the row its lease wrote
// (database time, ms since the epoch) and when the run began and ended
// (application time: after Lock returned, when Unlock was called).
type leaseRun struct {
	instance            string
	lockedAt, lockUntil int64
	began, ended        time.Time
	unlockErr           error
}

// recordingLocker wraps the lease locker of one instance and records each
// run's lease, read from the row right after Lock.
type recordingLocker struct {
	gocron.Locker
	instance string
	db       *sql.DB
	table    string
	mu       *sync.Mutex
	runs     *[]*leaseRun
	refused  *atomic.Int32
}

func (r *recordingLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	lk, err := r.Locker.Lock(ctx, key)
	if err != nil {
		r.refused.Add(1)
		return nil, err
	}
	run := &leaseRun{instance: r.instance}
	var by string
	if err := r.db.QueryRowContext(ctx, "SELECT CAST(UNIX_TIMESTAMP(locked_at)*1000 AS SIGNED), "+
		"CAST(UNIX_TIMESTAMP(lock_until)*1000 AS SIGNED), locked_by FROM `"+r.table+"` WHERE name = ?",
		LeaseName(key)).Scan(&run.lockedAt, &run.lockUntil, &by); err != nil || by != r.instance {
		run.lockedAt = -1 // the row was not this lease's by the time it was read
	}
	run.began = time.Now()
	r.mu.Lock()
	*r.runs = append(*r.runs, run)
	r.mu.Unlock()
	return recordedLock{lk, run, r.mu}, nil
}

type recordedLock struct {
	gocron.Lock
	run *leaseRun
	mu  *sync.Mutex
}

func (l recordedLock) Unlock(ctx context.Context) error {
	l.mu.Lock()
	l.run.ended = time.Now()
	l.mu.Unlock()
	err := l.Lock.Unlock(ctx)
	l.mu.Lock()
	l.run.unlockErr = err
	l.mu.Unlock()
	return err
}

// Two gocron schedulers in gocron's default mode (a job's runs may overlap
// on one instance), ticking 250 ms apart every 500 ms. The first run takes
// 700 ms, longer than LockAtMostFor (400 ms); later runs 380 ms. Without
// lease identity, the first run's Unlock ended the lease its own instance
// had taken again meanwhile, and the other instance ran the job inside that
// lease.
//
// No two runs may overlap while the earlier one's lease was valid: a run
// whose lease began (locked_at, database time) before the lock_until of a
// run still going (it had not called Unlock when the later one began) is a
// double run no LockAtMostFor explains. The check uses the row's own
// times, so a slow machine cannot fake or hide one.
func TestTwoSchedulersNoOverlapInsideALease(t *testing.T) {
	t.Parallel()
	twoSchedulers(t, func(p *schedlock.Provider, o LeaseOptions) gocron.Locker { return mustLease(t, p, o) })
}

// The same with a new lease locker for every run, so the locker's refusal
// of a run while its previous run of the job goes on is out of the way, and
// only the lease identity keeps the first run's late Unlock off the lease
// its instance took again meanwhile (on the same Provider, so with the
// same locked_by). With leases matched by name and locked_by alone, that
// Unlock ends the newer lease and the other instance runs the job inside
// it.
func TestTwoSchedulersNoOverlapFreshLockerPerRun(t *testing.T) {
	t.Parallel()
	twoSchedulers(t, func(p *schedlock.Provider, o LeaseOptions) gocron.Locker { return freshLeaseLocker{p, o} })
}

// freshLeaseLocker takes each run's lock with a new NewLeaseLocker.
type freshLeaseLocker struct {
	p *schedlock.Provider
	o LeaseOptions
}

func (f freshLeaseLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	l, err := NewLeaseLocker(f.p, f.o)
	if err != nil {
		return nil, err
	}
	return l.Lock(ctx, key)
}

func twoSchedulers(t *testing.T, newLocker func(*schedlock.Provider, LeaseOptions) gocron.Locker) {
	t.Helper()
	srv := testdb.RequireReal(t)
	setup := testdb.OpenDB(t, srv.DSN)
	table := uniqueName(t)
	if err := mustProvider(t, setup, schedlock.WithTable(table)).CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = setup.Exec("DROP TABLE IF EXISTS `" + table + "`") })

	const lockAtMostFor, period = 400 * time.Millisecond, 500 * time.Millisecond
	var (
		mu      sync.Mutex
		runs    []*leaseRun
		refused atomic.Int32
		started atomic.Int32
	)
	job := testdb.UniqueName(t)
	var scheds []gocron.Scheduler
	for i, instance := range []string{"A", "C"} {
		p := mustProvider(t, testdb.OpenDB(t, srv.DSN), schedlock.WithTable(table), schedlock.WithLockedBy(instance))
		locker := &recordingLocker{Locker: newLocker(p, LeaseOptions{LockAtMostFor: lockAtMostFor}),
			instance: instance, db: setup, table: table, mu: &mu, runs: &runs, refused: &refused}
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.NewJob(gocron.DurationJob(period), gocron.NewTask(func() {
			if started.Add(1) == 1 {
				time.Sleep(700 * time.Millisecond)
			} else {
				time.Sleep(380 * time.Millisecond)
			}
		}), gocron.WithName(job), gocron.WithStartAt(gocron.WithStartImmediately())); err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
		if i == 0 {
			s.Start()
			time.Sleep(period / 2)
		} else {
			s.Start()
		}
	}
	time.Sleep(3 * time.Second)
	for _, s := range scheds {
		if err := s.Shutdown(); err != nil {
			t.Error(err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].began.Before(runs[j].began) })
	overlaps := 0
	for i, a := range runs {
		for _, b := range runs[i+1:] {
			if a.lockedAt < 0 || b.lockedAt < 0 {
				continue
			}
			running := a.ended.IsZero() || b.began.Before(a.ended)
			if running && b.lockedAt < a.lockUntil {
				overlaps++
				t.Errorf("run on %s (lease %d..%d) began while the run on %s (lease %d..%d) still ran, %d ms inside its lease",
					b.instance, b.lockedAt, b.lockUntil, a.instance, a.lockedAt, a.lockUntil, a.lockUntil-b.lockedAt)
			}
		}
	}
	for _, r := range runs {
		t.Logf("%s: lease %d..%d, ran %v, unlock: %v", r.instance, r.lockedAt, r.lockUntil,
			r.ended.Sub(r.began).Round(time.Millisecond), r.unlockErr)
	}
	if len(runs) < 3 {
		t.Errorf("%d runs in 3 s of 500 ms ticks", len(runs))
	}
	t.Logf("%d runs, %d refused locks, %d overlaps inside a lease", len(runs), refused.Load(), overlaps)
}
