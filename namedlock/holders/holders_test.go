package holders_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/namedlock/mysql/internal/mariadbtest"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock/holders"
)

func leakCheck(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// holdLock takes the lock named name on a connection of its own (a pool
// of its own, as another program would) and returns that connection's id.
func holdLock(t *testing.T, dsn, name string) (*sql.Conn, int64) {
	t.Helper()
	ctx := testCtx(t)
	conn, err := testdb.OpenDB(t, dsn).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	var got sql.NullInt64
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 5), CONNECTION_ID()", name).Scan(&got, &id); err != nil || got.Int64 != 1 {
		t.Fatalf("GET_LOCK(%q) = %v, %v", name, got, err)
	}
	return conn, id
}

// TestLookup: a key held by another program is reported held by its
// connection, with its session (user, command, what it runs); a key that
// is not portable is looked up under the name the Locker would use; a free
// key is not held.
func TestLookup(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	db := testdb.OpenDB(t, srv.DSN)
	ctx := testCtx(t)
	idle := keyfmt.Key(testdb.UniqueName(t), "idle")
	busy := "Report:Nightly " + testdb.UniqueName(t) // not portable: mapped
	free := keyfmt.Key(testdb.UniqueName(t), "free")
	_, idleID := holdLock(t, srv.DSN, keyfmt.Portable(idle))
	busyConn, busyID := holdLock(t, srv.DSN, keyfmt.Portable(busy))
	sleeping := make(chan error, 1)
	go func() {
		_, err := busyConn.ExecContext(ctx, "SELECT SLEEP(20)")
		sleeping <- err
	}()
	t.Cleanup(func() { <-sleeping })

	var hs []holders.Holder
	if !srv.Flavor.NamesHolder() {
		hs, err := holders.Lookup(ctx, db, idle, busy, free)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{true, true, false} {
			if h := hs[i]; h.Held != want || h.ConnectionID != 0 || h.Session != nil {
				t.Errorf("%s: %+v; want held %v by a connection it does not name", srv.Name, h, want)
			}
		}
		t.Skipf("%s names no holder (IS_USED_LOCK answers 1 to other sessions): held or not checked; holders %d and %d cannot be described", srv.Name, idleID, busyID)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		if hs, err = holders.Lookup(ctx, db, idle, busy, free); err != nil {
			t.Fatal(err)
		}
		if s := hs[1].Session; (s != nil && s.Command == "Query") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, h := range hs {
		t.Logf("%d: %+v session %+v", i, h, h.Session)
	}
	if h := hs[0]; h.Key != idle || h.Name != idle || !h.Held || h.ConnectionID != idleID || h.Session == nil ||
		h.Session.User != "root" || h.Session.Command != "Sleep" || h.Session.Info != "" || h.Session.Host == "" {
		t.Errorf("idle holder: %+v %+v; want held by %d, root, Sleep, running nothing", h, h.Session, idleID)
	}
	if h := hs[1]; h.Name != keyfmt.Portable(busy) || h.Name == busy || !h.Held || h.ConnectionID != busyID || h.Session == nil ||
		h.Session.Command != "Query" || h.Session.Info != "SELECT SLEEP(20)" {
		t.Errorf("busy holder: %+v %+v; want %q held by %d, running SELECT SLEEP(20)", h, h.Session, keyfmt.Portable(busy), busyID)
	}
	if h := hs[2]; h.Held || h.ConnectionID != 0 || h.Session != nil {
		t.Errorf("free key: %+v, want not held", h)
	}
	if _, err := holders.Lookup(ctx, db); !errors.Is(err, holders.ErrNoKey) {
		t.Errorf("Lookup() = %v, want ErrNoKey", err)
	}

	// Kill checks the holder first, then ends its session.
	stale := hs[1]
	stale.ConnectionID = idleID
	if err := holders.Kill(ctx, db, stale); !errors.Is(err, holders.ErrHolderChanged) {
		t.Errorf("Kill of a connection that does not hold the lock = %v, want ErrHolderChanged", err)
	}
	if err := holders.Kill(ctx, db, hs[1]); err != nil {
		t.Fatal(err)
	}
	if err := <-sleeping; err == nil {
		t.Error("the killed session's statement went on")
	}
	sleeping <- nil // for the cleanup
	after, err := holders.Lookup(ctx, db, busy, idle)
	if err != nil {
		t.Fatal(err)
	}
	if after[0].Held || !after[1].Held {
		t.Errorf("after Kill: %+v; want %q free, %q still held", after, busy, idle)
	}
	if err := holders.Kill(ctx, db, hs[1]); !errors.Is(err, holders.ErrHolderChanged) {
		t.Errorf("second Kill = %v, want ErrHolderChanged", err)
	}
}

// TestListSharedServer: on the shared server, List either lists a lock
// held there (the plugin is loaded) or says exactly which plugin to load.
func TestListSharedServer(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	db := testdb.OpenDB(t, srv.DSN)
	ctx := testCtx(t)
	name := keyfmt.Key(testdb.UniqueName(t), "held")
	_, id := holdLock(t, srv.DSN, name)
	hs, err := holders.List(ctx, db, name)
	t.Logf("List: %+v, %v", hs, err)
	switch {
	case err == nil:
		if len(hs) != 1 || hs[0].Name != name || hs[0].ConnectionID != id {
			t.Errorf("List = %+v, want %q held by %d", hs, name, id)
		}
	case srv.Flavor.String() == "MariaDB":
		if !errors.Is(err, holders.ErrCannotList) || !strings.Contains(err.Error(), "INSTALL SONAME 'metadata_lock_info'") {
			t.Errorf("List = %v, want ErrCannotList saying INSTALL SONAME 'metadata_lock_info'", err)
		}
	default:
		if !errors.Is(err, holders.ErrCannotList) {
			t.Errorf("List = %v, want ErrCannotList", err)
		}
	}
}

// TestListWithPlugin: on a private MariaDB with the metadata_lock_info
// plugin, List lists the user-level locks held, by name and holder,
// filtered by prefix.
func TestListWithPlugin(t *testing.T) {
	leakCheck(t)
	s := mariadbtest.Start(t, mariadbtest.WithArgs("--plugin-load-add=metadata_lock_info"))
	db := testdb.OpenDB(t, s.DSN())
	ctx := testCtx(t)
	_, id1 := holdLock(t, s.DSN(), "report:nightly")
	_, id2 := holdLock(t, s.DSN(), "product:42")
	_, id3 := holdLock(t, s.DSN(), "product:43")

	all, err := holders.List(ctx, db, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		id   int64
	}{{"product:42", id2}, {"product:43", id3}, {"report:nightly", id1}}
	if len(all) != len(want) {
		t.Fatalf("List = %+v, want %v", all, want)
	}
	for i, w := range want {
		h := all[i]
		if h.Name != w.name || !h.Held || h.ConnectionID != w.id || h.Session == nil || h.Session.User != "root" {
			t.Errorf("List[%d] = %+v %+v, want %s held by %d (root)", i, h, h.Session, w.name, w.id)
		}
	}
	some, err := holders.List(ctx, db, "product:")
	if err != nil {
		t.Fatal(err)
	}
	if len(some) != 2 || some[0].Name != "product:42" || some[1].Name != "product:43" {
		t.Errorf("List(product:) = %+v, want product:42 and product:43", some)
	}
}
