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
// names the real session). The Locker takes CONNECTION_ID() as its
// session's id, for the ownership check and for the KILL that ends a
// cancelled wait. Here the DSN gives every lock connection the id of
// another instance's lock holder: a wait that its ctx ends makes the killer
// KILL that other instance's session, and the other instance's lock is
// freed at the server while its holder still believes it holds it. (The
// instance on that DSN also finds each of its own locks lost at its first
// keep-alive check, since IS_USED_LOCK never equals CONNECTION_ID there.)
func TestReviewDSNPseudoThreadIDKillsAnotherInstance(t *testing.T) {
	victimDB, admin := reviewPool(t, 4)
	srv := testdb.RequireReal(t)
	victim, err := NewLocker(victimDB, WithKeepAlive(20*time.Second), WithCheckTimeout(5*time.Second))
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
	db, err := pool.Open(srv.DSN + sep + "pseudo_thread_id=" + strconv.FormatInt(vid, 10))
	if err != nil {
		t.Fatalf("pool.Open with pseudo_thread_id: %v", err)
	}
	defer db.Close()
	l, err := NewLocker(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Cancelled (not a deadline, which the server's own GET_LOCK timeout
	// may answer): the wait is ended by closing its socket and a KILL.
	wctx, wcancel := context.WithCancel(ctx)
	stop := time.AfterFunc(500*time.Millisecond, wcancel)
	_, err = l.Acquire(wctx, base+"busy")
	stop.Stop()
	wcancel()
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("Acquire of a held key with a short ctx = %v", err)
	}
	time.Sleep(3 * time.Second) // the killer's KILL
	now, err := testdb.HolderOf(ctx, admin, keyfmt.Portable(base+"victim"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("victim's lock held by session %d before the other instance's cancelled wait, by %d after; victim's Lock.Err = %v", vid, now, vk.Err())
	if now != vid {
		t.Errorf("another instance's cancelled wait freed the victim's lock at the server (holder %d, was %d) while the victim holds it (Err %v)", now, vid, vk.Err())
	}
}
