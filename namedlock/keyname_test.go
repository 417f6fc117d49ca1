package namedlock_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// TestKeyNameOnServer pins the naming contract against a plain connection
// that knows nothing of this module: keyfmt.Key only joins, the Locker maps
// once, so the server name of key k is keyfmt.Portable(k).
//
// For each key: (a) while a Locker holds it, IS_USED_LOCK(Portable(key)) on
// the plain connection is the holder's session and Lock.Name() is
// Portable(key); (b) while the plain connection holds
// GET_LOCK(Portable(key), 0), the Locker's TryAcquire(key) finds it held
// (nil, nil); (c) for a portable key, the plain connection's
// GET_LOCK(key), unmapped, excludes the Locker too.
//
// Each key is also compared with the plain join prefix + ":" + id computed
// here, so a Key that maps (and a Locker that then maps again) fails.
func TestKeyNameOnServer(t *testing.T) {
	t.Parallel()
	srv := testdb.Get(t)
	tests := []struct {
		desc     string
		portable bool
		// build returns Key's arguments and their plain join, from a name
		// unique to the subtest.
		build func(u string) (prefix string, id any, joined string)
	}{
		{"portable", true, func(u string) (string, any, string) {
			return u, 42, u + ":42" // like Key("product", 42)
		}},
		{"upper case", false, func(u string) (string, any, string) {
			return u + "/Product", 42, u + "/Product:42" // like Key("Product", 42)
		}},
		{"spaces and unicode", false, func(u string) (string, any, string) {
			return u, "café ключ 商品 🔒", u + ":café ключ 商品 🔒"
		}},
		{"100 chars", false, func(u string) (string, any, string) {
			id := strings.Repeat("x", 100-len(u)-1)
			return u, []byte(id), u + ":" + id
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			u := testdb.UniqueName(t)
			prefix, id, joined := tc.build(u)
			if keyfmt.IsPortable(joined) != tc.portable {
				t.Fatalf("test setup: IsPortable(%q) = %v, want %v", joined, !tc.portable, tc.portable)
			}
			key := keyfmt.Key(prefix, id)
			if key != joined {
				t.Errorf("keyfmt.Key(%q, %T id) = %q, want the plain join %q: Key must not map", prefix, id, key, joined)
			}
			name := keyfmt.Portable(key)
			if want := keyfmt.Portable(joined); name != want {
				t.Errorf("server name keyfmt.Portable(Key(...)) = %q, want keyfmt.Portable(%q) = %q: mapped more than once", name, joined, want)
			}
			if tc.portable && name != key {
				t.Errorf("portable key %q has the server name %q, want the key itself", key, name)
			}
			t.Logf("key %q -> server name %q", key, name)

			ctx := testCtx(t, 30*time.Second)
			// One connection only, so the session that the pool hands out
			// now is the one the Locker will pin for the lock.
			in := newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(1)})
			holder := poolSession(ctx, t, in.db)
			raw := plainConn(ctx, t, srv.DSN)
			rawID := connectionID(ctx, t, raw)
			if rawID == holder {
				t.Fatalf("the plain connection and the lock pool share session %d", holder)
			}

			// (a) The Locker holds key: the server knows it as Portable(key).
			k, err := in.locker.TryAcquire(ctx, key)
			if err != nil || k == nil {
				t.Fatalf("TryAcquire(%q) on a free key: %v, %v", key, k, err)
			}
			if k.Name() != name {
				t.Errorf("Lock.Name() = %q, want keyfmt.Portable(key) = %q", k.Name(), name)
			}
			if k.Key() != key {
				t.Errorf("Lock.Key() = %q, want %q", k.Key(), key)
			}
			if used := isUsedLock(ctx, t, raw, name); !used.Valid {
				t.Errorf("IS_USED_LOCK(%q) on a plain connection is NULL while the Locker holds %q", name, key)
			} else if !srv.Flavor.NamesHolder() && used.Int64 != 1 {
				t.Errorf("IS_USED_LOCK(%q) = %d on %s, want 1 (held, by a session TiDB does not name)", name, used.Int64, srv.Name)
			} else if srv.Flavor.NamesHolder() && used.Int64 != holder {
				t.Errorf("IS_USED_LOCK(%q) = %d, want the holder's session %d", name, used.Int64, holder)
			}
			if !tc.portable {
				// The unmapped key is not the server's name. (MySQL 8
				// rejects some of these names outright: that is fine too.)
				var used sql.NullInt64
				if err := raw.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", key).Scan(&used); err == nil && used.Valid {
					t.Errorf("IS_USED_LOCK of the unmapped key %q = %d, want NULL", key, used.Int64)
				}
			}
			if err := k.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if used := isUsedLock(ctx, t, raw, name); used.Valid {
				t.Fatalf("IS_USED_LOCK(%q) = %d after Release, want NULL", name, used.Int64)
			}

			// (b) The plain connection holds Portable(key): the Locker is
			// excluded.
			rawExcludes(ctx, t, raw, in.locker, name, key)

			// (c) A portable key is its own server name: taking the key
			// itself with plain SQL excludes the Locker.
			if tc.portable {
				rawExcludes(ctx, t, raw, in.locker, key, key)
			}

			// With the plain connection's lock gone, the Locker takes the
			// key again: the refusals above were the plain lock's doing.
			if ran, err := in.locker.TryDo(ctx, key, func(context.Context) error { return nil }); !ran || err != nil {
				t.Errorf("TryDo(%q) after the plain connection released it: %v, %v", key, ran, err)
			}
		})
	}
}

// rawExcludes takes GET_LOCK(name, 0) on raw, checks that l.TryAcquire(key)
// finds it held (nil, nil) while raw holds it, and releases it.
func rawExcludes(ctx context.Context, t *testing.T, raw *sql.Conn, l *namedlock.Locker, name, key string) {
	t.Helper()
	var got sql.NullInt64
	if err := raw.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("plain GET_LOCK(%q, 0) = %v, %v; want 1", name, got, err)
	}
	k, err := l.TryAcquire(ctx, key)
	if k != nil || err != nil {
		t.Errorf("TryAcquire(%q) while a plain connection holds GET_LOCK(%q) = %v, %v; want nil, nil", key, name, k, err)
	}
	if k != nil {
		_ = k.Release(ctx)
	}
	if err := raw.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", name).Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("plain RELEASE_LOCK(%q) = %v, %v; want 1", name, got, err)
	}
}

// plainConn opens a plain database/sql pool on dsn (sql.Open, no option of
// this module) and returns one connection of it, both closed at the end of
// the test.
func plainConn(ctx context.Context, t *testing.T, dsn string) *sql.Conn {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("plain connection: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// connectionID returns CONNECTION_ID() of c.
func connectionID(ctx context.Context, t *testing.T, c *sql.Conn) int64 {
	t.Helper()
	var id int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatalf("CONNECTION_ID(): %v", err)
	}
	return id
}

// poolSession returns the server session of the connection db hands out,
// and gives the connection back.
func poolSession(ctx context.Context, t *testing.T, db *sql.DB) int64 {
	t.Helper()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("lock pool connection: %v", err)
	}
	defer c.Close()
	return connectionID(ctx, t, c)
}

// isUsedLock returns IS_USED_LOCK(name) as seen on c.
func isUsedLock(ctx context.Context, t *testing.T, c *sql.Conn, name string) sql.NullInt64 {
	t.Helper()
	var id sql.NullInt64
	if err := c.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil {
		t.Fatalf("IS_USED_LOCK(%q): %v", name, err)
	}
	return id
}
