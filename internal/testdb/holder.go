package testdb

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
)

// holders is what RecordHolder was told: lowercased lock name -> the
// session id it was last granted to.
var holders sync.Map

// RecordHolder records that the lock name (the server's name of a key) was
// granted to the server session id, for HolderOf on a server whose
// IS_USED_LOCK names no holder (TiDB). Tests call it from the observer of
// their Lockers, with an Acquired event's Session; 0 records nothing.
func RecordHolder(name string, id int64) {
	if id != 0 {
		holders.Store(strings.ToLower(name), id)
	}
}

// HolderOf returns the connection id that holds the named lock name on the
// test server, as seen from db (another session), or 0 when it is free.
// IS_USED_LOCK answers it, except on TiDB, where it answers 1 for a held
// lock: there the id is the one RecordHolder was last told for name, or 1
// when it was told none.
func HolderOf(ctx context.Context, db *sql.DB, name string) (int64, error) {
	var id sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil {
		return 0, err
	}
	if !id.Valid || id.Int64 == 0 {
		return 0, nil
	}
	if found != nil && !found.Flavor.NamesHolder() {
		if h, ok := holders.Load(strings.ToLower(name)); ok {
			return h.(int64), nil
		}
	}
	return id.Int64, nil
}

// RecordsHolders reports whether HolderOf reads what RecordHolder was told
// on the test server (it does where IS_USED_LOCK names no holder: TiDB).
func RecordsHolders(tb testing.TB) bool {
	tb.Helper()
	return !Get(tb).Flavor.NamesHolder()
}
