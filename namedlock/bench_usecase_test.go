package namedlock_test

// The use-case benchmarks (issue 12): the critical section this project is
// built for, not an empty one. Every section sells one unit of a product:
// it reads the stock and writes stock − 1 on the application's primary pool,
// committed durably (the server's defaults: no relaxed flushing). Eight
// contenders sell, alternately in rounds of one run, each from its own
// product rows (own ids, own lock names), so that they never wait for each
// other:
//
//   - raw: SELECT GET_LOCK on a pinned connection of a raw pool, then BEGIN;
//     SELECT stock; UPDATE; COMMIT on the primary pool; then RELEASE_LOCK —
//     what a program would write by hand;
//   - do: Locker.Do, the same transaction inside, on fn's ctx;
//   - dotx: Locker.DoTx, SELECT and UPDATE in fn;
//   - fenced-dotx: the same on a Locker WithFencing on the primary pool;
//   - serial-dotx: dotx on a Locker WithSerializableHandoff (at SERIALIZABLE): the
//     transaction begun before the wait, the lock handed on when fn returns
//     (where the server's serializable reads lock: MySQL, MariaDB);
//   - forupdate: BEGIN; SELECT stock … FOR UPDATE; UPDATE; COMMIT, with no
//     named lock: what a user would write instead;
//   - forupdate-plus1: the same with one more statement (SELECT 1) between
//     the locking read and the UPDATE: a row-lock transaction with exactly
//     a fenced DoTx's number of statements while the row is held (the mint,
//     then the read). Not a contender users would pick: it measures what
//     one statement more on the serial path costs, which bounds fenced DoTx
//     on a hot key (fenced-dotx/forupdate-plus1 shows what is left).
//   - ceiling: one UPDATE … SET stock = stock − 1 WHERE id = ? AND stock > 0,
//     the fastest way to sell from one row (and no lock at all).
//   - dobatch: Locker.DoBatch on the fenced Locker, SELECT and UPDATE in fn
//     (the dotx section unchanged): the sections queued in one process run
//     in one transaction, one savepoint each, committed once;
//   - merger: a Merger on the fenced Locker whose fn sells for the whole
//     group at once: one read of the stock, one write of stock − n.
//
// Each contender's p50 and p99 latency (of the timed sections, in ms) is
// reported beside its throughput.
//
// Every section runs on a fresh cancellable ctx (context.WithCancel of a
// background ctx that only a watchdog cancels, when the run stalls), as a
// request handler's is: go-sql-driver then runs each statement with its
// watcher-goroutine handshake, for every contender alike.
// The primary pool is bounded like a real service's (usecasePoolConns per
// instance, all kept idle). After the run the stock is checked: each
// contender's rows must show exactly as many units sold as it had
// successful sections, none below zero; otherwise the benchmark fails.
//
// b.N is the number of sections per contender, split over the rounds; ns/op
// is the wall time of all the contenders over b.N.

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

const (
	// usecasePoolConns bounds each instance's primary pool, and its raw
	// pool when it has more callers than that.
	usecasePoolConns = 32
	// usecaseStock is every product's stock at the start: more than any run
	// sells.
	usecaseStock = 1_000_000_000
	// usecaseIDs spaces the contenders' product ids: contender c sells
	// products (c+1)*usecaseIDs + j, j < products.
	usecaseIDs = 1000
)

// useCase is one scenario.
type useCase struct {
	instances int // processes, each with its own pools and Lockers
	callers   int // goroutines per instance
	products  int // products per contender; > 1: each section on a random one
	rounds    int // alternating rounds b.N is split into
}

// BenchmarkUseCaseUncontended: one caller, one product per contender. The
// reference is the raw GET_LOCK sequence: do/raw (target ≥ 0.95, as the
// median of the rounds' ratios), dotx/raw, fenced-dotx/raw, forupdate/raw,
// ceiling/raw.
func BenchmarkUseCaseUncontended(b *testing.B) {
	cs := runUseCase(b, useCase{instances: 1, callers: 1, products: 1, rounds: benchRounds})
	reportUseCase(b, cs, "raw", 1)
}

// BenchmarkUseCaseHotKey: one product per contender, 16 callers of one
// process. The reference is SELECT … FOR UPDATE: fenced-dotx/forupdate
// (target ≥ 0.9, median of the rounds' ratios), dotx/forupdate,
// do/forupdate, ceiling/forupdate, raw/forupdate.
func BenchmarkUseCaseHotKey(b *testing.B) {
	cs := runUseCase(b, useCase{instances: 1, callers: hotWorkers, products: 1, rounds: benchRounds})
	reportUseCase(b, cs, "forupdate", 1)
}

// BenchmarkUseCaseFlashSale: one product per contender, two instances (own
// lock pools, Lockers, primary pools and raw pools, as two processes would
// have) × 128 callers, where row-lock waiters pile up inside the server.
// The reference is SELECT … FOR UPDATE: fenced-dotx/forupdate (target ≥
// 1.0, median of the rounds' ratios), and for each named-lock contender
// its smaller instance's share of the sections, <name>-min-share-%
// (target for fenced-dotx ≥ 40).
//
// Each round is a burst: up to 256 callers take its b.N/5 sections, so the
// callers only pile up when b.N/5 is well above 256 (the depth is reported
// as sections/round/caller); a share is only meaningful over many handoff
// periods. Five rounds, the fewest the targets allow, keep the
// rounds as deep as b.N permits, and ./bench.sh runs it with a longer
// -benchtime than the others (10 s: about 2.7 sections per caller per
// round here).
//
// The raw contender's pool is bounded like the primary pool: an instance's
// 128 raw callers share its 32 pinned connections, the others waiting in
// the process for one. The run holds about 130 server connections (2 × 32
// primary, 2 × 32 raw, the lock pools); MariaDB's default max_connections
// is 151.
func BenchmarkUseCaseFlashSale(b *testing.B) {
	uc := useCase{instances: 2, callers: 128, products: 1, rounds: 5}
	cs := runUseCase(b, uc)
	reportUseCase(b, cs, "forupdate", uc.instances)
	rounds := min(uc.rounds, b.N)
	b.ReportMetric(float64(b.N)/float64(rounds)/float64(uc.instances*uc.callers), "sections/round/caller")
}

// BenchmarkUseCaseManyKeys: 100 products per contender, 16 callers, each
// section on a random product (two callers sometimes meet on one). The
// reference is the raw GET_LOCK sequence: do/raw (target ≥ 0.95, median of
// the rounds' ratios), dotx/raw, fenced-dotx/raw, forupdate/raw,
// ceiling/raw.
func BenchmarkUseCaseManyKeys(b *testing.B) {
	cs := runUseCase(b, useCase{instances: 1, callers: distinctWorkers, products: 100, rounds: benchRounds})
	reportUseCase(b, cs, "raw", 1)
}

// usecaseInstance is one simulated process: its primary pool, its raw
// pool's pinned connections, a plain Locker (for Do and DoTx) and a fenced
// one, each on its own lock pool.
type usecaseInstance struct {
	app    *sql.DB
	appx   *sqlx.DB
	raw    []*rawConn
	free   chan *rawConn // raw connections shared by more callers; nil: one per caller
	plain  *instance
	fenced *instance
	serial *instance // WithSerializableHandoff (serial-dotx)
	// variant: a second fenced Locker with the change under measurement
	// (the fenced-dotx-b contender; see benchVariantEnv).
	variant *instance
	// variantPlain: the same with the serializable handoff instead of
	// fencing (the serial-dotx-b contender).
	variantPlain *instance
	// batchVariant: a fenced Locker with other group bounds (the
	// dobatch-b and merger-b contenders; see benchBatchEnv).
	batchVariant *instance
}

// rawFor returns the raw connection caller w uses, and a function that
// gives it back.
func (in *usecaseInstance) rawFor(w int) (*rawConn, func()) {
	if in.free == nil {
		return in.raw[w], func() {}
	}
	r := <-in.free
	return r, func() { in.free <- r }
}

// contender is one way of selling, measured as one phase.
type contender struct {
	name  string
	named bool // takes a named lock: its instances' shares are reported
	base  int  // its first product id
	// sell runs one section on product base + j for caller w of in.
	sell  func(ctx context.Context, in *usecaseInstance, w, j int) error
	sold  atomic.Int64   // successful sections, warm-up included: what the stock must show
	per   []atomic.Int64 // timed sections per instance
	phase *phase
	latMu sync.Mutex
	lats  []time.Duration // of the timed sections
}

// latency records one section's duration.
func (c *contender) latency(d time.Duration) {
	c.latMu.Lock()
	c.lats = append(c.lats, d)
	c.latMu.Unlock()
}

// percentile returns the p-th percentile (0 < p < 100) of c's latencies.
func (c *contender) percentile(p float64) time.Duration {
	c.latMu.Lock()
	defer c.latMu.Unlock()
	if len(c.lats) == 0 {
		return 0
	}
	s := slices.Clone(c.lats)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}

// runUseCase builds uc's instances, products and contenders, warms them,
// runs b.N sections of each, alternately in uc.rounds rounds (the order
// rotating every round), and checks the stock. It returns the contenders,
// in their fixed order, for reporting.
func runUseCase(b *testing.B, uc useCase) []*contender {
	b.Helper()
	srv := testdb.RequireReal(b)
	insts := make([]*usecaseInstance, uc.instances)
	rawConns := min(uc.callers, usecasePoolConns)
	for i := range insts {
		app := testdb.OpenDB(b, srv.DSN) // interpolateParams=true
		app.SetMaxOpenConns(usecasePoolConns)
		app.SetMaxIdleConns(usecasePoolConns)
		in := &usecaseInstance{app: app, appx: sqlx.NewDb(app, "mysql")}
		in.raw = pinRaw(b, rawPool(b, srv.DSN, rawConns), rawConns)
		if uc.callers > rawConns {
			in.free = make(chan *rawConn, rawConns)
			for _, r := range in.raw {
				in.free <- r
			}
		}
		insts[i] = in
	}
	// One connection per key held or waited for by this process (callers
	// of one Locker on one key share one); 100 keys may need 100.
	poolOpts := []pool.Option{pool.WithMaxConns(max(pool.DefaultMaxConns, uc.products))}
	fence := fenceTable(b, insts[0].app) // CreateFenceTable, once
	for _, in := range insts {
		in.plain = newInstanceWithPool(b, poolOpts, benchOptions(b)...)
		in.fenced = newInstanceWithPool(b, poolOpts, append(benchOptions(b), namedlock.WithFencing(in.app, fence))...)
		in.serial = newInstanceWithPool(b, poolOpts, append(benchOptions(b), namedlock.WithSerializableHandoff())...)
		if v := os.Getenv(benchVariantEnv); v != "" {
			n, d, _ := strings.Cut(v, ",")
			count, err1 := strconv.Atoi(n)
			dur, err2 := time.ParseDuration(d)
			if err1 != nil || err2 != nil {
				b.Fatalf("%s=%q: want count,duration (the variant Lockers' handoff bounds)", benchVariantEnv, v)
			}
			opts := append(benchOptions(b), namedlock.WithFencing(in.app, fence), namedlock.WithHandoff(count, dur))
			in.variant = newInstanceWithPool(b, poolOpts, opts...)
			in.variantPlain = newInstanceWithPool(b, poolOpts, append(benchOptions(b), opts[len(opts)-1], namedlock.WithSerializableHandoff())...)
		}
	}

	for _, in := range insts {
		if v := os.Getenv(benchBatchEnv); v != "" {
			n, d, _ := strings.Cut(v, ",")
			count, err1 := strconv.Atoi(n)
			dur, err2 := time.ParseDuration(d)
			if err1 != nil || err2 != nil {
				b.Fatalf("%s=%q: want count,duration (WithBatchLimits)", benchBatchEnv, v)
			}
			in.batchVariant = newInstanceWithPool(b, poolOpts, append(benchOptions(b), namedlock.WithFencing(in.app, fence), namedlock.WithBatchLimits(count, dur))...)
		}
	}
	cs := usecaseContenders(uc, insts)
	table := productsTable(b, insts[0].app, cs, uc.products)
	q := usecaseQueries(table)
	keyBase := testdb.UniqueName(b)
	for _, c := range cs {
		keys := make([]string, uc.products)
		for j := range keys {
			keys[j] = keyBase + ":" + strconv.Itoa(c.base+j)
		}
		c.sell = q.seller(c.name, c.base, keys)
	}

	// Every section's ctx is cancellable, as a request's is; their parent
	// is cancelled only by the watchdog, so that a run that stalls fails
	// instead of hanging (go test's -timeout does not cover benchmarks).
	parent, finished, stopWatch := usecaseWatchdog(b)
	phases := make([]*phase, len(cs))
	for i, c := range cs {
		c.phase = &phase{workers: uc.instances * uc.callers, run: func(w int) error {
			inst, local := w/uc.callers, w%uc.callers
			j := 0
			if uc.products > 1 {
				j = rand.IntN(uc.products)
			}
			ctx, cancel := context.WithCancel(parent)
			start := time.Now()
			err := c.sell(ctx, insts[inst], local, j)
			c.latency(time.Since(start))
			cancel()
			if err != nil {
				if parent.Err() != nil {
					err = fmt.Errorf("%w (%w)", context.Cause(parent), err)
				}
				return fmt.Errorf("%s: %w", c.name, err)
			}
			c.sold.Add(1)
			c.per[inst].Add(1)
			finished.Add(1)
			return nil
		}}
		phases[i] = c.phase
	}
	// Warm up: one section per caller (at least 8) opens every pool's
	// connections before the measurement.
	for _, p := range phases {
		if err := p.runRound(int64(max(p.workers, 8))); err != nil {
			b.Fatal(err)
		}
		p.sections, p.elapsed, p.rates = 0, 0, nil
	}
	for _, c := range cs {
		for i := range c.per {
			c.per[i].Store(0)
		}
		c.lats = nil
	}
	b.ResetTimer()
	alternateIn(b, uc.rounds, phases...)
	b.StopTimer()
	stopWatch()
	checkStock(b, insts[0].app, table, cs, uc.products)
	return cs
}

// usecaseStall is how long a use-case run may go without a section
// finishing before its watchdog cancels every section.
const usecaseStall = time.Minute

// usecaseWatchdog returns the parent of the sections' contexts, the counter
// of finished sections to bump, and a function that stops the watchdog
// (also run at the end of b): a goroutine that cancels the parent, with a
// cause that says so, when the counter has not moved for usecaseStall.
func usecaseWatchdog(b *testing.B) (context.Context, *atomic.Int64, func()) {
	parent, cancel := context.WithCancelCause(context.Background())
	finished := new(atomic.Int64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last, since := finished.Load(), time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				if n := finished.Load(); n != last {
					last, since = n, now
				} else if now.Sub(since) >= usecaseStall {
					cancel(fmt.Errorf("stalled: no section finished for %v, all cancelled", usecaseStall))
					return
				}
			}
		}
	})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			cancel(nil)
		})
	}
	b.Cleanup(stop)
	return parent, finished, stop
}

// benchContendersEnv, when set (a comma-separated list of names, e.g.
// "fenced-dotx,forupdate,forupdate-plus1"), runs only those contenders: a
// shorter run when one ratio is under study. The reference contender must
// be among them.
const benchContendersEnv = "NAMEDLOCK_BENCH_CONTENDERS"

// benchVariantEnv, when set to count,duration, adds the contenders
// fenced-dotx-b and serial-dotx-b: fenced-dotx and serial-dotx on Lockers
// with those handoff bounds (WithHandoff), so that other bounds are
// measured against the defaults in one alternating run
// (fenced-dotx-b/fenced-dotx-med, serial-dotx-b/serial-dotx-med).
const benchVariantEnv = "NAMEDLOCK_BENCH_VARIANT"

// benchBatchEnv, when set to count,duration, adds the contenders dobatch-b
// and merger-b: dobatch and merger on Lockers with those group bounds
// (WithBatchLimits), paired with the defaults in one alternating run.
const benchBatchEnv = "NAMEDLOCK_BENCH_BATCH"

// usecaseContenders returns the eight contenders, ten with
// $NAMEDLOCK_BENCH_VARIANT (or those named by $NAMEDLOCK_BENCH_CONTENDERS),
// their product ids apart.
func usecaseContenders(uc useCase, insts []*usecaseInstance) []*contender {
	names := []string{"raw", "do", "dotx", "fenced-dotx", "serial-dotx", "forupdate", "forupdate-plus1", "ceiling", "dobatch", "merger"}
	if os.Getenv(benchVariantEnv) != "" {
		names = append(names, "fenced-dotx-b", "serial-dotx-b")
	}
	if os.Getenv(benchBatchEnv) != "" {
		names = append(names, "dobatch-b", "merger-b")
	}
	only := map[string]bool{}
	if v := os.Getenv(benchContendersEnv); v != "" {
		for _, n := range strings.Split(v, ",") {
			only[strings.TrimSpace(n)] = true
		}
	}
	cs := make([]*contender, 0, len(names))
	for i, n := range names {
		if len(only) > 0 && !only[n] {
			continue
		}
		cs = append(cs, &contender{
			name:  n,
			named: n == "raw" || n == "do" || strings.Contains(n, "dotx") || strings.HasPrefix(n, "dobatch") || strings.HasPrefix(n, "merger"),
			base:  (i + 1) * usecaseIDs,
			per:   make([]atomic.Int64, len(insts)),
		})
	}
	return cs
}

// productsTable creates the products table (id, stock) on db with every
// contender's products at usecaseStock, dropped at the end of tb, and
// returns its name.
func productsTable(tb testing.TB, db *sql.DB, cs []*contender, products int) string {
	tb.Helper()
	name := tableName(tb)
	ctx := testCtx(tb, 30*time.Second)
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+name+" (id INT PRIMARY KEY, stock BIGINT NOT NULL) ENGINE=InnoDB"); err != nil {
		tb.Fatalf("create products table: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name)
	})
	var rows []string
	for _, c := range cs {
		for j := range products {
			rows = append(rows, fmt.Sprintf("(%d, %d)", c.base+j, usecaseStock))
		}
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO "+name+" (id, stock) VALUES "+strings.Join(rows, ", ")); err != nil {
		tb.Fatalf("insert products: %v", err)
	}
	return name
}

// usecaseQ holds the statements of the sections on one products table.
type usecaseQ struct {
	read, readForUpdate, write, decrement string
	// readForUpdatePlus1 is readForUpdate followed, in sellIn, by one more
	// statement while the row is held.
	readForUpdatePlus1 string
}

func usecaseQueries(table string) usecaseQ {
	return usecaseQ{
		read:          "SELECT stock FROM " + table + " WHERE id = ?",
		readForUpdate: "SELECT stock FROM " + table + " WHERE id = ? FOR UPDATE",
		// The same text with a comment: sellIn tells them apart by it.
		readForUpdatePlus1: "SELECT stock FROM " + table + " WHERE id = ? FOR UPDATE /* plus1 */",
		write:              "UPDATE " + table + " SET stock = ? WHERE id = ?",
		decrement:          "UPDATE " + table + " SET stock = stock - 1 WHERE id = ? AND stock > 0",
	}
}

// sellIn reads product id's stock with read and writes stock − 1 in tx.
func (q usecaseQ) sellIn(ctx context.Context, tx *sql.Tx, read string, id int) error {
	var stock int64
	if err := tx.QueryRowContext(ctx, read, id).Scan(&stock); err != nil {
		return fmt.Errorf("read stock of %d: %w", id, err)
	}
	if stock <= 0 {
		return fmt.Errorf("product %d sold out (stock %d)", id, stock)
	}
	if read == q.readForUpdatePlus1 {
		var one int
		if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			return fmt.Errorf("the extra statement: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, q.write, stock-1, id); err != nil {
		return fmt.Errorf("write stock of %d: %w", id, err)
	}
	return nil
}

// sellGroup is the merger's fn: it sells one unit to each request (a
// product id; one key, so one product) with one read and one write, and
// returns the stock each one left.
func (q usecaseQ) sellGroup(ctx context.Context, tx *sql.Tx, _ string, ids []int) ([]int64, error) {
	id := ids[0]
	var stock int64
	if err := tx.QueryRowContext(ctx, q.read, id).Scan(&stock); err != nil {
		return nil, fmt.Errorf("read stock of %d: %w", id, err)
	}
	n := int64(len(ids))
	if stock < n {
		return nil, fmt.Errorf("product %d sold out (stock %d, %d asked)", id, stock, n)
	}
	if _, err := tx.ExecContext(ctx, q.write, stock-n, id); err != nil {
		return nil, fmt.Errorf("write stock of %d: %w", id, err)
	}
	left := make([]int64, len(ids))
	for i := range left {
		left[i] = stock - int64(i) - 1
	}
	return left, nil
}

// sellTx runs sellIn in a transaction of its own on db and commits it.
func (q usecaseQ) sellTx(ctx context.Context, db *sql.DB, read string, id int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := q.sellIn(ctx, tx, read, id); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// seller returns contender name's section on products base+j, whose lock
// keys are keys[j] (the raw sequence locks keyfmt.Portable(keys[j]), the
// name a Locker would use).
func (q usecaseQ) seller(name string, base int, keys []string) func(ctx context.Context, in *usecaseInstance, w, j int) error {
	switch name {
	case "raw":
		names := make([]string, len(keys))
		for j, k := range keys {
			names[j] = keyfmt.Portable(k)
		}
		return func(ctx context.Context, in *usecaseInstance, w, j int) error {
			r, giveBack := in.rawFor(w)
			defer giveBack()
			return r.section(ctx, names[j], func() error {
				return q.sellTx(ctx, in.app, q.read, base+j)
			})
		}
	case "do":
		return func(ctx context.Context, in *usecaseInstance, _, j int) error {
			return in.plain.locker.Do(ctx, keys[j], func(ctx context.Context) error {
				return q.sellTx(ctx, in.app, q.read, base+j)
			})
		}
	case "dotx", "fenced-dotx", "fenced-dotx-b":
		return func(ctx context.Context, in *usecaseInstance, _, j int) error {
			l := in.plain.locker
			switch name {
			case "fenced-dotx":
				l = in.fenced.locker
			case "fenced-dotx-b":
				l = in.variant.locker
			}
			return l.DoTx(ctx, keys[j], in.appx.DB, nil, func(ctx context.Context, tx *sql.Tx) error {
				return q.sellIn(ctx, tx, q.read, base+j)
			})
		}
	case "serial-dotx", "serial-dotx-b":
		serializable := &sql.TxOptions{Isolation: sql.LevelSerializable}
		return func(ctx context.Context, in *usecaseInstance, _, j int) error {
			l := in.serial.locker
			if name == "serial-dotx-b" {
				l = in.variantPlain.locker
			}
			return l.DoTx(ctx, keys[j], in.appx.DB, serializable, func(ctx context.Context, tx *sql.Tx) error {
				return q.sellIn(ctx, tx, q.read, base+j)
			})
		}
	case "dobatch", "dobatch-b":
		return func(ctx context.Context, in *usecaseInstance, _, j int) error {
			l := in.fenced.locker
			if name == "dobatch-b" {
				l = in.batchVariant.locker
			}
			return l.DoBatch(ctx, keys[j], in.app, func(ctx context.Context, tx *sql.Tx) error {
				return q.sellIn(ctx, tx, q.read, base+j)
			})
		}
	case "merger", "merger-b":
		var mergers sync.Map // *usecaseInstance → *namedlock.Merger[int, int64]
		return func(ctx context.Context, in *usecaseInstance, _, j int) error {
			m, ok := mergers.Load(in)
			if !ok {
				l := in.fenced.locker
				if name == "merger-b" {
					l = in.batchVariant.locker
				}
				nm, err := namedlock.NewMerger(l, in.app, q.sellGroup)
				if err != nil {
					return err
				}
				m, _ = mergers.LoadOrStore(in, nm)
			}
			_, err := m.(*namedlock.Merger[int, int64]).Do(ctx, keys[j], base+j)
			return err
		}
	case "forupdate":
		return func(ctx context.Context, in *usecaseInstance, _, j int) error {
			return q.sellTx(ctx, in.app, q.readForUpdate, base+j)
		}
	case "forupdate-plus1":
		return func(ctx context.Context, in *usecaseInstance, _, j int) error {
			return q.sellTx(ctx, in.app, q.readForUpdatePlus1, base+j)
		}
	case "ceiling":
		return func(ctx context.Context, in *usecaseInstance, _, j int) error {
			res, err := in.app.ExecContext(ctx, q.decrement, base+j)
			if err != nil {
				return fmt.Errorf("decrement %d: %w", base+j, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("decrement %d: %w", base+j, err)
			}
			if n != 1 {
				return fmt.Errorf("decrement %d: %d rows changed: sold out", base+j, n)
			}
			return nil
		}
	}
	panic("unknown contender " + name)
}

// checkStock fails b unless every contender's products show exactly as many
// units sold as it had successful sections, and none is below zero.
func checkStock(b *testing.B, db *sql.DB, table string, cs []*contender, products int) {
	b.Helper()
	ctx := testCtx(b, 30*time.Second)
	q := "SELECT COUNT(*), COALESCE(SUM(? - stock), 0), COALESCE(MIN(stock), 0) FROM " + table + " WHERE id BETWEEN ? AND ?"
	for _, c := range cs {
		var rows, sold, least int64
		if err := db.QueryRowContext(ctx, q, usecaseStock, c.base, c.base+products-1).Scan(&rows, &sold, &least); err != nil {
			b.Fatalf("%s: check stock: %v", c.name, err)
		}
		if rows != int64(products) {
			b.Fatalf("%s: %d product rows, want %d", c.name, rows, products)
		}
		if want := c.sold.Load(); sold != want || least < 0 {
			b.Fatalf("%s: %d units sold in the table, %d successful sections, least stock %d: lost updates or oversold", c.name, sold, want, least)
		}
	}
}

// reportPairedMedian reports the median over the rounds of a's rate over
// b's, <a>/<b>-med.
func reportPairedMedian(tb *testing.B, a, b *contender) {
	var ratios []float64
	for i := range min(len(a.phase.rates), len(b.phase.rates)) {
		ratios = append(ratios, a.phase.rates[i]/b.phase.rates[i])
	}
	if len(ratios) > 0 {
		tb.ReportMetric(median(ratios), a.name+"/"+b.name+"-med")
	}
}

// reportUseCase reports each contender's sections per second; its
// throughput relative to ref's over the whole run, <name>/<ref>, and the
// median of the rounds' ratios, <name>/<ref>-med; and with several
// instances, each named-lock contender's smaller share of the sections,
// <name>-min-share-%.
func reportUseCase(b *testing.B, cs []*contender, ref string, instances int) {
	b.Helper()
	var r *contender
	for _, c := range cs {
		if c.name == ref {
			r = c
		}
		b.ReportMetric(c.phase.rate(), c.name+"-sections/s")
		b.ReportMetric(float64(c.percentile(50))/1e6, c.name+"-p50-ms")
		b.ReportMetric(float64(c.percentile(99))/1e6, c.name+"-p99-ms")
	}
	for _, c := range cs {
		if r == nil { // ref left out by $NAMEDLOCK_BENCH_CONTENDERS: no ratios to it
			break
		}
		if c == r {
			continue
		}
		if r.phase.rate() > 0 {
			b.ReportMetric(c.phase.rate()/r.phase.rate(), c.name+"/"+ref)
		}
		reportPairedMedian(b, c, r)
	}
	byName := map[string]*contender{}
	for _, c := range cs {
		byName[c.name] = c
	}
	pairs := [][2]string{{"fenced-dotx-b", "fenced-dotx"}, {"serial-dotx-b", "serial-dotx"}, {"dobatch-b", "dobatch"}, {"merger-b", "merger"}} // a variant, paired
	if ref == "forupdate" {                                                                                                                    // fenced DoTx against a row lock with its statement count
		pairs = append(pairs, [2]string{"fenced-dotx", "forupdate-plus1"})
	}
	for _, p := range pairs {
		if a, b2 := byName[p[0]], byName[p[1]]; a != nil && b2 != nil {
			reportPairedMedian(b, a, b2)
		}
	}
	if instances < 2 {
		return
	}
	for _, c := range cs {
		if !c.named {
			continue
		}
		var total, least int64
		for i := range c.per {
			n := c.per[i].Load()
			total += n
			if i == 0 || n < least {
				least = n
			}
		}
		if total > 0 {
			b.ReportMetric(100*float64(least)/float64(total), c.name+"-min-share-%")
		}
	}
}
