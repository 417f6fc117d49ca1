package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
)

// TestMisuseChangesNothing: a call given a nil fn, a nil or wrong database
// returns ErrInvalidArgument, and a nil ctx panics (as the standard
// library does), before anything changes: no lock taken or waited for, no
// counter moved, no event observed, no connection used. (A nil ctx used to
// leave Stats().Waiting at 1 for good; a nil fn took the lock, then
// panicked.)
func TestMisuseChangesNothing(t *testing.T) {
	leakCheck(t)
	var events atomic.Int64
	in := newInstance(t, "", namedlock.WithObserver(func(namedlock.Event) { events.Add(1) }))
	app := primary(t)
	key := uniqueKey(t, "k")
	ctx := testCtx(t, 20*time.Second)
	noop := func(context.Context) error { return nil }
	noopTx := func(context.Context, *sql.Tx) error { return nil }
	var nilCtx context.Context

	unchanged := func(t *testing.T, what string) {
		t.Helper()
		if st := in.locker.Stats(); st != (namedlock.Stats{}) {
			t.Errorf("%s: Stats = %+v, want all zero", what, st)
		}
		if n := events.Load(); n != 0 {
			t.Errorf("%s: %d events observed, want none", what, n)
		}
		if st := in.db.Stats(); st.InUse != 0 || st.OpenConnections > 1 {
			t.Errorf("%s: lock pool %+v, want no connection in use nor opened (beyond pool.Open's)", what, st)
		}
	}

	for name, call := range map[string]func() error{
		"Do(nil fn)":             func() error { return in.locker.Do(ctx, key, nil) },
		"TryDo(nil fn)":          func() error { _, err := in.locker.TryDo(ctx, key, nil); return err },
		"DoMulti(nil fn)":        func() error { return in.locker.DoMulti(ctx, []string{key}, nil) },
		"DoTx(nil fn)":           func() error { return in.locker.DoTx(ctx, key, app.DB, nil, nil) },
		"DoTx(nil db)":           func() error { return in.locker.DoTx(ctx, key, nil, nil, noopTx) },
		"DoTx(the lock pool)":    func() error { return in.locker.DoTx(ctx, key, in.db, nil, noopTx) },
		"CreateFenceTable(nil)":  func() error { return namedlock.CreateFenceTable(ctx, nil, "fence") },
		"CreateFenceTable(name)": func() error { return namedlock.CreateFenceTable(ctx, app.DB, "my fence") },
	} {
		err := call()
		if !errors.Is(err, namedlock.ErrInvalidArgument) {
			t.Errorf("%s = %v, want ErrInvalidArgument", name, err)
		}
		unchanged(t, name)
	}

	panics := func(name string, call func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
			unchanged(t, name)
		}()
		call()
	}
	panics("Acquire(nil ctx)", func() { _, _ = in.locker.Acquire(nilCtx, key) })
	panics("TryAcquire(nil ctx)", func() { _, _ = in.locker.TryAcquire(nilCtx, key) })
	panics("Do(nil ctx)", func() { _ = in.locker.Do(nilCtx, key, noop) })
	panics("TryDo(nil ctx)", func() { _, _ = in.locker.TryDo(nilCtx, key, noop) })
	panics("DoMulti(nil ctx)", func() { _ = in.locker.DoMulti(nilCtx, []string{key}, noop) })
	panics("DoTx(nil ctx)", func() { _ = in.locker.DoTx(nilCtx, key, app.DB, nil, noopTx) })

	// Release(nil ctx) panics and leaves the lock held: a Release with a
	// ctx then releases it.
	k := mustAcquire(t, in.locker, key)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Release(nil ctx) did not panic")
			}
		}()
		_ = k.Release(nilCtx)
	}()
	if st := in.locker.Stats(); st.Held != 1 || k.Err() != nil {
		t.Errorf("after Release(nil ctx): Stats %+v, Err() %v; want Held 1, nil", st, k.Err())
	}
	if err := k.Release(ctx); err != nil {
		t.Errorf("Release after Release(nil ctx): %v", err)
	}
	if id := holderOf(t, admin(t), k.Name()); id != 0 {
		t.Errorf("held by %d after Release", id)
	}
	if st := in.locker.Stats(); st.Held != 0 || st.Waiting != 0 {
		t.Errorf("Stats at the end = %+v, want Held 0, Waiting 0", st)
	}
}

// TestNilContextWithFencing: with fencing, a nil ctx panics before the
// fence table is checked and before any counter moves.
func TestNilContextWithFencing(t *testing.T) {
	srv := testdb.RequireReal(t)
	app := testdb.OpenDB(t, srv.DSN)
	in, _ := fenced(t, app)
	var nilCtx context.Context
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Acquire(nil ctx) did not panic")
			}
		}()
		_, _ = in.locker.Acquire(nilCtx, uniqueKey(t, "k"))
	}()
	if st := in.locker.Stats(); st != (namedlock.Stats{}) {
		t.Errorf("Stats = %+v, want all zero", st)
	}
}
