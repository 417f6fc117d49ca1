package metricstest

import (
	"context"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// Run is what Drive did: its Lockers and keys.
type Run struct {
	Plain  *namedlock.Locker // observed, without fencing
	Fenced *namedlock.Locker // observed, with fencing
	Other  *namedlock.Locker // another instance: not observed, not watched
	Prefix string            // keyfmt.Prefix of every key
	Keys   []string          // every key used
}

// Stats returns the sum of the Stats of the two observed Lockers.
func (r *Run) Stats() namedlock.Stats {
	a, b := r.Plain.Stats(), r.Fenced.Stats()
	return namedlock.Stats{
		Held:               a.Held + b.Held,
		Waiting:            a.Waiting + b.Waiting,
		Queued:             a.Queued + b.Queued,
		Acquired:           a.Acquired + b.Acquired,
		NotAcquired:        a.NotAcquired + b.NotAcquired,
		Lost:               a.Lost + b.Lost,
		Handoffs:           a.Handoffs + b.Handoffs,
		ServerAcquisitions: a.ServerAcquisitions + b.ServerAcquisitions,
		CancelledWaits:     a.CancelledWaits + b.CancelledWaits,
		WaitDuration:       a.WaitDuration + b.WaitDuration,
		FencedCommits:      a.FencedCommits + b.FencedCommits,
		FenceWaitTimeouts:  a.FenceWaitTimeouts + b.FenceWaitTimeouts,
		FenceWaitDuration:  a.FenceWaitDuration + b.FenceWaitDuration,
	}
}

// Drive makes the Lockers, registers observe as their observer (behind
// recordingHolders) and passes each observed one to watch, then drives
// them through every outcome (see the package documentation). The Lockers
// are closed at the end of the test.
func Drive(t *testing.T, observe func(namedlock.Event), watch func(*namedlock.Locker)) *Run {
	t.Helper()
	srv := testdb.RequireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	d := &driver{
		t:      t,
		ctx:    ctx,
		admin:  testdb.OpenDB(t, srv.DSN),
		app:    testdb.OpenDB(t, srv.DSN+sep(srv.DSN)+"innodb_lock_wait_timeout=1"),
		prefix: testdb.UniqueName(t),
	}
	d.table = "nl_fence_" + sanitize(d.prefix)
	if err := namedlock.CreateFenceTable(ctx, d.app, d.table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = d.admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+d.table) })

	d.r = &Run{
		Plain:  locker(t, srv.DSN, namedlock.WithObserver(recordingHolders(observe)), namedlock.WithKeepAlive(100*time.Millisecond)),
		Fenced: locker(t, srv.DSN, namedlock.WithObserver(recordingHolders(observe)), namedlock.WithFencing(d.app, d.table)),
		Other:  locker(t, srv.DSN),
		Prefix: d.prefix,
	}
	watch(d.r.Plain)
	watch(d.r.Fenced)

	d.handoffs()
	d.notAcquired()
	d.lost()
	d.fenced()
	d.checkOutcomes()
	return d.r
}

// WhileWaiting runs f while a caller of r.Plain waits for a key that r.Other
// holds (Stats().Waiting is then 1), then lets the caller have the lock.
func (r *Run) WhileWaiting(t *testing.T, f func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := keyfmt.Key(r.Prefix, "waited")
	r.Keys = append(r.Keys, key)
	k, err := r.Other.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Plain.Do(ctx, key, func(context.Context) error { return nil }) }()
	for r.Plain.Stats().Waiting != 1 {
		if ctx.Err() != nil {
			t.Fatal("metricstest: the caller never waited")
		}
		time.Sleep(5 * time.Millisecond)
	}
	f()
	if err := k.Release(ctx); err != nil {
		t.Error(err)
	}
	if err := <-done; err != nil {
		t.Errorf("the waiting Do: %v", err)
	}
}

// recordingHolders returns an observer that records the session of each
// lock acquired, for testdb.HolderOf (on TiDB, IS_USED_LOCK names no
// holder), and then calls observe.
func recordingHolders(observe func(namedlock.Event)) func(namedlock.Event) {
	return func(e namedlock.Event) {
		if e.Outcome == namedlock.Acquired {
			testdb.RecordHolder(keyfmt.Portable(e.Key), e.Session)
		}
		observe(e)
	}
}

// locker opens a lock pool on dsn and a Locker on it, both closed at the
// end of the test.
func locker(t *testing.T, dsn string, opts ...namedlock.Option) *namedlock.Locker {
	t.Helper()
	db, err := pool.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	l, err := namedlock.New(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.Close()
		_ = db.Close()
	})
	return l
}

// sep is the character that adds a parameter to dsn.
func sep(dsn string) string {
	for _, c := range dsn {
		if c == '?' {
			return "&"
		}
	}
	return "?"
}

// sanitize keeps [a-z0-9] of s and turns the rest into '_', within the
// 64 characters of a table name.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	if len(b) > 50 {
		b = b[len(b)-50:]
	}
	return string(b)
}
