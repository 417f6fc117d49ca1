// Package testhook lets the module's tests learn what a server does not
// say: which session holds a named lock, on TiDB, whose IS_USED_LOCK answers
// 1, not the holder's connection id, to other sessions. namedlock reports
// every lock the server grants it (Granted); the tests enable the record
// (testdb.Main does) and read it (Holder) to find the session to KILL.
// Nothing is recorded unless Enable was called: one atomic load per server
// acquisition otherwise.
package testhook

import (
	"strings"
	"sync"
	"sync/atomic"
)

var (
	enabled atomic.Bool
	holders sync.Map // lowercased lock name -> int64 session id
)

// Enable starts recording grants. Only tests call it.
func Enable() { enabled.Store(true) }

// Granted records that the server granted the lock name to session id.
func Granted(name string, id int64) {
	if enabled.Load() {
		holders.Store(strings.ToLower(name), id)
	}
}

// Holder returns the session id that name was last granted to in this
// process (by any Locker), or 0 when none was recorded.
func Holder(name string) int64 {
	if v, ok := holders.Load(strings.ToLower(name)); ok {
		return v.(int64)
	}
	return 0
}
