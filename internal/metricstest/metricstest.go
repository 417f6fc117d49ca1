package metricstest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
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
	admin := testdb.OpenDB(t, srv.DSN)
	app := testdb.OpenDB(t, srv.DSN+sep(srv.DSN)+"innodb_lock_wait_timeout=1")
	prefix := testdb.UniqueName(t)
	table := "nl_fence_" + sanitize(prefix)
	if err := namedlock.CreateFenceTable(ctx, app, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) })

	r := &Run{
		Plain:  locker(t, srv.DSN, namedlock.WithObserver(recordingHolders(observe)), namedlock.WithKeepAlive(100*time.Millisecond)),
		Fenced: locker(t, srv.DSN, namedlock.WithObserver(recordingHolders(observe)), namedlock.WithFencing(app, table)),
		Other:  locker(t, srv.DSN),
		Prefix: prefix,
	}
	watch(r.Plain)
	watch(r.Fenced)
	key := func(id string) string {
		k := keyfmt.Key(prefix, id)
		r.Keys = append(r.Keys, k)
		return k
	}

	// Server acquisitions and handoffs: goroutines of one Locker on one key.
	hot := key("hot")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				if err := r.Plain.Do(ctx, hot, func(context.Context) error { time.Sleep(2 * time.Millisecond); return nil }); err != nil {
					t.Errorf("Do %s: %v", hot, err)
				}
			}
		})
	}
	wg.Wait()

	// Not acquired: tries on a key the other instance holds, and a wait
	// that ends with its ctx (its server session is killed: a cancelled wait).
	held := key("held")
	k, err := r.Other.Acquire(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if ran, err := r.Plain.TryDo(ctx, held, func(context.Context) error { return nil }); ran || err != nil {
			t.Errorf("TryDo on a held key = %v, %v; want false, nil", ran, err)
		}
	}
	// Cancelled, not timed out: MariaDB would end a wait with a deadline
	// itself, with no session to kill.
	wctx, wcancel := context.WithCancel(ctx)
	timer := time.AfterFunc(100*time.Millisecond, wcancel)
	err = r.Plain.Do(wctx, held, func(context.Context) error { return nil })
	timer.Stop()
	wcancel()
	if !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("Do cancelled while it waits for a held key = %v, want ErrNotAcquired and context.Canceled", err)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Lost: the holder's session is killed while fn runs.
	lost := key("lost")
	err = r.Plain.Do(ctx, lost, func(fctx context.Context) error {
		id, err := testdb.HolderOf(ctx, admin, keyfmt.Portable(lost))
		if err != nil {
			return err
		}
		if _, err := admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			return err
		}
		select {
		case <-fctx.Done():
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("metricstest: loss not detected within 5 s of the KILL")
		}
	})
	if !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Do whose session was killed = %v, want ErrLockLost", err)
	}

	// Fenced: commits, a rollback, and a fence-wait timeout behind a stale
	// transaction that holds the key's fence row.
	fenced := key("fenced")
	nothing := func(context.Context, *sql.Tx) error { return nil }
	for range 3 {
		if err := r.Fenced.DoTx(ctx, fenced, app, nil, nothing); err != nil {
			t.Errorf("fenced DoTx: %v", err)
		}
	}
	boom := errors.New("boom")
	if err := r.Fenced.DoTx(ctx, fenced, app, nil, func(context.Context, *sql.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("fenced DoTx = %v, want fn's error", err)
	}
	stale, err := app.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stale.ExecContext(ctx, "UPDATE "+table+" SET token = token + 1 WHERE name = ?", keyfmt.Portable(fenced)); err != nil {
		t.Fatal(err)
	}
	if err := r.Fenced.DoTx(ctx, fenced, app, nil, nothing); !errors.Is(err, namedlock.ErrFenceWait) {
		t.Errorf("fenced DoTx behind a stale transaction = %v, want ErrFenceWait", err)
	}
	_ = stale.Rollback()

	st := r.Stats()
	if st.Handoffs == 0 || st.ServerAcquisitions == 0 || st.NotAcquired != 4 || st.CancelledWaits != 1 || st.Lost != 1 ||
		st.FencedCommits != 3 || st.FenceWaitTimeouts != 1 || st.Held != 0 || st.Waiting != 0 {
		t.Fatalf("metricstest: the run did not show every outcome once as planned: %+v", st)
	}
	return r
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
