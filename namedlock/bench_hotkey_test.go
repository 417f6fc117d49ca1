package namedlock_test

import (
	"context"
	"testing"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
)

// hotWorkers is how many goroutines contend in the hot-key benchmarks.
const hotWorkers = 16

// BenchmarkHotKey runs 16 goroutines of one process on one key: the library
// (one Locker; local queue and handoff) against the raw floor (16 pinned
// connections, each waiting in GET_LOCK on the server: the server's queue).
// The two are timed alternately in rounds of b.N/8 sections each. It reports
// sections per second for both and lib/raw (target ≥ 20).
func BenchmarkHotKey(b *testing.B) {
	srv := testdb.Get(b)
	conns := pinRaw(b, rawPool(b, srv.DSN, hotWorkers), hotWorkers)
	inst := newInstance(b, srv.DSN, benchOptions(b)...)
	key := testdb.UniqueName(b) + "-lib"
	rawName := keyfmt.Portable(testdb.UniqueName(b) + "-raw")
	ctx := context.Background()
	var rawEx, libEx exclusive
	libFn := func(context.Context) error { return libEx.body() }

	raw := &phase{workers: hotWorkers, run: func(w int) error {
		return conns[w].section(ctx, rawName, rawEx.body)
	}}
	lib := &phase{workers: hotWorkers, run: func(int) error {
		return inst.locker.Do(ctx, key, libFn)
	}}
	warm(b, raw, lib)
	b.ResetTimer()
	alternate(b, raw, lib)
	b.StopTimer()
	reportThroughput(b, raw, lib)
	st := inst.locker.Stats()
	if st.ServerAcquisitions > 0 {
		b.ReportMetric(float64(st.Handoffs)/float64(st.ServerAcquisitions), "handoffs/server-lock")
	}
}
