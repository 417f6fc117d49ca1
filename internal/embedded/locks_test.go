package embedded

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

func connID(t *testing.T, c *sql.Conn) string {
	t.Helper()
	v := scalar(t, c, "SELECT CONNECTION_ID()")
	if !v.Valid || v.String == "0" {
		t.Fatalf("CONNECTION_ID() = %v", v)
	}
	return v.String
}

func TestNamedLocksExcludeAcrossConnections(t *testing.T) {
	db := openDB(t, start(t))
	a, b := conn(t, db), conn(t, db)
	idA, idB := connID(t, a), connID(t, b)
	if idA == idB {
		t.Fatalf("both connections have id %s", idA)
	}
	const name = "lock-a"

	want(t, "a GET_LOCK", scalar(t, a, "SELECT GET_LOCK(?, ?)", name, 0), "1")
	want(t, "IS_USED_LOCK", scalar(t, b, "SELECT IS_USED_LOCK(?)", name), idA)
	want(t, "owned by a", scalar(t, a, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", name), "1")
	want(t, "b GET_LOCK", scalar(t, b, "SELECT GET_LOCK(?, ?)", name, 0), "0")

	start := time.Now()
	want(t, "b GET_LOCK 1 s", scalar(t, b, "SELECT GET_LOCK(?, ?)", name, 1), "0")
	d := time.Since(start)
	// contract: a GET_LOCK wait lasts its whole timeout (doc.go, Limits).
	if d < 900*time.Millisecond {
		t.Fatalf("GET_LOCK(name, 1) gave up after %v, before its 1 s timeout", d)
	}
	// contract: a GET_LOCK wait ends at its timeout; 3 s (3× the timeout)
	// only catches one that does not.
	if d > 3*time.Second {
		t.Fatalf("GET_LOCK(name, 1) gave up after %v, long after its 1 s timeout", d)
	}

	want(t, "b RELEASE_LOCK", scalar(t, b, "SELECT RELEASE_LOCK(?)", name), "0")
	want(t, "a GET_LOCK again", scalar(t, a, "SELECT GET_LOCK(?, 0)", name), "1")
	want(t, "a RELEASE_LOCK 1", scalar(t, a, "SELECT RELEASE_LOCK(?)", name), "1")
	want(t, "still held", scalar(t, b, "SELECT IS_USED_LOCK(?)", name), idA)
	want(t, "a RELEASE_LOCK 2", scalar(t, a, "SELECT RELEASE_LOCK(?)", name), "1")
	want(t, "IS_USED_LOCK free", scalar(t, b, "SELECT IS_USED_LOCK(?)", name), "NULL")
	want(t, "b GET_LOCK free", scalar(t, b, "SELECT GET_LOCK(?, 0)", name), "1")
	want(t, "IS_USED_LOCK b", scalar(t, a, "SELECT IS_USED_LOCK(?)", name), idB)
	want(t, "never taken", scalar(t, a, "SELECT RELEASE_LOCK(?)", "never-taken"), "NULL")
	want(t, "never taken", scalar(t, a, "SELECT IS_USED_LOCK(?)", "never-taken"), "NULL")
}

func TestWaitingGetLockIsGrantedOnRelease(t *testing.T) {
	db := openDB(t, start(t))
	a, b := conn(t, db), conn(t, db)
	want(t, "a GET_LOCK", scalar(t, a, "SELECT GET_LOCK('w', 0)"), "1")
	got := make(chan sql.NullString, 1)
	go func() {
		var v sql.NullString
		_ = b.QueryRowContext(context.Background(), "SELECT GET_LOCK('w', 5)").Scan(&v)
		got <- v
	}()
	time.Sleep(100 * time.Millisecond)
	want(t, "a RELEASE_LOCK", scalar(t, a, "SELECT RELEASE_LOCK('w')"), "1")
	want(t, "b's wait", <-got, "1")
}

func TestClosingConnectionReleasesItsLocks(t *testing.T) {
	db := openDB(t, start(t))
	a, b := conn(t, db), conn(t, db)
	want(t, "a GET_LOCK", scalar(t, a, "SELECT GET_LOCK('c1', 0)"), "1")
	want(t, "a GET_LOCK", scalar(t, a, "SELECT GET_LOCK('c2', 0)"), "1")
	// Discard a's connection instead of returning it to the pool.
	_ = a.Raw(func(any) error { return errBadConn })
	_ = a.Close()
	// contract: closing a connection releases its locks (doc.go); the 5 s
	// only ends a wait for a release that never comes.
	deadline := time.Now().Add(5 * time.Second)
	for scalar(t, b, "SELECT IS_USED_LOCK('c1')").Valid {
		if time.Now().After(deadline) {
			t.Fatal("lock still held 5 s after its connection closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	want(t, "b GET_LOCK c1", scalar(t, b, "SELECT GET_LOCK('c1', 0)"), "1")
	want(t, "b GET_LOCK c2", scalar(t, b, "SELECT GET_LOCK('c2', 0)"), "1")
}

// The documented limits: names compare case-sensitively and timeouts are
// rounded to whole seconds.
func TestLimits(t *testing.T) {
	db := openDB(t, start(t))
	a, b := conn(t, db), conn(t, db)
	want(t, "a GET_LOCK", scalar(t, a, "SELECT GET_LOCK('Case', 0)"), "1")
	want(t, "b other case", scalar(t, b, "SELECT GET_LOCK('case', 0)"), "1")

	// contract: timeouts are rounded to whole seconds (doc.go, Limits).
	// 0.3 rounds to 0: it answers without waiting, well before the 1 s a
	// wait would take (500 ms is the generous bound that still tells them
	// apart).
	start := time.Now()
	want(t, "b GET_LOCK", scalar(t, b, "SELECT GET_LOCK('Case', ?)", 0.3), "0")
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("GET_LOCK(held, 0.3) gave up after %v, want no wait (rounded to 0)", d)
	}
	// contract: 0.6 rounds to 1: it waits a whole second, not 0.6 (doc.go).
	start = time.Now()
	want(t, "b GET_LOCK", scalar(t, b, "SELECT GET_LOCK('Case', ?)", 0.6), "0")
	d := time.Since(start)
	if d < 900*time.Millisecond {
		t.Fatalf("GET_LOCK(held, 0.6) gave up after %v, want a 1 s wait (rounded to 1)", d)
	}
	// contract: the wait ends at its timeout; 3 s only catches one that
	// does not.
	if d > 3*time.Second {
		t.Fatalf("GET_LOCK(held, 0.6) gave up after %v, long after its 1 s timeout", d)
	}
	want(t, "empty name", scalar(t, b, "SELECT GET_LOCK('', 0)"), "1")
	want(t, "NULL name", scalar(t, b, "SELECT GET_LOCK(NULL, 0)"), "NULL")
	want(t, "NULL timeout", scalar(t, b, "SELECT GET_LOCK('n', NULL)"), "NULL")
}
