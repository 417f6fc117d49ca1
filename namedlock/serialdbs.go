package namedlock

import (
	"context"
	"database/sql"
	"sync"

	"github.com/namedlock/mysql/internal/flavor"
)

// serialDBs remembers, per business database, whether its serializable
// transactions lock what they read: MySQL and MariaDB do; TiDB (which
// refuses SERIALIZABLE or, told to, runs it as a snapshot) and the embedded
// server do not.
type serialDBs struct {
	m sync.Map // *sql.DB → bool
}

// locksReads reports whether db's serializable reads lock, asking db's
// server once.
func (c *serialDBs) locksReads(ctx context.Context, db *sql.DB) (bool, error) {
	if v, ok := c.m.Load(db); ok {
		return v.(bool), nil
	}
	f, _, err := flavor.Detect(ctx, db)
	if err != nil {
		return false, err
	}
	ok := f == flavor.MySQL || f == flavor.MariaDB
	c.m.Store(db, ok)
	return ok, nil
}
