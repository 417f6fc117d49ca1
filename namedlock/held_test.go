package namedlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// TestHeld: Held answers for the key's server name whoever holds it: free;
// held by another instance, by the Locker itself, by a plain session's
// GET_LOCK on the mapped name of a key that is not portable; free again once
// released. It pins no connection. An empty key, an ended ctx and a closed
// Locker are errors.
func TestHeld(t *testing.T) {
	t.Parallel()
	a := newInstance(t, "")
	b := newInstance(t, "")
	key := uniqueKey(t, "Mixed Case") // its server name is a mapped one
	ctx := testCtx(t, 30*time.Second)
	held := func(in *instance) bool {
		t.Helper()
		h, err := in.locker.Held(ctx, key)
		if err != nil {
			t.Fatalf("Held(%q): %v", key, err)
		}
		return h
	}
	if held(a) {
		t.Error("a free key is held")
	}

	k := mustAcquire(t, b.locker, key)
	if !held(a) || !held(b) {
		t.Errorf("key held by b: Held on a %v, on b %v; want true, true", held(a), held(b))
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the key is still held after Release", func() bool { return !held(a) })

	raw, err := admin(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var got int64
	if err := raw.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", keyfmt.Portable(key)).Scan(&got); err != nil || got != 1 {
		t.Fatalf("plain GET_LOCK(%q) = %d, %v", keyfmt.Portable(key), got, err)
	}
	if !held(a) {
		t.Error("key held by a plain session's GET_LOCK of its server name: Held = false")
	}
	if h, err := a.locker.Held(ctx, keyfmt.Portable(key)); !h || err != nil {
		t.Errorf("Held of the server name itself = %v, %v; want true", h, err)
	}
	if _, err := raw.ExecContext(ctx, "DO RELEASE_LOCK(?)", keyfmt.Portable(key)); err != nil {
		t.Fatal(err)
	}
	if held(a) {
		t.Error("held after the plain session released it")
	}
	wantInUse(t, a.db, 0)
	if st := a.locker.Stats(); st.Acquired != 0 || st.NotAcquired != 0 {
		t.Errorf("Held counted in Stats: %+v", st)
	}

	if _, err := a.locker.Held(ctx, ""); !errors.Is(err, namedlock.ErrInvalidKey) {
		t.Errorf("Held(\"\") = %v, want ErrInvalidKey", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if h, err := a.locker.Held(cctx, key); h || !errors.Is(err, context.Canceled) {
		t.Errorf("Held with an ended ctx = %v, %v; want false, context.Canceled", h, err)
	} else {
		checkMessage(t, err, key)
	}
	if err := a.locker.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.locker.Held(ctx, key); !errors.Is(err, namedlock.ErrClosed) {
		t.Errorf("Held after Close = %v, want ErrClosed", err)
	}
}
