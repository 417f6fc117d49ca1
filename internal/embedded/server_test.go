package embedded

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestStartListensOnLoopbackOnly(t *testing.T) {
	s := start(t)
	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr() = %q (%v), want 127.0.0.1:PORT", s.Addr(), err)
	}
	if want := "root@tcp(" + s.Addr() + ")/test"; s.DSN() != want {
		t.Fatalf("DSN() = %q, want %q", s.DSN(), want)
	}
}

func TestTwoServersAreIndependent(t *testing.T) {
	a, b := start(t), start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("both servers on %s", a.Addr())
	}
	ca, cb := conn(t, openDB(t, a)), conn(t, openDB(t, b))
	want(t, "GET_LOCK on a", scalar(t, ca, "SELECT GET_LOCK(?, 0)", "same"), "1")
	want(t, "GET_LOCK on b", scalar(t, cb, "SELECT GET_LOCK(?, 0)", "same"), "1")
}

func TestQueries(t *testing.T) {
	db := openDB(t, start(t))
	want(t, "SELECT 1", scalar(t, db, "SELECT 1"), "1")
	want(t, "DATABASE()", scalar(t, db, "SELECT DATABASE()"), "test")
	if v := scalar(t, db, "SELECT VERSION()"); !v.Valid || v.String == "" {
		t.Fatalf("VERSION() = %v", v)
	}
	for _, q := range []string{
		"CREATE TABLE jobs (name VARCHAR(64) PRIMARY KEY, runs INT NOT NULL)",
		"INSERT INTO jobs VALUES ('a', 1)",
		"UPDATE jobs SET runs = runs + 1 WHERE name = 'a'",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	want(t, "runs", scalar(t, db, "SELECT runs FROM jobs WHERE name = ?", "a"), "2")
}

func TestCloseIsIdempotentAndCutsConnections(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, s)
	c := conn(t, db)
	want(t, "GET_LOCK", scalar(t, c, "SELECT GET_LOCK('held', 0)"), "1")

	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// contract: Close does not wait for idle connections, only for their
	// goroutines (doc.go, Closing); half of CloseTimeout, after which it
	// would give up, is the generous bound.
	if d := time.Since(start); d > CloseTimeout/2 {
		t.Fatalf("Close took %v", d)
	}
	var v int
	if err := c.QueryRowContext(context.Background(), "SELECT 1").Scan(&v); err == nil {
		t.Fatal("query on a connection of a closed server succeeded")
	}
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Fatal("closed server still accepts connections")
	}
}

// Close cuts the holder too, which releases its locks, so a waiter does not
// hold Close up: its GET_LOCK is granted at once and its reply goes nowhere.
func TestCloseEndsLockWaits(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, s)
	holder, waiter := conn(t, db), conn(t, db)
	want(t, "GET_LOCK", scalar(t, holder, "SELECT GET_LOCK('x', 0)"), "1")
	done := make(chan error, 1)
	go func() {
		var v any
		done <- waiter.QueryRowContext(context.Background(), "SELECT GET_LOCK('x', 5)").Scan(&v)
	}()
	time.Sleep(200 * time.Millisecond) // let the wait begin

	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// contract: a waiter whose holder is cut by Close is granted and ends
	// at once, so it does not hold Close up (doc.go, Closing); half of
	// CloseTimeout, after which Close would give up, is the generous bound.
	if d := time.Since(start); d > CloseTimeout/2 {
		t.Fatalf("Close took %v with a 5 s GET_LOCK wait under way", d)
	}
	if err := <-done; err == nil {
		t.Fatal("waiting GET_LOCK succeeded on a closed server")
	}
}

// Two sessions waiting on each other (a deadlock the server does not detect)
// outlive Close, which reports ErrBusy; their goroutines end with their waits.
func TestCloseReportsStuckDeadlock(t *testing.T) {
	saved := closeTimeout
	closeTimeout = 300 * time.Millisecond
	t.Cleanup(func() { closeTimeout = saved })
	before := goleak.IgnoreCurrent()

	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, s)
	a, b := conn(t, db), conn(t, db)
	want(t, "a GET_LOCK x", scalar(t, a, "SELECT GET_LOCK('x', 0)"), "1")
	want(t, "b GET_LOCK y", scalar(t, b, "SELECT GET_LOCK('y', 0)"), "1")
	done := make(chan error, 2)
	wait := func(c *sql.Conn, name string) {
		var v any
		done <- c.QueryRowContext(context.Background(), "SELECT GET_LOCK(?, 2)", name).Scan(&v)
	}
	start := time.Now()
	go wait(a, "y")
	go wait(b, "x")
	time.Sleep(200 * time.Millisecond)

	err = s.Close()
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("Close = %v, want ErrBusy", err)
	}
	t.Logf("Close: %v", err)
	for range 2 {
		if err := <-done; err == nil {
			t.Fatal("a deadlocked wait succeeded")
		}
	}
	if err := s.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Close = %v, want the first one's error", err)
	}
	if n := s.ln.open(); n != 2 {
		t.Fatalf("%d connections still served, want the 2 deadlocked ones", n)
	}
	_, _, _ = a.Close(), b.Close(), db.Close()
	// The server goroutines end when the 2 s waits time out.
	time.Sleep(time.Until(start.Add(2 * time.Second)))
	goleak.VerifyNone(t, before)
}
