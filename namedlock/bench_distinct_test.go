package namedlock_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
)

// distinctWorkers is how many goroutines, each on its own key, run in
// BenchmarkDistinctKeys.
const distinctWorkers = 16

// BenchmarkDistinctKeys runs 16 goroutines on 16 distinct keys: the library
// (one Locker) against the raw floor (16 pinned connections), timed
// alternately in rounds. Nothing contends: this is the uncontended path under
// concurrency. It reports sections per second for both and lib/raw (target
// ≥ 0.95).
func BenchmarkDistinctKeys(b *testing.B) {
	srv := testdb.Get(b)
	conns := pinRaw(b, rawPool(b, srv.DSN, distinctWorkers), distinctWorkers)
	inst := newInstance(b, srv.DSN, benchOptions(b)...)
	base := testdb.UniqueName(b)
	keys := make([]string, distinctWorkers)
	rawNames := make([]string, distinctWorkers)
	for i := range keys {
		keys[i] = base + "-lib-" + strconv.Itoa(i)
		rawNames[i] = keyfmt.Portable(base + "-raw-" + strconv.Itoa(i))
	}
	ctx := context.Background()
	rawEx := make([]exclusive, distinctWorkers)
	libEx := make([]exclusive, distinctWorkers)
	libFns := make([]func(context.Context) error, distinctWorkers)
	for i := range libFns {
		libFns[i] = func(context.Context) error { return libEx[i].body() }
	}

	raw := &phase{workers: distinctWorkers, run: func(w int) error {
		return conns[w].section(ctx, rawNames[w], rawEx[w].body)
	}}
	lib := &phase{workers: distinctWorkers, run: func(w int) error {
		return inst.locker.Do(ctx, keys[w], libFns[w])
	}}
	warm(b, raw, lib)
	b.ResetTimer()
	alternate(b, raw, lib)
	b.StopTimer()
	reportThroughput(b, raw, lib)
}
