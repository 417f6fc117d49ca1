package pool

import (
	"database/sql"
	"database/sql/driver"
	"runtime"
	"sync"
	"weak"
)

// connectors maps pools opened by Open to their connectors, weakly, so that
// a pool that is garbage collected drops out of the map.
var connectors sync.Map // weak.Pointer[sql.DB] -> driver.Connector

func register(db *sql.DB, c driver.Connector) {
	key := weak.Make(db)
	connectors.Store(key, c)
	runtime.AddCleanup(db, func(k weak.Pointer[sql.DB]) { connectors.Delete(k) }, key)
}

// ControlConnector returns the connector behind a pool opened by [Open], or
// nil for any other *sql.DB. namedlock uses it to open a control connection
// outside the bounded pool, so that ending the server-side wait of a
// cancelled GET_LOCK (KILL) can never wait for, or exhaust, the pool itself.
func ControlConnector(db *sql.DB) driver.Connector {
	c, ok := connectors.Load(weak.Make(db))
	if !ok {
		return nil
	}
	return c.(driver.Connector)
}
