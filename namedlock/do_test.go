package namedlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

type panicValue struct{ msg string }

// TestDoPanic: a panic in fn releases the lock and is re-raised with the
// same value; the key is free at once for another instance.
func TestDoPanic(t *testing.T) {
	leakCheck(t)
	in := newInstance(t, "")
	other := newInstance(t, "")
	adm := admin(t)
	key := uniqueKey(t, "k")
	want := &panicValue{"boom"}
	ctx := testCtx(t, 10*time.Second)

	var got any
	func() {
		defer func() { got = recover() }()
		_ = in.locker.Do(ctx, key, func(context.Context) error {
			if holderOf(t, adm, keyfmt.Portable(key)) == 0 {
				t.Error("not held inside fn")
			}
			panic(want)
		})
		t.Error("Do returned normally after fn panicked")
	}()
	if got != want {
		t.Errorf("recovered %v, want the same value fn panicked with (%v)", got, want)
	}
	if id := holderOf(t, adm, keyfmt.Portable(key)); id != 0 {
		t.Errorf("held by session %d after the panic", id)
	}
	if ran, err := other.locker.TryDo(ctx, key, func(context.Context) error { return nil }); !ran || err != nil {
		t.Errorf("TryDo by another instance after the panic: %v, %v", ran, err)
	}
	if st := in.locker.Stats(); st.Held != 0 || st.Acquired != 1 {
		t.Errorf("Stats = %+v, want Held 0, Acquired 1", st)
	}
	wantInUse(t, in.db, 0)

	// TryDo too.
	func() {
		defer func() { got = recover() }()
		_, _ = in.locker.TryDo(ctx, key, func(context.Context) error { panic("try") })
	}()
	if got != "try" {
		t.Errorf("TryDo: recovered %v, want \"try\"", got)
	}
	if id := holderOf(t, adm, keyfmt.Portable(key)); id != 0 {
		t.Errorf("held by session %d after TryDo's panic", id)
	}
	wantInUse(t, in.db, 0)
}

// TestDoFnError: fn's error is returned as is (errors.Is) and the lock is
// released; fn's ctx is cancelled once Do has returned.
func TestDoFnError(t *testing.T) {
	leakCheck(t)
	in := newInstance(t, "")
	adm := admin(t)
	key := uniqueKey(t, "k")
	fnErr := errors.New("business failure")
	var fnCtx context.Context
	err := in.locker.Do(testCtx(t, 10*time.Second), key, func(ctx context.Context) error {
		fnCtx = ctx
		if ctx.Err() != nil {
			t.Errorf("fn's ctx ended while held: %v", ctx.Err())
		}
		return fnErr
	})
	if !errors.Is(err, fnErr) {
		t.Errorf("Do = %v, want fn's error", err)
	}
	if errors.Is(err, namedlock.ErrLockLost) || errors.Is(err, namedlock.ErrNotAcquired) {
		t.Errorf("Do = %v: fn's error must not be dressed as a lock error", err)
	}
	if fnCtx.Err() == nil {
		t.Error("fn's ctx still live after Do returned")
	}
	if id := holderOf(t, adm, keyfmt.Portable(key)); id != 0 {
		t.Errorf("held by session %d after fn failed", id)
	}
	if err := in.locker.Do(testCtx(t, 10*time.Second), key, func(context.Context) error { return nil }); err != nil {
		t.Errorf("Do after a failed Do: %v", err)
	}
	wantInUse(t, in.db, 0)
}

// TestDoFnCtxCarriesValues: fn's ctx is derived from the caller's ctx.
func TestDoFnCtxCarriesValues(t *testing.T) {
	t.Parallel()
	in := newInstance(t, "")
	type ctxKey struct{}
	ctx := context.WithValue(testCtx(t, 10*time.Second), ctxKey{}, "v")
	err := in.locker.Do(ctx, uniqueKey(t, "k"), func(ctx context.Context) error {
		if ctx.Value(ctxKey{}) != "v" {
			t.Error("fn's ctx lost the caller's values")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
