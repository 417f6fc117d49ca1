package namedlock_test

// Shared machinery of the benchmarks. Every benchmark measures the library
// against its raw floor in the same run: a pinned *sql.Conn from a pool
// opened with interpolateParams=true, running SELECT GET_LOCK(?, ?) and
// DO RELEASE_LOCK(?) directly. The two are timed alternately, in short
// rounds, because this machine's speed drifts by 2–5× within seconds: only
// the ratios within one run mean anything.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/namedlock"
)

// rawWait is the GET_LOCK timeout of the raw floor, in seconds: long enough
// that a raw waiter never times out during a benchmark.
const rawWait = 600

// benchHandoffEnv overrides the Locker's handoff bounds in the benchmarks,
// as "count,duration" (e.g. "32,10ms"), to tune the defaults.
const benchHandoffEnv = "NAMEDLOCK_BENCH_HANDOFF"

// benchOptions returns the Locker options of the benchmarks: the defaults,
// unless NAMEDLOCK_BENCH_HANDOFF sets the handoff bounds.
func benchOptions(tb testing.TB) []namedlock.Option {
	tb.Helper()
	v := os.Getenv(benchHandoffEnv)
	if v == "" {
		return nil
	}
	n, d, ok := strings.Cut(v, ",")
	count, err1 := strconv.Atoi(strings.TrimSpace(n))
	dur, err2 := time.ParseDuration(strings.TrimSpace(d))
	if !ok || err1 != nil || err2 != nil {
		tb.Fatalf("%s=%q: want count,duration (e.g. 32,10ms)", benchHandoffEnv, v)
	}
	return []namedlock.Option{namedlock.WithHandoff(count, dur)}
}

// rawPool opens the raw floor's pool on dsn with interpolated parameters
// (one round trip per statement, as the library's lock pool), room for
// conns connections, closed at the end of tb.
func rawPool(tb testing.TB, dsn string, conns int) *sql.DB {
	tb.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatalf("parse DSN: %v", err)
	}
	cfg.InterpolateParams = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatalf("connector: %v", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// rawConn is the raw floor: one pinned connection running GET_LOCK and
// RELEASE_LOCK itself.
type rawConn struct {
	conn *sql.Conn
	got  sql.NullInt64
}

// pinRaw pins n connections of db for the whole benchmark.
func pinRaw(tb testing.TB, db *sql.DB, n int) []*rawConn {
	tb.Helper()
	out := make([]*rawConn, n)
	for i := range out {
		conn, err := db.Conn(context.Background())
		if err != nil {
			tb.Fatalf("raw connection: %v", err)
		}
		tb.Cleanup(func() { _ = conn.Close() })
		out[i] = &rawConn{conn: conn}
	}
	return out
}

// lock runs SELECT GET_LOCK(name, rawWait).
func (r *rawConn) lock(ctx context.Context, name string) error {
	if err := r.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, rawWait).Scan(&r.got); err != nil {
		return fmt.Errorf("raw GET_LOCK(%q): %w", name, err)
	}
	if !r.got.Valid || r.got.Int64 != 1 {
		return fmt.Errorf("raw GET_LOCK(%q) answered %v", name, r.got)
	}
	return nil
}

// unlock runs DO RELEASE_LOCK(name).
func (r *rawConn) unlock(ctx context.Context, name string) error {
	if _, err := r.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", name); err != nil {
		return fmt.Errorf("raw RELEASE_LOCK(%q): %w", name, err)
	}
	return nil
}

// section is one raw critical section on name: GET_LOCK, body, RELEASE_LOCK.
func (r *rawConn) section(ctx context.Context, name string, body func() error) error {
	if err := r.lock(ctx, name); err != nil {
		return err
	}
	berr := body()
	if err := r.unlock(ctx, name); err != nil {
		return err
	}
	return berr
}

// exclusive is the body of a benchmarked critical section: it fails if two
// holders are ever inside at once, and counts the sections.
type exclusive struct {
	inside atomic.Bool
	count  atomic.Int64
}

func (e *exclusive) body() error {
	if e.inside.Swap(true) {
		return fmt.Errorf("two holders inside one critical section")
	}
	e.count.Add(1)
	e.inside.Store(false)
	return nil
}

// phase is one side of a throughput comparison: workers goroutines, each
// running sections with run(worker) until the round's sections are taken.
type phase struct {
	workers  int
	run      func(worker int) error
	sections int64
	elapsed  time.Duration
	rates    []float64 // sections per second of each round
}

// runRound runs n sections of p spread over its workers, and adds them and
// the wall time to p.
func (p *phase) runRound(n int64) error {
	var tickets atomic.Int64
	tickets.Store(n)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for w := range p.workers {
		wg.Go(func() {
			for tickets.Add(-1) >= 0 {
				if err := p.run(w); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					tickets.Store(0)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	p.elapsed += elapsed
	p.sections += n
	p.rates = append(p.rates, float64(n)/elapsed.Seconds())
	return first
}

// rate returns p's sections per second.
func (p *phase) rate() float64 {
	if p.elapsed <= 0 {
		return 0
	}
	return float64(p.sections) / p.elapsed.Seconds()
}

// benchRounds is how many rounds a throughput benchmark splits b.N into.
const benchRounds = 8

// alternate runs b.N sections of each phase in up to benchRounds rounds,
// alternating which phase goes first, so that both see the same drift of
// the machine's speed. It fails b on the first error.
func alternate(b *testing.B, phases ...*phase) {
	b.Helper()
	alternateIn(b, benchRounds, phases...)
}

// alternateIn is alternate in up to rounds rounds.
func alternateIn(b *testing.B, rounds int, phases ...*phase) {
	b.Helper()
	rounds = min(rounds, b.N)
	per := int64(b.N / rounds)
	for r := range rounds {
		n := per
		if r == rounds-1 {
			n = int64(b.N) - per*int64(rounds-1)
		}
		for i := range phases {
			p := phases[(i+r)%len(phases)]
			if err := p.runRound(n); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// warm runs a few sections of each phase, untimed, so that every pool has
// its connections open before the measurement.
func warm(b *testing.B, phases ...*phase) {
	b.Helper()
	for _, p := range phases {
		if err := p.runRound(int64(4 * p.workers)); err != nil {
			b.Fatal(err)
		}
		p.sections, p.elapsed, p.rates = 0, 0, nil
	}
}

// reportThroughput reports the raw floor's and the library's sections per
// second and their ratio over the whole run, lib/raw (higher is better; the
// targets are ratios), and lib/raw-med, the median of the rounds' ratios,
// which a burst of load on the machine during one round moves less.
func reportThroughput(b *testing.B, raw, lib *phase) {
	b.Helper()
	b.ReportMetric(raw.rate(), "raw-sections/s")
	b.ReportMetric(lib.rate(), "lib-sections/s")
	if raw.rate() > 0 {
		b.ReportMetric(lib.rate()/raw.rate(), "lib/raw")
	}
	ratios := make([]float64, 0, len(lib.rates))
	for i := range min(len(lib.rates), len(raw.rates)) {
		ratios = append(ratios, lib.rates[i]/raw.rates[i])
	}
	if len(ratios) > 0 {
		b.ReportMetric(median(ratios), "lib/raw-med")
	}
}

// median returns the median of vs (which it sorts).
func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

func nothing(context.Context) error { return nil }
