package gocronlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"database/sql"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/schedlock"
)

// TestMain stops the test server and checks for leaked goroutines.
func TestMain(m *testing.M) { testdb.Main(m) }

// uniqueName is testdb.UniqueName usable as a table name.
func uniqueName(tb testing.TB) string {
	return strings.ReplaceAll(testdb.UniqueName(tb), "-", "_")
}

// mustProvider returns schedlock.New(db, opts...), failing the test on an
// error.
func mustProvider(tb testing.TB, db *sql.DB, opts ...schedlock.Option) *schedlock.Provider {
	tb.Helper()
	p, err := schedlock.New(db, opts...)
	if err != nil {
		tb.Fatalf("schedlock.New: %v", err)
	}
	return p
}

// mustLocker returns namedlock.New(db, opts...), failing the test on an
// error. The caller closes it.
func mustLocker(tb testing.TB, db *sql.DB, opts ...namedlock.Option) *namedlock.Locker {
	tb.Helper()
	l, err := namedlock.New(db, opts...)
	if err != nil {
		tb.Fatalf("namedlock.New: %v", err)
	}
	return l
}

// mustLease returns NewLeaseLocker(p, o), failing the test on an error.
func mustLease(tb testing.TB, p *schedlock.Provider, o LeaseOptions) gocron.Locker {
	tb.Helper()
	l, err := NewLeaseLocker(p, o)
	if err != nil {
		tb.Fatalf("NewLeaseLocker: %v", err)
	}
	return l
}

// mustNamed returns NewNamedLocker(l), failing the test on an error.
func mustNamed(tb testing.TB, l *namedlock.Locker) gocron.Locker {
	tb.Helper()
	n, err := NewNamedLocker(l)
	if err != nil {
		tb.Fatalf("NewNamedLocker: %v", err)
	}
	return n
}

// tickCounter counts job runs per wall-clock second (the cron tick).
type tickCounter struct {
	mu   sync.Mutex
	runs map[int64][]string // tick -> instances that ran it
}

func (c *tickCounter) record(instance string) {
	tick := time.Now().Unix()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[int64][]string{}
	}
	c.runs[tick] = append(c.runs[tick], instance)
}

// countingLocker wraps a Locker to count refused Locks (skipped runs).
type countingLocker struct {
	gocron.Locker
	mu      sync.Mutex
	refused []error
}

func (c *countingLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	lk, err := c.Locker.Lock(ctx, key)
	if err != nil {
		c.mu.Lock()
		c.refused = append(c.refused, err)
		c.mu.Unlock()
	}
	return lk, err
}

// runSchedulers starts one gocron scheduler per locker (an "instance"
// each), all with a job every second, lets them run for ticks seconds from
// the next second boundary, shuts them down and returns the runs per tick.
func runSchedulers(t *testing.T, lockers []gocron.Locker, jobName string, ticks int,
	job func(instance string)) map[int64][]string {
	t.Helper()
	var counter tickCounter
	var scheds []gocron.Scheduler
	for i, locker := range lockers {
		instance := fmt.Sprintf("instance-%d", i)
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
		if err != nil {
			t.Fatal(err)
		}
		opts := []gocron.JobOption{}
		if jobName != "" {
			opts = append(opts, gocron.WithName(jobName))
		}
		if _, err := s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
			counter.record(instance)
			if job != nil {
				job(instance)
			}
		}), opts...); err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	for _, s := range scheds {
		s.Start()
	}
	// Stop just after a boundary plus the run time, so no tick is cut off.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Duration(ticks)*time.Second + 500*time.Millisecond)))
	for _, s := range scheds {
		if err := s.Shutdown(); err != nil {
			t.Error(err)
		}
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	return counter.runs
}

func checkOncePerTick(t *testing.T, runs map[int64][]string, minTicks int) {
	t.Helper()
	if len(runs) < minTicks {
		t.Errorf("%d ticks ran, want at least %d: %v", len(runs), minTicks, runs)
	}
	for tick, who := range runs {
		if len(who) != 1 {
			t.Errorf("tick %s ran %d times: %v", time.Unix(tick, 0).UTC().Format(time.TimeOnly), len(who), who)
		}
	}
}
