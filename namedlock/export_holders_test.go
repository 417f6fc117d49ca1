package namedlock

import (
	"slices"
	"testing"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
)

// RecordHolders returns opts for a Locker of a test whose holders
// testdb.HolderOf may be asked for. On a server whose IS_USED_LOCK names no
// holder (TiDB), where HolderOf answers what testdb.RecordHolder was told,
// it adds a last option: an observer that records the session of every lock
// acquired ([Event].Session, under the key's server name) and then calls
// the observer opts set, if any (WithObserver keeps only the last one).
// Elsewhere, and in benchmarks, which ask for no holder, it returns opts as
// they are: the Locker has only the observer its test gives it.
func RecordHolders(tb testing.TB, opts ...Option) []Option {
	tb.Helper()
	if _, bench := tb.(*testing.B); bench || !testdb.RecordsHolders(tb) {
		return opts
	}
	c := defaultConfig()
	for _, opt := range opts {
		if opt != nil { // New reports it
			_ = opt(&c)
		}
	}
	next := c.observer
	return append(slices.Clip(opts), WithObserver(func(e Event) {
		if e.Outcome == Acquired {
			testdb.RecordHolder(keyfmt.Portable(e.Key), e.Session)
		}
		if next != nil {
			next(e)
		}
	}))
}
