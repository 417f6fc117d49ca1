package pool

import (
	"context"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/namedlock/mysql/internal/testdb"
)

// TestNetConnEntriesCollected: the entry a connection of an Open pool has in
// netConns goes away once the connection is closed and collected (the map
// holds it weakly), so a pool that churns connections leaks nothing.
func TestNetConnEntriesCollected(t *testing.T) {
	db, err := Open(testdb.Get(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var key uintptr
	var entry any
	_ = c.Raw(func(dc any) error {
		if NetConn(dc) == nil {
			t.Error("NetConn = nil for an Open connection")
		}
		key = uintptr(unsafe.Pointer(addressOf(dc)))
		entry, _ = netConns.Load(key)
		return nil
	})
	_ = c.Close()
	_ = db.Close()
	if entry == nil {
		t.Fatal("no entry for the connection")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if v, ok := netConns.Load(key); !ok || v != entry {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the closed connection's entry is still in netConns after 10 s of GCs")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
