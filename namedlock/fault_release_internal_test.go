package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/faultproxy"
	"github.com/namedlock/mysql/internal/lockconn"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/pool"
)

// TestFaultBlackholedRelease: the network goes silent while fn runs, so
// Do's RELEASE_LOCK gets no answer. Do returns within the release timeout
// (+ 1 s margin on a loaded machine) with an error that says the release
// was not confirmed (not ErrLockLost: nothing shows the lock was lost), the
// connection is discarded (none in use, none idle), and once the proxy
// closes the blackholed connections the server frees the lock. Run on a
// pool from pool.Open, whose sessions know their sockets and bound the
// release by a deadline on them (the path every Do takes), and on a plain
// pool (sql.OpenDB on the driver's connector), which bounds it by a context.
func TestFaultBlackholedRelease(t *testing.T) {
	srv := testdb.RequireReal(t)
	cfg, err := mysql.ParseDSN(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		open     func(t testing.TB, dsn string) *sql.DB
		deadline bool // the release is bounded by a socket deadline
	}{
		{"pool.Open (socket deadline)", openLockPool, true},
		{"plain pool (context)", testdb.OpenDB, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const releaseTimeout = time.Second
			p := faultproxy.New(t, cfg.Addr)
			db := tc.open(t, p.DSN(srv.DSN))
			// No keep-alive check during the test: the release meets the
			// blackhole first.
			l, err := New(db, WithReleaseTimeout(releaseTimeout), WithKeepAlive(20*time.Second), WithCheckTimeout(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			key := testdb.UniqueName(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			var known bool
			var cut time.Time
			err = l.Do(ctx, key, func(context.Context) error {
				l.mu.Lock()
				conn := l.queues[keyfmt.Portable(key)].sess.link.(*pinned).conn
				l.mu.Unlock()
				known = socketKnown(conn)
				p.Blackhole(t)
				cut = time.Now()
				return nil
			})
			took := time.Since(cut)
			t.Logf("Do returned %v after the blackhole (release timeout %v): %v", took, releaseTimeout, err)
			if got := known; got != tc.deadline {
				t.Fatalf("the session knows its socket: %v, want %v", got, tc.deadline)
			}
			if err == nil || errors.Is(err, ErrLockLost) || !strings.Contains(err.Error(), "not confirmed") {
				t.Errorf("Do = %v, want a release that was not confirmed (not ErrLockLost)", err)
			}
			// contract: the release waits for its answer for the
			// release timeout (WithReleaseTimeout), not less...
			if took < releaseTimeout-50*time.Millisecond {
				t.Errorf("Do returned %v after the blackhole, before the release timeout %v", took, releaseTimeout)
			}
			// contract: ...and gives up then; 3× the timeout only catches
			// a release that waits on.
			if took > 3*releaseTimeout {
				t.Errorf("Do returned %v after the blackhole, want the release timeout %v", took, releaseTimeout)
			}
			if st := db.Stats(); st.InUse != 0 || st.Idle != 0 {
				t.Errorf("lock pool after the release: %+v, want nothing in use or idle (the connection discarded)", st)
			}
			if st := l.Stats(); st.Held != 0 || st.Lost != 0 {
				t.Errorf("Stats = %+v, want Held 0, Lost 0", st)
			}

			// Heal closes the blackholed connections: the server ends the
			// session and frees the lock.
			p.Heal(t)
			adm := testdb.OpenDB(t, srv.DSN)
			name := keyfmt.Portable(key)
			deadline := time.Now().Add(5 * time.Second)
			for {
				var holder sql.NullInt64
				if err := adm.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&holder); err != nil {
					t.Fatal(err)
				}
				if !holder.Valid {
					break
				}
				// contract: Heal closes the connection, and the server
				// frees the lock with its session; 5 s only ends a wait
				// for a lock never freed.
				if time.Now().After(deadline) {
					t.Fatalf("session %d still holds %q 5 s after the heal", holder.Int64, name)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// openLockPool opens a pool with pool.Open, closed at the end of the test.
func openLockPool(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := pool.Open(dsn)
	if err != nil {
		t.Fatalf("pool.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// socketKnown reports whether conn's driver connection knows its socket
// (a connection of pool.Open, see lockconn.Conn.Socket).
func socketKnown(conn *sql.Conn) bool {
	known := false
	_ = conn.Raw(func(dc any) error {
		if lc, ok := dc.(*lockconn.Conn); ok {
			known = lc.Socket() != nil
		}
		return nil
	})
	return known
}

// TestQueryIntsDeadline: the deadline path of queryInts on a pool.Open
// connection through a fault proxy. A statement that succeeds leaves no
// deadline behind (a later statement, after the deadline, still works); a
// blackholed statement ends at its deadline, or earlier when its ctx ends
// (as Close ends a keep-alive check), with an error that says which.
func TestQueryIntsDeadline(t *testing.T) {
	srv := testdb.RequireReal(t)
	cfg, err := mysql.ParseDSN(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	p := faultproxy.New(t, cfg.Addr)
	db := openLockPool(t, p.DSN(srv.DSN))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pin := func() *sql.Conn {
		t.Helper()
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !socketKnown(conn) {
			t.Fatal("no socket known for a pool.Open connection")
		}
		return conn
	}
	var row [1]sql.NullInt64

	conn := pin()
	bg, stop := context.WithCancel(context.Background())
	ended, err := queryInts(bg, conn, time.Now().Add(100*time.Millisecond), row[:], "SELECT 1")
	if err != nil || ended || row[0].Int64 != 1 {
		t.Fatalf("queryInts = %v, %v, %v; want 1", row[0], ended, err)
	}
	stop() // after the statement: must not touch the connection
	time.Sleep(200 * time.Millisecond)
	if _, err := queryInts(context.Background(), conn, time.Time{}, row[:], "SELECT 2"); err != nil || row[0].Int64 != 2 {
		t.Fatalf("a statement after the deadline = %v, %v; want 2 (deadline not cleared?)", row[0], err)
	}
	_ = conn.Close()

	a := pin()
	b := pin()
	p.Blackhole(t)

	start := time.Now()
	ended, err = queryInts(context.Background(), a, start.Add(300*time.Millisecond), row[:], "SELECT 1")
	took := time.Since(start)
	t.Logf("blackholed, deadline 300 ms: %v after %v", err, took)
	// contract: queryInts' deadline ends a statement that gets no answer;
	// 300 ms + 1 s is the generous bound.
	if !ended || !errors.Is(err, context.DeadlineExceeded) || took > 1300*time.Millisecond {
		t.Errorf("blackholed statement with a 300 ms deadline = ended %v, %v after %v; want DeadlineExceeded within 300 ms (+ 1 s)", ended, err, took)
	}
	discardConn(a)

	bg, stop = context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, stop)
	start = time.Now()
	ended, err = queryInts(bg, b, start.Add(20*time.Second), row[:], "SELECT 1")
	took = time.Since(start)
	t.Logf("blackholed, ctx cancelled after 300 ms: %v after %v", err, took)
	// contract: ...and so does its ctx; 300 ms + 1 s is the generous bound.
	if !ended || !errors.Is(err, context.Canceled) || took > 1300*time.Millisecond {
		t.Errorf("blackholed statement with ctx cancelled after 300 ms = ended %v, %v after %v; want Canceled within 300 ms (+ 1 s)", ended, err, took)
	}
	discardConn(b)
	p.Heal(t)
	if st := db.Stats(); st.OpenConnections != 0 {
		t.Errorf("lock pool: %+v, want no connection open (both discarded)", st)
	}
}

// TestInterrupterDisarm: once disarm has returned, fire sets no deadline,
// whether or not the AfterFunc had already started it.
func TestInterrupterDisarm(t *testing.T) {
	for _, started := range []bool{false, true} {
		nc := &deadlineRecorder{}
		it := &interrupter{nc: nc, stop: func() bool { return !started }}
		it.disarm()
		if started {
			it.fire() // the AfterFunc that stop could not prevent
		}
		if nc.calls != 0 {
			t.Errorf("fire started %v: %d deadlines set after disarm, want 0", started, nc.calls)
		}
	}
	nc := &deadlineRecorder{}
	it := &interrupter{nc: nc, stop: func() bool { return false }}
	it.fire()
	it.disarm()
	if nc.calls != 1 || !nc.last.Equal(longAgo) {
		t.Errorf("fire before disarm: %d deadlines, last %v; want 1, %v", nc.calls, nc.last, longAgo)
	}
}

// deadlineRecorder is a net.Conn that records SetDeadline.
type deadlineRecorder struct {
	net.Conn
	calls int
	last  time.Time
}

func (r *deadlineRecorder) SetDeadline(t time.Time) error {
	r.calls++
	r.last = t
	return nil
}
