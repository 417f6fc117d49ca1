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
)

// driver is what Drive's steps share: the test, its context, the Run, the
// admin and application pools, the key prefix and the fence table.
type driver struct {
	t      *testing.T
	ctx    context.Context
	r      *Run
	admin  *sql.DB // kills sessions, drops the fence table
	app    *sql.DB // the fenced transactions, innodb_lock_wait_timeout 1 s
	prefix string
	table  string
}

// key returns the key named id under the run's prefix and records it in
// the Run's Keys.
func (d *driver) key(id string) string {
	k := keyfmt.Key(d.prefix, id)
	d.r.Keys = append(d.r.Keys, k)
	return k
}

// handoffs makes server acquisitions and handoffs: goroutines of one
// Locker on one key.
func (d *driver) handoffs() {
	d.t.Helper()
	hot := d.key("hot")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				if err := d.r.Plain.Do(d.ctx, hot, func(context.Context) error { time.Sleep(2 * time.Millisecond); return nil }); err != nil {
					d.t.Errorf("Do %s: %v", hot, err)
				}
			}
		})
	}
	wg.Wait()
}

// notAcquired makes tries fail on a key the other instance holds, and a
// wait end with its ctx (its server session is killed: a cancelled wait).
func (d *driver) notAcquired() {
	d.t.Helper()
	ctx, r := d.ctx, d.r
	held := d.key("held")
	k, err := r.Other.Acquire(ctx, held)
	if err != nil {
		d.t.Fatal(err)
	}
	for range 3 {
		if ran, err := r.Plain.TryDo(ctx, held, func(context.Context) error { return nil }); ran || err != nil {
			d.t.Errorf("TryDo on a held key = %v, %v; want false, nil", ran, err)
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
		d.t.Errorf("Do cancelled while it waits for a held key = %v, want ErrNotAcquired and context.Canceled", err)
	}
	if err := k.Release(ctx); err != nil {
		d.t.Fatal(err)
	}
}

// lost loses a lock: the holder's session is killed while fn runs.
func (d *driver) lost() {
	d.t.Helper()
	ctx := d.ctx
	lost := d.key("lost")
	err := d.r.Plain.Do(ctx, lost, func(fctx context.Context) error {
		id, err := testdb.HolderOf(ctx, d.admin, keyfmt.Portable(lost))
		if err != nil {
			return err
		}
		if _, err := d.admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
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
		d.t.Errorf("Do whose session was killed = %v, want ErrLockLost", err)
	}
}

// fenced makes fenced commits, a rollback, and a fence-wait timeout behind
// a stale transaction that holds the key's fence row.
func (d *driver) fenced() {
	d.t.Helper()
	ctx, r, app := d.ctx, d.r, d.app
	fenced := d.key("fenced")
	nothing := func(context.Context, *sql.Tx) error { return nil }
	for range 3 {
		if err := r.Fenced.DoTx(ctx, fenced, app, nil, nothing); err != nil {
			d.t.Errorf("fenced DoTx: %v", err)
		}
	}
	boom := errors.New("boom")
	if err := r.Fenced.DoTx(ctx, fenced, app, nil, func(context.Context, *sql.Tx) error { return boom }); !errors.Is(err, boom) {
		d.t.Errorf("fenced DoTx = %v, want fn's error", err)
	}
	stale, err := app.BeginTx(ctx, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	if _, err := stale.ExecContext(ctx, "UPDATE "+d.table+" SET token = token + 1 WHERE name = ?", keyfmt.Portable(fenced)); err != nil {
		d.t.Fatal(err)
	}
	if err := r.Fenced.DoTx(ctx, fenced, app, nil, nothing); !errors.Is(err, namedlock.ErrFenceWait) {
		d.t.Errorf("fenced DoTx behind a stale transaction = %v, want ErrFenceWait", err)
	}
	_ = stale.Rollback()
}

// checkOutcomes fails the test unless the Stats show every outcome the
// steps planned, so that a comparison with them cannot pass by counting
// nothing.
func (d *driver) checkOutcomes() {
	d.t.Helper()
	st := d.r.Stats()
	if st.Handoffs == 0 || st.ServerAcquisitions == 0 || st.NotAcquired != 4 || st.CancelledWaits != 1 || st.Lost != 1 ||
		st.FencedCommits != 3 || st.FenceWaitTimeouts != 1 || st.Held != 0 || st.Waiting != 0 {
		d.t.Fatalf("metricstest: the run did not show every outcome once as planned: %+v", st)
	}
}
