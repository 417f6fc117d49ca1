package namedlock_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
)

// BenchmarkTwoInstances runs two Lockers, each on its own pool as two
// processes would, with 8 goroutines each on one hot key, and reports each
// instance's share of the sections (target ≥ 35 % each; handoff is bounded
// so that neither starves the other) and the combined throughput against
// the raw floor (16 pinned connections in GET_LOCK on the key), timed
// alternately in two rounds.
func BenchmarkTwoInstances(b *testing.B) {
	srv := testdb.Get(b)
	conns := pinRaw(b, rawPool(b, srv.DSN, hotWorkers), hotWorkers)
	insts := []*instance{
		newInstance(b, srv.DSN, benchOptions(b)...),
		newInstance(b, srv.DSN, benchOptions(b)...),
	}
	key := testdb.UniqueName(b) + "-lib"
	rawName := keyfmt.Portable(testdb.UniqueName(b) + "-raw")
	ctx := context.Background()
	var rawEx, libEx exclusive
	var done [2]atomic.Int64
	fns := [2]func(context.Context) error{}
	for i := range fns {
		fns[i] = func(context.Context) error {
			done[i].Add(1)
			return libEx.body()
		}
	}

	raw := &phase{workers: hotWorkers, run: func(w int) error {
		return conns[w].section(ctx, rawName, rawEx.body)
	}}
	// Workers 0–7 are instance A's, 8–15 instance B's.
	lib := &phase{workers: hotWorkers, run: func(w int) error {
		i := w * len(insts) / hotWorkers
		return insts[i].locker.Do(ctx, key, fns[i])
	}}
	warm(b, raw, lib)
	done[0].Store(0)
	done[1].Store(0)
	b.ResetTimer()
	// Two long rounds, not eight: a share is only meaningful over many
	// handoff periods (up to DefaultMaxHandoffTime each), and each round
	// starts with the lock free, to whichever instance asks first.
	alternateIn(b, 2, raw, lib)
	b.StopTimer()
	reportThroughput(b, raw, lib)
	a, c := float64(done[0].Load()), float64(done[1].Load())
	if a+c > 0 {
		b.ReportMetric(100*a/(a+c), "A-%")
		b.ReportMetric(100*c/(a+c), "B-%")
		b.ReportMetric(100*min(a, c)/(a+c), "min-share-%")
	}
}
