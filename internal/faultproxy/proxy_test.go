package faultproxy

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/testdb"
)

func TestDSN(t *testing.T) {
	p := New(t, "127.0.0.1:1")
	got := p.DSN("app:secret@tcp(db.example:3306)/shop?parseTime=true&interpolateParams=true")
	cfg, err := mysql.ParseDSN(got)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != p.Addr() || cfg.User != "app" || cfg.Passwd != "secret" || cfg.DBName != "shop" ||
		!cfg.ParseTime || !cfg.InterpolateParams {
		t.Fatalf("DSN = %q", got)
	}
	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") || p.Upstream() != "127.0.0.1:1" {
		t.Fatalf("Addr %q Upstream %q", p.Addr(), p.Upstream())
	}
}

func TestPassesTraffic(t *testing.T) {
	s, addr := upstream(t)
	p := New(t, addr)
	db := testdb.OpenDB(t, p.DSN(s.DSN))
	if v := must(t, db, "SELECT ?", "through"); v.String != "through" {
		t.Fatalf("SELECT = %v", v)
	}
}

// While blackholed, a connection keeps its server session (and lock) and the
// client's query runs into its deadline; the client then closes its socket,
// which toxiproxy passes on, so the server ends the session. Heal lets new
// connections through.
func TestBlackholeAndHeal(t *testing.T) {
	s, addr := upstream(t)
	p := New(t, addr)
	db := testdb.OpenDB(t, p.DSN(s.DSN))
	direct := testdb.OpenDB(t, s.DSN)
	name := testdb.UniqueName(t)

	c := pin(t, db)
	lock(t, c, name)

	p.Blackhole(t)
	p.Blackhole(t) // twice is once
	start := time.Now()
	_, err := query(c, 300*time.Millisecond, "SELECT 1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("query through a blackhole: %v, want a deadline error", err)
	}
	// contract: a client's deadline still ends its query through a
	// blackhole (Blackhole: clients time out); 2 s is several times the
	// 300 ms deadline.
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("deadline error after %v", d)
	}
	if _, err := query(db, 300*time.Millisecond, "SELECT 1"); err == nil {
		t.Fatal("new connection through a blackhole worked")
	}
	// The query did not reach the server, and the session lasted until the
	// client closed its socket on the deadline.
	eventually(t, 5*time.Second, "released after the client closed", func() bool {
		return !must(t, direct, "SELECT IS_USED_LOCK(?)", name).Valid
	})

	p.Heal(t)
	if v := must(t, db, "SELECT 2"); v.String != "2" {
		t.Fatalf("after Heal: %v", v)
	}
}

// A blackholed connection whose client keeps its socket open keeps its
// server session and locks: the server sees nothing until Heal closes it.
func TestBlackholeKeepsServerSession(t *testing.T) {
	s, addr := upstream(t)
	p := New(t, addr)
	db := testdb.OpenDB(t, p.DSN(s.DSN))
	direct := testdb.OpenDB(t, s.DSN)
	name := testdb.UniqueName(t)
	c := pin(t, db)
	id := must(t, c, "SELECT CONNECTION_ID()").String
	lock(t, c, name)

	p.Blackhole(t)
	time.Sleep(300 * time.Millisecond)
	want := id
	if !s.Flavor.NamesHolder() {
		want = "1" // TiDB: held, by a session it does not name
	}
	if v := must(t, direct, "SELECT IS_USED_LOCK(?)", name); v.String != want {
		t.Fatalf("IS_USED_LOCK = %v, want %s (held by the blackholed session %s)", v, want, id)
	}
	p.Heal(t) // closes the blackholed connection on both sides
	eventually(t, 5*time.Second, "released after Heal", func() bool {
		return !must(t, direct, "SELECT IS_USED_LOCK(?)", name).Valid
	})
	if _, err := query(c, 5*time.Second, "SELECT 1"); err == nil {
		t.Fatal("blackholed connection works after Heal")
	}
}

func TestLatency(t *testing.T) {
	s, addr := upstream(t)
	p := New(t, addr)
	db := testdb.OpenDB(t, p.DSN(s.DSN))
	c := pin(t, db)
	must(t, c, "SELECT 1")

	p.Latency(t, 150*time.Millisecond)
	start := time.Now()
	must(t, c, "SELECT 1")
	// contract: each round trip takes at least d longer (Latency).
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("round trip with 150 ms latency took %v", d)
	}
	p.Latency(t, 400*time.Millisecond) // replaces
	start = time.Now()
	must(t, c, "SELECT 1")
	d := time.Since(start)
	// contract: a second call's d applies (Latency).
	if d < 400*time.Millisecond {
		t.Fatalf("round trip with 400 ms latency took %v", d)
	}
	// contract: the delay is d, not unbounded; 3 s is 7× the latency.
	if d > 3*time.Second {
		t.Fatalf("round trip with 400 ms latency took %v", d)
	}

	p.Heal(t)
	start = time.Now()
	must(t, c, "SELECT 1")
	// contract: Heal removes the latency: a round trip is back under the
	// 400 ms it took (250 ms: generous for a local query, still below).
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Fatalf("round trip after Heal took %v", d)
	}
}

// ResetPeer breaks an open connection at its next query and refuses new ones;
// the server ends the session and its locks.
func TestResetPeer(t *testing.T) {
	s, addr := upstream(t)
	p := New(t, addr)
	db := testdb.OpenDB(t, p.DSN(s.DSN))
	direct := testdb.OpenDB(t, s.DSN)
	name := testdb.UniqueName(t)
	c := pin(t, db)
	lock(t, c, name)

	p.ResetPeer(t)
	if _, err := query(c, 5*time.Second, "SELECT 1"); err == nil {
		t.Fatal("query on a reset connection worked")
	} else {
		t.Logf("open connection: %v", err)
	}
	if _, err := query(db, 5*time.Second, "SELECT 1"); err == nil {
		t.Fatal("new connection worked through reset_peer")
	} else {
		t.Logf("new connection: %v", err)
	}
	eventually(t, 5*time.Second, "released", func() bool {
		return !must(t, direct, "SELECT IS_USED_LOCK(?)", name).Valid
	})

	p.Heal(t)
	must(t, db, "SELECT 1")
}

// Disable cuts every connection and refuses new ones; Enable listens again on
// the same address.
func TestDisableEnable(t *testing.T) {
	s, addr := upstream(t)
	p := New(t, addr)
	proxyAddr := p.Addr()
	db := testdb.OpenDB(t, p.DSN(s.DSN))
	direct := testdb.OpenDB(t, s.DSN)
	name := testdb.UniqueName(t)
	c := pin(t, db)
	lock(t, c, name)

	p.Disable(t)
	if _, err := query(c, 5*time.Second, "SELECT 1"); err == nil {
		t.Fatal("query on a cut connection worked")
	}
	if conn, err := net.DialTimeout("tcp", proxyAddr, time.Second); err == nil {
		conn.Close()
		t.Fatal("disabled proxy accepts connections")
	}
	eventually(t, 5*time.Second, "released", func() bool {
		return !must(t, direct, "SELECT IS_USED_LOCK(?)", name).Valid
	})

	p.Enable(t)
	if p.Addr() != proxyAddr {
		t.Fatalf("address changed from %s to %s", proxyAddr, p.Addr())
	}
	must(t, db, "SELECT 1")
	p.Enable(t) // enabling an enabled proxy is a no-op
}
