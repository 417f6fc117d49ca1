package pool_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/lockconn"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// TestIdlePastLease: a lock pool left idle longer than its lease (the
// wait_timeout of its sessions) is used again, plainly and by a Locker,
// without an error and without a single driver log line: the pool closes
// an idle connection after a third of the lease, before the server ends its
// session. (With idle connections kept forever, each first use after the
// pause logged "[mysql] … packets.go: unexpected EOF" or "connection reset
// by peer" to the application's stderr before database/sql retried; the
// pool's driver now logs to the pool's own log, which the test reads.)
func TestIdlePastLease(t *testing.T) {
	srv := testdb.RequireReal(t)
	const lease = 2 * time.Second
	db, err := pool.Open(srv.DSN, pool.WithLease(lease), pool.WithMaxConns(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	l, err := namedlock.New(db, namedlock.WithKeepAlive(500*time.Millisecond), namedlock.WithCheckTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	use := func() {
		t.Helper()
		// Four connections at once, so that four are idle afterwards.
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				key := fmt.Sprintf("%s:%d", testdb.UniqueName(t), i)
				if err := l.Do(ctx, key, func(context.Context) error { return nil }); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if err := db.PingContext(ctx); err != nil {
			t.Error(err)
		}
	}
	use()
	if st := db.Stats(); st.Idle == 0 {
		t.Fatalf("no idle connection after use: %+v", st)
	}
	time.Sleep(lease + 1500*time.Millisecond)
	use()
	st := db.Stats()
	t.Logf("after %v idle: %d connections closed for idle time; pool %+v", lease+1500*time.Millisecond, st.MaxIdleTimeClosed, st)
	if n, lines := lockconn.Of(db).DriverLog().Lines(); n > 0 {
		t.Errorf("the driver logged %d lines, want none: %q", n, lines)
	}
	if st.MaxIdleTimeClosed == 0 {
		t.Error("no idle connection was retired")
	}
}
