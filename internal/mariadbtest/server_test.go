package mariadbtest

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestAvailable(t *testing.T) {
	ok, why := Available()
	t.Logf("Available() = %v, %q", ok, why)
	if !ok && why == "" {
		t.Fatal("unavailable without a reason")
	}
}

func TestKill9AndRestart(t *testing.T) {
	t0 := time.Now()
	s := Start(t)
	t.Logf("Start: %v (%s)", time.Since(t0), s.Addr())
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || s.DSN() != "root@tcp("+s.Addr()+")/test" {
		t.Fatalf("Addr %q DSN %q", s.Addr(), s.DSN())
	}
	db := open(t, s.DSN())
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v := scalar(t, c, "SELECT GET_LOCK('held', 0)"); v.String != "1" {
		t.Fatalf("GET_LOCK = %v", v)
	}
	for _, q := range []string{"CREATE TABLE kept (id INT PRIMARY KEY) ENGINE=InnoDB", "INSERT INTO kept VALUES (7)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	t0 = time.Now()
	s.Kill9(t)
	t.Logf("Kill9: %v", time.Since(t0))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var one int
	if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&one); err == nil {
		t.Fatal("connection to a killed server still answers")
	}

	port := s.Port()
	t0 = time.Now()
	s.Restart(t)
	t.Logf("Restart after Kill9 (crash recovery): %v", time.Since(t0))
	if s.Port() != port {
		t.Fatalf("port changed from %d to %d", port, s.Port())
	}
	db2 := open(t, s.DSN())
	if v := scalar(t, db2, "SELECT IS_USED_LOCK('held')"); v.Valid {
		t.Fatalf("lock survived the crash: held by %v", v.String)
	}
	if v := scalar(t, db2, "SELECT GET_LOCK('held', 0)"); v.String != "1" {
		t.Fatalf("GET_LOCK after restart = %v", v)
	}
	if v := scalar(t, db2, "SELECT id FROM kept"); v.String != "7" {
		t.Fatalf("committed row after crash = %v", v)
	}
}

func TestStopAndRestart(t *testing.T) {
	s := Start(t)
	db := open(t, s.DSN())
	scalar(t, db, "SELECT 1")

	t0 := time.Now()
	s.Stop(t)
	t.Logf("Stop: %v", time.Since(t0))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("stopped server answers")
	}

	t0 = time.Now()
	s.Restart(t)
	t.Logf("Restart after Stop: %v", time.Since(t0))
	if v := scalar(t, db, "SELECT DATABASE()"); v.String != "test" {
		t.Fatalf("DATABASE() = %v", v)
	}
	// Restart of a running server stops it first.
	s.Restart(t)
	scalar(t, open(t, s.DSN()), "SELECT 1")
}

// WithArgs reaches mariadbd: a 2 s wait_timeout ends an idle session.
func TestWithArgs(t *testing.T) {
	s := Start(t, WithArgs("--wait-timeout=2"))
	db := open(t, s.DSN())
	if v := scalar(t, db, "SELECT @@global.wait_timeout"); v.String != "2" {
		t.Fatalf("@@global.wait_timeout = %v", v)
	}
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v := scalar(t, c, "SELECT GET_LOCK('idle', 0)"); v.String != "1" {
		t.Fatalf("GET_LOCK = %v", v)
	}
	time.Sleep(3 * time.Second)
	if v := scalar(t, db, "SELECT IS_USED_LOCK('idle')"); v.Valid {
		t.Fatalf("idle session's lock still held by %v after wait_timeout", v.String)
	}
}

func TestServersAreSeparate(t *testing.T) {
	t0 := time.Now()
	a := Start(t)
	t.Logf("Start a: %v", time.Since(t0))
	t0 = time.Now()
	b := Start(t)
	t.Logf("Start b: %v", time.Since(t0))
	if a.Port() == b.Port() {
		t.Fatalf("same port %d", a.Port())
	}
	for _, s := range []*Server{a, b} {
		if v := scalar(t, open(t, s.DSN()), "SELECT GET_LOCK('same', 0)"); v.String != "1" {
			t.Fatalf("GET_LOCK on %s = %v", s.Addr(), v)
		}
	}
	if v := scalar(t, open(t, a.DSN()), "SELECT @@version"); !strings.Contains(v.String, "MariaDB") {
		t.Fatalf("@@version = %v", v)
	}
}

func TestBadArgsFailWithServerLog(t *testing.T) {
	t0 := time.Now()
	o := run(t, func(tb testing.TB) { Start(tb, WithArgs("--no-such-option-here")) })
	t.Logf("failed after %v: %s", time.Since(t0), o.msg)
	if o.how != "fatal" || !strings.Contains(o.msg, "no-such-option-here") || !strings.Contains(o.msg, "mariadbd log") {
		t.Fatalf("outcome %q: %s", o.how, o.msg)
	}
}

func TestUnavailable(t *testing.T) {
	saved := searchDirs
	searchDirs = nil
	t.Cleanup(func() { searchDirs = saved })
	t.Setenv("PATH", t.TempDir())

	if ok, why := Available(); ok || !strings.Contains(why, "mariadbd") {
		t.Fatalf("Available() = %v, %q", ok, why)
	}
	t.Setenv("CI", "")
	if o := run(t, func(tb testing.TB) { Start(tb) }); o.how != "skip" {
		t.Fatalf("without CI: %q %s", o.how, o.msg)
	}
	t.Setenv("CI", "true")
	if o := run(t, func(tb testing.TB) { Start(tb) }); o.how != "fatal" || !strings.Contains(o.msg, "CI") {
		t.Fatalf("with CI: %q %s", o.how, o.msg)
	}
}
