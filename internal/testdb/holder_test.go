package testdb

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"
)

// TestHolderOf: a lock held by a session of a test is named by HolderOf
// with that session's id, on every server: from IS_USED_LOCK where it
// names the holder, from what RecordHolder was told (under the name in
// another case) where it does not (TiDB). A free lock has no holder.
func TestHolderOf(t *testing.T) {
	s := RequireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := OpenDB(t, s.DSN)
	admin := OpenDB(t, s.DSN)
	name := UniqueName(t)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id, got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), GET_LOCK(?, 0)", name).Scan(&id, &got); err != nil || got.Int64 != 1 {
		t.Fatalf("GET_LOCK(%q) = %v, %v", name, got, err)
	}
	RecordHolder(strings.ToUpper(name), id.Int64)
	if h, err := HolderOf(ctx, admin, name); err != nil || h != id.Int64 {
		t.Errorf("HolderOf a lock held by session %d = %d, %v (%s; holders recorded: %v)", id.Int64, h, err, s.Name, RecordsHolders(t))
	}
	if err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", name).Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("RELEASE_LOCK(%q) = %v, %v", name, got, err)
	}
	if h, err := HolderOf(ctx, admin, name); err != nil || h != 0 {
		t.Errorf("HolderOf a free lock = %d, %v; want 0", h, err)
	}
}
