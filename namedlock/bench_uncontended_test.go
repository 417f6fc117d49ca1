package namedlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
)

// BenchmarkUncontended times one uncontended Do against the raw floor (one
// GET_LOCK and one RELEASE_LOCK on a pinned connection), alternately: each
// iteration runs one raw section and one library section, the order
// switching every iteration. It reports both times per section and their
// ratio, lib/raw (target ≤ 1.10), and lib/raw-med, the median of the pairs'
// ratios, which a burst of load on the machine moves less. ns/op and allocs/op cover the pair; see
// BenchmarkUncontendedDo for the library's own allocations.
func BenchmarkUncontended(b *testing.B) {
	srv := testdb.Get(b)
	raw := pinRaw(b, rawPool(b, srv.DSN, 1), 1)[0]
	inst := newInstance(b, srv.DSN, benchOptions(b)...)
	key := testdb.UniqueName(b) + "-lib"
	rawName := keyfmt.Portable(testdb.UniqueName(b) + "-raw")
	ctx := context.Background()
	var ex exclusive

	rawSection := func() {
		if err := raw.section(ctx, rawName, ex.body); err != nil {
			b.Fatal(err)
		}
	}
	libSection := func() {
		if err := inst.locker.Do(ctx, key, func(context.Context) error { return ex.body() }); err != nil {
			b.Fatal(err)
		}
	}
	for range 10 {
		rawSection()
		libSection()
	}

	var rawT, libT time.Duration
	ratios := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if i%2 == 0 {
			rawSection()
			t1 := time.Now()
			libSection()
			t2 := time.Now()
			rawT, libT = rawT+t1.Sub(t0), libT+t2.Sub(t1)
			ratios = append(ratios, float64(t2.Sub(t1))/float64(t1.Sub(t0)))
		} else {
			libSection()
			t1 := time.Now()
			rawSection()
			t2 := time.Now()
			libT, rawT = libT+t1.Sub(t0), rawT+t2.Sub(t1)
			ratios = append(ratios, float64(t1.Sub(t0))/float64(t2.Sub(t1)))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(rawT.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(libT.Nanoseconds())/float64(b.N), "lib-ns/op")
	if rawT > 0 {
		b.ReportMetric(float64(libT)/float64(rawT), "lib/raw")
	}
	b.ReportMetric(median(ratios), "lib/raw-med")
}

// BenchmarkUncontendedDo is the library alone, for its allocations per
// uncontended Do (run with -benchmem; the critical section allocates
// nothing). Its time is not comparable across runs: see
// BenchmarkUncontended.
func BenchmarkUncontendedDo(b *testing.B) {
	inst := newInstance(b, testdb.Get(b).DSN, benchOptions(b)...)
	key := testdb.UniqueName(b)
	ctx := context.Background()
	for range 10 {
		if err := inst.locker.Do(ctx, key, nothing); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := inst.locker.Do(ctx, key, nothing); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUncontendedRaw is the raw floor alone, for its allocations
// (those of database/sql and the driver, which the library cannot avoid).
func BenchmarkUncontendedRaw(b *testing.B) {
	raw := pinRaw(b, rawPool(b, testdb.Get(b).DSN, 1), 1)[0]
	name := keyfmt.Portable(testdb.UniqueName(b))
	ctx := context.Background()
	body := func() error { return nil }
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := raw.section(ctx, name, body); err != nil {
			b.Fatal(err)
		}
	}
}
