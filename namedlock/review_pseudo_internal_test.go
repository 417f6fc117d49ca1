package namedlock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/pool"
)

// TestReviewDSNPseudoThreadIDKillsAnotherInstance: a DSN parameter that
// the pool's own SET does not cover, pseudo_thread_id, changes what
// CONNECTION_ID() answers (on MariaDB and MySQL alike; IS_USED_LOCK still
// names the real session). A Locker that took CONNECTION_ID() as its
// session's id, for the ownership check and for the KILL that ends a
// cancelled wait, would, on a DSN giving every lock connection the id of
// another instance's lock holder, KILL that other instance's session when
// a wait's ctx ends, freeing the other instance's lock at the server while
// its holder still believes it holds it (and would find each of its own
// locks lost at its first keep-alive check, since IS_USED_LOCK never
// equals CONNECTION_ID there). pool.Open refuses such a DSN, saying why;
// a Locker on a plain pool with it takes no lock, saying why, and never
// KILLs the session CONNECTION_ID() names. (TiDB ignores pseudo_thread_id:
// there pool.Open accepts the DSN, and the victim's lock must survive all
// the same.)
func TestReviewDSNPseudoThreadIDKillsAnotherInstance(t *testing.T) {
	victimDB, admin := reviewPool(t, 4)
	srv := testdb.RequireReal(t)
	victim, err := New(victimDB, RecordHolders(t, WithKeepAlive(20*time.Second), WithCheckTimeout(5*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	base := testdb.UniqueName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	vk, err := victim.Acquire(ctx, base+"victim")
	if err != nil {
		t.Fatal(err)
	}
	defer vk.Release(ctx)
	held, err := victim.Acquire(ctx, base+"busy") // what the attacker's wait is for
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	vid, err := testdb.HolderOf(ctx, admin, keyfmt.Portable(base+"victim"))
	if err != nil || vid == 0 {
		t.Fatalf("victim's session: %d, %v", vid, err)
	}

	sep := "?"
	if strings.Contains(srv.DSN, "?") {
		sep = "&"
	}
	dsn := srv.DSN + sep + "pseudo_thread_id=" + strconv.FormatInt(vid, 10)
	plain := testdb.OpenDB(t, dsn)
	plain.SetMaxOpenConns(4)
	var cid int64
	if err := plain.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&cid); err != nil {
		t.Fatal(err)
	}
	honoured := cid == vid // TiDB ignores pseudo_thread_id
	t.Logf("CONNECTION_ID() with pseudo_thread_id=%d: %d", vid, cid)

	db, err := pool.Open(dsn)
	switch {
	case honoured && err == nil:
		_ = db.Close()
		t.Fatalf("pool.Open with pseudo_thread_id: no error, want a refusal")
	case honoured:
		t.Logf("pool.Open with pseudo_thread_id: %v", err)
		if !errors.Is(err, pool.ErrUnsupportedServer) || !strings.Contains(err.Error(), "pseudo_thread_id") {
			t.Errorf("pool.Open with pseudo_thread_id = %v, want ErrUnsupportedServer naming pseudo_thread_id", err)
		}
	case err != nil:
		t.Fatalf("pool.Open with pseudo_thread_id, which this server ignores: %v", err)
	default:
		defer db.Close()
		plain = db // the attack on pool.Open's pool
	}

	// The pool: the Locker's own statements find it out.
	l, err := New(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	free, err := l.Acquire(ctx, base+"free")
	t.Logf("pool with pseudo_thread_id, Acquire of a free key: %v", err)
	if honoured {
		if !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), "pseudo_thread_id") {
			t.Errorf("Acquire of a free key on a plain pool with pseudo_thread_id = %v, want ErrNotAcquired naming pseudo_thread_id", err)
		}
		if id, err := testdb.HolderOf(ctx, admin, keyfmt.Portable(base+"free")); err != nil || id != 0 {
			t.Errorf("the refused free key is held by session %d (%v), want by none", id, err)
		}
	} else if err != nil {
		t.Errorf("Acquire of a free key where pseudo_thread_id is ignored: %v", err)
	} else {
		_ = free.Release(ctx)
	}
	// Cancelled (not a deadline, which the server's own GET_LOCK timeout
	// may answer): a wait is ended by closing its socket and a KILL.
	wctx, wcancel := context.WithCancel(ctx)
	stop := time.AfterFunc(500*time.Millisecond, wcancel)
	_, err = l.Acquire(wctx, base+"busy")
	stop.Stop()
	wcancel()
	t.Logf("pool with pseudo_thread_id, Acquire of a held key: %v", err)
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("Acquire of a held key with a short ctx = %v", err)
	}
	time.Sleep(3 * time.Second) // a KILL would have run by now
	now, err := testdb.HolderOf(ctx, admin, keyfmt.Portable(base+"victim"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("victim's lock held by session %d before the other instance's cancelled wait, by %d after; victim's Lock.Err = %v", vid, now, vk.Err())
	if now != vid {
		t.Errorf("another instance's cancelled wait freed the victim's lock at the server (holder %d, was %d) while the victim holds it (Err %v)", now, vid, vk.Err())
	}
}
