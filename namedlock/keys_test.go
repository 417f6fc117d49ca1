package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// TestEmptyKey: the empty key is ErrInvalidKey before any database call —
// even on a closed pool, whose first call would fail otherwise.
func TestEmptyKey(t *testing.T) {
	leakCheck(t)
	in := newInstance(t, "")
	if err := in.db.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 5*time.Second)
	ran := false
	fn := func(context.Context) error { ran = true; return nil }
	checks := map[string]error{}
	_, checks["Acquire"] = in.locker.Acquire(ctx, "")
	_, checks["TryAcquire"] = in.locker.TryAcquire(ctx, "")
	checks["Do"] = in.locker.Do(ctx, "", fn)
	_, checks["TryDo"] = in.locker.TryDo(ctx, "", fn)
	checks["DoMulti"] = in.locker.DoMulti(ctx, []string{""}, fn)
	checks["DoTx"] = in.locker.DoTx(ctx, "", primary(t).DB, nil, func(context.Context, *sql.Tx) error { ran = true; return nil })
	for call, err := range checks {
		if !errors.Is(err, namedlock.ErrInvalidKey) {
			t.Errorf("%s(\"\") = %v, want ErrInvalidKey", call, err)
		}
	}
	if ran {
		t.Error("fn ran for an empty key")
	}
	// The same calls with a real key do reach the (closed) pool.
	if _, err := in.locker.TryAcquire(ctx, "x"); err == nil || errors.Is(err, namedlock.ErrInvalidKey) {
		t.Errorf("TryAcquire on a closed pool = %v, want a pool error", err)
	}
	if st := in.locker.Stats(); st.Acquired != 0 || st.Held != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestKeys: long, unicode, SQL-metacharacter and NUL keys all work: each is
// held at the server under its portable name (at most 64 ASCII characters),
// excludes another instance, and is free again after release. Keys that
// differ only in case, in their last character past the readable prefix, or
// in one emoji are different locks.
func TestKeys(t *testing.T) {
	t.Parallel()
	a := newInstance(t, "")
	b := newInstance(t, "")
	adm := admin(t)
	prim := primary(t)
	victim := counterTable(t, prim, 1)
	base := uniqueKey(t, "")
	long := base + strings.Repeat("x", 1000-len(base))
	keys := map[string]string{
		"long":          long,
		"unicode":       base + "café ключ 商品 ñ",
		"emoji":         base + "🔒🚀",
		"drop table":    base + "'; DROP TABLE " + victim + "; --",
		"backslashes":   base + `\\' \" \` + "\\",
		"quotes":        base + `"it's" ` + "`x`",
		"percent":       base + "%_%",
		"nul":           base + "a\x00b",
		"newline":       base + "line1\nline2\r\t",
		"trailing sp":   base + "trailing ",
		"upper":         base + "Product:42",
		"portable":      base + "product:42",
		"long + 1 char": long[:999] + "y",
		"emoji 2":       base + "🔒🚁",
	}
	ctx := testCtx(t, 30*time.Second)
	names := map[string]string{}
	held := map[string]*namedlock.Lock{}
	for what, key := range keys {
		k, err := a.locker.TryAcquire(ctx, key)
		if err != nil || k == nil {
			t.Errorf("%s: TryAcquire: %v, %v", what, k, err)
			continue
		}
		held[what] = k
		name := k.Name()
		if len(name) > keyfmt.MaxLen || !isASCII(name) {
			t.Errorf("%s: server name %q is not portable", what, name)
		}
		if other, dup := names[name]; dup {
			t.Errorf("%s and %s share the server name %q", what, other, name)
		}
		names[name] = what
		if id := holderOf(t, adm, name); id == 0 {
			t.Errorf("%s: IS_USED_LOCK(%q) is NULL while held", what, name)
		}
	}
	if len(held) != len(keys) {
		t.Fatalf("%d of %d keys held at once, want all: they are all different locks", len(held), len(keys))
	}
	// Each excludes itself: another instance cannot take it, nor can the
	// holder's own Locker.
	for what, key := range keys {
		for _, in := range []*instance{b, a} {
			if k, err := in.locker.TryAcquire(ctx, key); k != nil || err != nil {
				t.Errorf("%s: TryAcquire of a held key = %v, %v; want nil, nil", what, k, err)
				if k != nil {
					_ = k.Release(ctx)
				}
			}
		}
	}
	var n int
	if err := prim.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+victim).Scan(&n); err != nil || n != 1 {
		t.Errorf("the table a key tried to drop: %d rows, %v", n, err)
	}
	for what, k := range held {
		if err := k.Release(ctx); err != nil {
			t.Errorf("%s: Release: %v", what, err)
		}
		if id := holderOf(t, adm, k.Name()); id != 0 {
			t.Errorf("%s: still held by %d after Release", what, id)
		}
	}
	wantInUse(t, a.db, 0)
	wantInUse(t, b.db, 0)
	// And free for the other instance now.
	for what, key := range keys {
		if ran, err := b.locker.TryDo(ctx, key, func(context.Context) error { return nil }); !ran || err != nil {
			t.Errorf("%s: TryDo after release: %v, %v", what, ran, err)
		}
	}
}

// TestMixedCaseKeysAreDifferent: "Product:42" and "product:42" are different
// keys, on every server (MySQL compares lock names case-insensitively; the
// mapping keeps them apart): two instances hold them at once, and each
// excludes itself.
func TestMixedCaseKeysAreDifferent(t *testing.T) {
	t.Parallel()
	a := newInstance(t, "")
	b := newInstance(t, "")
	base := uniqueKey(t, "")
	upper, lower := base+"Product:42", base+"product:42"
	ku := mustAcquire(t, a.locker, upper)
	kl := mustAcquire(t, b.locker, lower)
	if ku.Name() == kl.Name() || strings.EqualFold(ku.Name(), kl.Name()) {
		t.Errorf("server names %q and %q fold together", ku.Name(), kl.Name())
	}
	ctx := testCtx(t, 5*time.Second)
	for _, tc := range []struct {
		in  *instance
		key string
	}{{b, upper}, {a, lower}} {
		if k, err := tc.in.locker.TryAcquire(ctx, tc.key); k != nil || err != nil {
			t.Errorf("TryAcquire(%q) while held = %v, %v; want nil, nil", tc.key, k, err)
		}
	}
	_ = ku.Release(ctx)
	_ = kl.Release(ctx)
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
