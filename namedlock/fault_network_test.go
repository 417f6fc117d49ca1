package namedlock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/faultproxy"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// faultProxied returns a fault proxy in front of the test server and a
// Locker whose lock pool goes through it, with the given lease (pool and
// Locker), keep-alive and check timeout.
func faultProxied(t *testing.T, lease, keepAlive, checkTimeout time.Duration) (*testdb.Server, *faultproxy.Proxy, *instance) {
	t.Helper()
	srv := testdb.RequireReal(t)
	cfg, err := mysql.ParseDSN(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	p := faultproxy.New(t, cfg.Addr)
	t.Logf("lock pool through a fault proxy at %s to %s", p.Addr(), cfg.Addr)
	db := openPool(t, p.DSN(srv.DSN), pool.WithLease(lease))
	l, err := namedlock.New(db, namedlock.RecordHolders(t, namedlock.WithKeepAlive(keepAlive), namedlock.WithCheckTimeout(checkTimeout))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return srv, p, &instance{db: db, locker: l}
}

// TestFaultBlackholedHolder: the network between a holder and the server
// goes silent (a partition: no data, no FIN, no RST). The holder is told
// within keep-alive + check timeout (+ 1 s margin), and another instance, which
// still reaches the server, acquires the lock within the lease + 2 s. A host
// that vanished with its socket left open (a raw lock connection of the same
// pool, blackholed and never closed) loses its lock by the lease (the
// session wait_timeout), not the server's 8 hours.
func TestFaultBlackholedHolder(t *testing.T) {
	leakCheck(t)
	const lease, keepAlive, checkTimeout = 4 * time.Second, time.Second, time.Second
	srv, p, in := faultProxied(t, lease, keepAlive, checkTimeout)
	other := newInstance(t, srv.DSN)
	adm := faultAdmin(t, srv.DSN)
	base := faultBase(t)
	key, vanished := base+":held", base+":vanished"
	ctx := testCtx(t, 30*time.Second)

	// The vanished host: a lock connection that is never used again.
	conn, err := in.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", vanished).Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("GET_LOCK(%q) = %v, %v", vanished, got, err)
	}
	lastStatement := time.Now()
	k := faultAcquire(t, in.locker, key, 5*time.Second)
	id := holderOf(t, adm, key)

	p.Blackhole(t)
	cut := time.Now()
	type acquired struct {
		name  string
		after time.Duration
		err   error
	}
	results := make(chan acquired, 2)
	for _, name := range []string{key, vanished} {
		go func() {
			actx, cancel := context.WithTimeout(ctx, lease+3*time.Second)
			defer cancel()
			ok, err := other.locker.Acquire(actx, name)
			after := time.Since(cut)
			if err == nil {
				_ = faultRelease(ok)
			}
			results <- acquired{name, after, err}
		}()
	}

	// contract: a lost lock is reported within keep-alive + check timeout
	// (docs/guarantees.md), + 1 s for a loaded machine.
	bound := keepAlive + checkTimeout + time.Second
	d, ok := faultClosedWithin(k.Done(), cut, lease+3*time.Second)
	t.Logf("detection latency after blackhole (keep-alive %v, check timeout %v): %v", keepAlive, checkTimeout, d)
	if !ok || d > bound {
		t.Errorf("holder told %v after the blackhole (told: %v), want within keep-alive + check timeout + 1 s = %v", d, ok, bound)
	}
	if err := k.Err(); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Err() = %v, want ErrLockLost", err)
	}
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Errorf("the other instance did not acquire %q within lease + 3 s: %v", r.name, r.err)
			continue
		}
		who := "the Locker's holder"
		if r.name == vanished {
			who = "the vanished host (socket left open)"
		}
		t.Logf("another instance acquired the lock of %s %v after the blackhole", who, r.after)
		// contract: the server frees a vanished holder's locks within
		// the lease (docs/guarantees.md), + 2 s for its idle check.
		if r.after > lease+2*time.Second {
			t.Errorf("another instance acquired %v after the blackhole, want within lease + 2 s = %v", r.after, lease+2*time.Second)
		}
	}
	t.Logf("the vanished host's last statement was %v before the blackhole; lease %v", cut.Sub(lastStatement), lease)
	if sid := holderOf(t, adm, key); sid == id {
		t.Errorf("the blackholed session %d still holds %q", id, key)
	}

	p.Heal(t)
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
	if err := faultRelease(k); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Release after the blackhole = %v, want ErrLockLost", err)
	}
	faultInUse(t, in.db, 0, time.Second)
	if st := in.locker.Stats(); st.Lost != 1 || st.Held != 0 {
		t.Errorf("Stats = %+v, want Lost 1, Held 0", st)
	}
	// The pool recovers after the heal.
	k2 := faultAcquire(t, in.locker, key, 5*time.Second)
	if err := faultRelease(k2); err != nil {
		t.Errorf("Release after the heal: %v", err)
	}
}

// TestFaultLatencyIsNotALoss: replies delayed by 300 ms, well within the
// check timeout of 1 s, are not a loss: the lock stays held (Err nil, still
// the owner at the server) for 4 s, longer than its lease of 3 s, so the
// slow checks did keep the session alive.
func TestFaultLatencyIsNotALoss(t *testing.T) {
	leakCheck(t)
	const lease, keepAlive, checkTimeout, hold = 3 * time.Second, time.Second, time.Second, 4 * time.Second
	srv, p, in := faultProxied(t, lease, keepAlive, checkTimeout)
	adm := faultAdmin(t, srv.DSN)
	key := faultBase(t) + ":slow"
	k := faultAcquire(t, in.locker, key, 5*time.Second)
	id := holderOf(t, adm, key)

	p.Latency(t, 300*time.Millisecond)
	// What a round trip through the proxy costs now.
	probe := testdb.OpenDB(t, p.DSN(srv.DSN))
	if err := probe.Ping(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := probe.Exec("DO 1"); err != nil {
		t.Fatal(err)
	}
	t.Logf("one round trip through the latency toxic: %v (check timeout %v)", time.Since(start), checkTimeout)

	start = time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < hold {
		<-tick.C
		if err := k.Err(); err != nil {
			t.Fatalf("after %v with 300 ms latency: Err() = %v", time.Since(start), err)
		}
		if got := holderOf(t, adm, key); got != id {
			t.Fatalf("after %v with 300 ms latency: IS_USED_LOCK = %d, want %d", time.Since(start), got, id)
		}
	}
	t.Logf("held %v (lease %v) through 300 ms latency: Err() nil, still owned by session %d", time.Since(start), lease, id)
	if err := faultRelease(k); err != nil {
		t.Errorf("Release with latency: %v", err)
	}
	if st := in.locker.Stats(); st.Lost != 0 {
		t.Errorf("Stats = %+v, want Lost 0", st)
	}
	faultInUse(t, in.db, 0, time.Second)
}

// TestFaultResetPeer: the holder's connection is reset (RST) as soon as it
// next sends data, i.e. at its next ownership check: the holder is told
// within keep-alive + check timeout, the server ends the session (the lock is free
// for another instance), Release says ErrLockLost and nothing leaks.
func TestFaultResetPeer(t *testing.T) {
	leakCheck(t)
	const keepAlive = time.Second
	const checkTimeout = time.Second
	srv, p, in := faultProxied(t, 30*time.Second, keepAlive, checkTimeout)
	other := newInstance(t, srv.DSN)
	adm := faultAdmin(t, srv.DSN)
	key := faultBase(t) + ":reset"
	k := faultAcquire(t, in.locker, key, 5*time.Second)

	p.ResetPeer(t)
	reset := time.Now()
	// contract: a lost lock is reported within keep-alive + check timeout
	// (docs/guarantees.md); a reset fails the next check at once.
	bound := keepAlive + checkTimeout
	d, ok := faultClosedWithin(k.Done(), reset, 5*time.Second)
	t.Logf("detection latency after reset (keep-alive %v): %v", keepAlive, d)
	if !ok || d > bound {
		t.Errorf("holder told %v after the reset (told: %v), want within %v", d, ok, bound)
	}
	if err := k.Err(); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Err() = %v, want ErrLockLost", err)
	}
	free, ok := faultPoll(2*time.Second, func() bool { return holderOf(t, adm, key) == 0 })
	if !ok {
		t.Errorf("the reset session still holds %q 2 s after the holder was told", key)
	}
	t.Logf("the server freed the lock %v after the holder was told", free)
	if ran, err := other.locker.TryDo(testCtx(t, 10*time.Second), key, func(context.Context) error { return nil }); !ran || err != nil {
		t.Errorf("TryDo by another instance after the reset: %v, %v", ran, err)
	}
	p.Heal(t)
	if err := faultRelease(k); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Release after the reset = %v, want ErrLockLost", err)
	}
	faultInUse(t, in.db, 0, time.Second)
	if st := in.locker.Stats(); st.Lost != 1 || st.Held != 0 {
		t.Errorf("Stats = %+v, want Lost 1, Held 0", st)
	}
}
