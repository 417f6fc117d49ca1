package namedlock_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
)

// BenchmarkFencedUncontended times, alternately in one run, an uncontended
// Do and DoTx against the same with fencing ([namedlock.WithFencing]): each
// iteration runs one section of each of the four, in an order that rotates
// every iteration. Do's section is empty; DoTx's updates one row. It reports
// the ratios fenced/plain for Do and DoTx (the cost of the one extra
// statement: the mint) and the medians of the per-iteration ratios.
func BenchmarkFencedUncontended(b *testing.B) {
	srv := testdb.RequireReal(b)
	app := testdb.OpenDB(b, srv.DSN)
	appx := sqlx.NewDb(app, "mysql")
	table := fenceTable(b, app)
	counter := counterTable(b, appx, 1, 2)
	plain := newInstance(b, srv.DSN, benchOptions(b)...)
	fence := newInstance(b, srv.DSN, append(benchOptions(b), namedlock.WithFencing(app, table))...)
	keyPlain, keyFenced := testdb.UniqueName(b)+"-plain", testdb.UniqueName(b)+"-fenced"
	ctx := context.Background()
	update := func(id int) func(context.Context, *sql.Tx) error {
		q := "UPDATE " + counter + " SET v = v + 1 WHERE id = ?"
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, q, id)
			return err
		}
	}
	upPlain, upFenced := update(1), update(2)
	sections := []func() error{
		func() error { return plain.locker.Do(ctx, keyPlain, nothing) },
		func() error { return fence.locker.Do(ctx, keyFenced, nothing) },
		func() error { return plain.locker.DoTx(ctx, keyPlain, appx.DB, nil, upPlain) },
		func() error { return fence.locker.DoTx(ctx, keyFenced, appx.DB, nil, upFenced) },
	}
	for range 10 {
		for _, s := range sections {
			if err := s(); err != nil {
				b.Fatal(err)
			}
		}
	}
	var total [4]time.Duration
	doRatios := make([]float64, 0, b.N)
	txRatios := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		var took [4]time.Duration
		for j := range sections {
			s := (i + j) % len(sections)
			t0 := time.Now()
			if err := sections[s](); err != nil {
				b.Fatal(err)
			}
			took[s] = time.Since(t0)
			total[s] += took[s]
		}
		doRatios = append(doRatios, float64(took[1])/float64(took[0]))
		txRatios = append(txRatios, float64(took[3])/float64(took[2]))
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(total[0].Nanoseconds())/n, "do-ns/op")
	b.ReportMetric(float64(total[1].Nanoseconds())/n, "fenced-do-ns/op")
	b.ReportMetric(float64(total[2].Nanoseconds())/n, "dotx-ns/op")
	b.ReportMetric(float64(total[3].Nanoseconds())/n, "fenced-dotx-ns/op")
	b.ReportMetric(float64(total[1])/float64(total[0]), "fenced/do")
	b.ReportMetric(float64(total[3])/float64(total[2]), "fenced/dotx")
	b.ReportMetric(median(doRatios), "fenced/do-med")
	b.ReportMetric(median(txRatios), "fenced/dotx-med")
}

// BenchmarkFencedHotKey runs 16 goroutines of one process on one key, Do
// with an empty section, without and with fencing, alternately in rounds:
// with fencing every holder, including each one served by a handoff, mints
// its token on the application's pool. It reports both throughputs and
// fenced/plain.
func BenchmarkFencedHotKey(b *testing.B) {
	srv := testdb.RequireReal(b)
	app := testdb.OpenDB(b, srv.DSN)
	app.SetMaxOpenConns(hotWorkers)
	app.SetMaxIdleConns(hotWorkers)
	table := fenceTable(b, app)
	plainInst := newInstance(b, srv.DSN, benchOptions(b)...)
	fenceInst := newInstance(b, srv.DSN, append(benchOptions(b), namedlock.WithFencing(app, table))...)
	keyPlain, keyFenced := testdb.UniqueName(b)+"-plain", testdb.UniqueName(b)+"-fenced"
	ctx := context.Background()
	var plainEx, fenceEx exclusive
	plain := &phase{workers: hotWorkers, run: func(int) error {
		return plainInst.locker.Do(ctx, keyPlain, func(context.Context) error { return plainEx.body() })
	}}
	fenced := &phase{workers: hotWorkers, run: func(int) error {
		return fenceInst.locker.Do(ctx, keyFenced, func(context.Context) error { return fenceEx.body() })
	}}
	warm(b, plain, fenced)
	b.ResetTimer()
	alternate(b, plain, fenced)
	b.StopTimer()
	b.ReportMetric(plain.rate(), "plain-sections/s")
	b.ReportMetric(fenced.rate(), "fenced-sections/s")
	if plain.rate() > 0 {
		b.ReportMetric(fenced.rate()/plain.rate(), "fenced/plain")
	}
}
