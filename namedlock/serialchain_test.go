package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// chainHolder is a holder that comes after a chain of early handoffs
// (DoTx at SERIALIZABLE): it takes the key's lock its own way, reads the
// counter row and writes it back plus one under the lock, and reports what
// it read.
type chainHolder struct {
	name string
	// run takes key on l (or on other, another instance), calls got,
	// increments row 1 of table through app, and returns the value it
	// read.
	run func(ctx context.Context, l, other *namedlock.Locker, app *sql.DB, table, key string, got func()) (int64, error)
	// atServer: run waits at the server (another instance), not locally.
	atServer bool
	// newcomer: run starts as B's fn returns, not queued behind B before:
	// it finds B's lock held, lingering (a take-over), or gone back to
	// the server.
	newcomer bool
}

// readIncrement reads row 1 of table through q and writes it back plus one.
func readIncrement(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, table string) (int64, error) {
	var v int64
	if err := q.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil {
		return 0, err
	}
	_, err := q.ExecContext(ctx, "UPDATE "+table+" SET v = ? WHERE id = 1", v+1)
	return v, err
}

// chainHolders are the holders that are not ordered by the server after a
// DoTx with the serializable handoff: a Do, a DoTx of the same Locker on
// another pool (whose transaction the chain's do not wait for), an
// Acquire, and a Do of another instance of the same server.
var chainHolders = []chainHolder{
	{name: "Do", run: func(ctx context.Context, l, _ *namedlock.Locker, app *sql.DB, table, key string, got func()) (v int64, err error) {
		err = l.Do(ctx, key, func(ctx context.Context) error {
			got()
			v, err = readIncrement(ctx, app, table)
			return err
		})
		return v, err
	}},
	{name: "DoTx on another pool", run: func(ctx context.Context, l, _ *namedlock.Locker, app *sql.DB, table, key string, got func()) (v int64, err error) {
		err = l.DoTx(ctx, key, app, nil, func(ctx context.Context, tx *sql.Tx) error {
			got()
			v, err = readIncrement(ctx, tx, table)
			return err
		})
		return v, err
	}},
	{name: "Acquire", run: func(ctx context.Context, l, _ *namedlock.Locker, app *sql.DB, table, key string, got func()) (int64, error) {
		k, err := l.Acquire(ctx, key)
		if err != nil {
			return 0, err
		}
		got()
		v, err := readIncrement(ctx, app, table)
		return v, errors.Join(err, k.Release(ctx))
	}},
	{name: "Do arriving as B lets go", newcomer: true, run: func(ctx context.Context, l, _ *namedlock.Locker, app *sql.DB, table, key string, got func()) (v int64, err error) {
		err = l.Do(ctx, key, func(ctx context.Context) error {
			got()
			v, err = readIncrement(ctx, app, table)
			return err
		})
		return v, err
	}},
	{name: "another instance", atServer: true, run: func(ctx context.Context, _, other *namedlock.Locker, app *sql.DB, table, key string, got func()) (v int64, err error) {
		err = other.Do(ctx, key, func(ctx context.Context) error {
			got()
			v, err = readIncrement(ctx, app, table)
			return err
		})
		return v, err
	}},
}

// chainSetup is a Locker whose lock turns are long enough for every round
// to stay local (WithHandoff), another instance, the application's pool
// (whose first COMMIT after arm is held back when gated), and the counter.
type chainSetup struct {
	srv          *testdb.Server
	l, other     *namedlock.Locker
	app          *sql.DB // the pool of the DoTx at SERIALIZABLE
	appConn      *gatedConnector
	plain        *sql.DB // another pool, for the holders after them
	adm          *sql.DB
	table, key   string
	openGate     func() // lets the held-back COMMIT go; also at the end of the test
	armed        *atomic.Bool
	serializable *sql.TxOptions
}

func newChainSetup(t *testing.T) *chainSetup {
	t.Helper()
	srv := requireSerialLocks(t)
	armed := new(atomic.Bool)
	app, g := gatedDBArmed(t, srv.DSN, armed)
	openGate := sync.OnceFunc(func() { close(g.gate) })
	t.Cleanup(openGate) // before the pool closes, which waits for the COMMIT
	plain := testdb.OpenDB(t, srv.DSN)
	table := counterTable(t, sqlx.NewDb(plain, "mysql"), 1)
	return &chainSetup{
		srv:          srv,
		l:            newInstance(t, srv.DSN, namedlock.WithSerializableHandoff(), namedlock.WithHandoff(namedlock.DefaultMaxHandoffs, time.Minute)).locker,
		other:        newInstance(t, srv.DSN).locker,
		app:          app,
		appConn:      g,
		plain:        plain,
		adm:          testdb.OpenDB(t, srv.DSN),
		table:        table,
		key:          keyfmt.Key(table, 1),
		openGate:     openGate,
		armed:        armed,
		serializable: &sql.TxOptions{Isolation: sql.LevelSerializable},
	}
}

// poll waits until cond holds, for at most 10 s.
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	// contract: the caller's (what); the 10 s only ends a wait for what
	// never comes.
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// round runs one A → B → D chain: A, a DoTx at SERIALIZABLE, increments the
// counter; B, another one on the same pool, queued behind it, does nothing;
// D, queued behind B (or waiting at the server), increments the counter
// its own way. When A hands its lock to B before its COMMIT has returned
// (early), B commits at once and lets go: D must still see A's increment.
// It returns what D read. held: A's COMMIT is held back until D has had
// 300 ms to get the lock (it must not: gotEarly).
func (c *chainSetup) round(t *testing.T, ctx context.Context, d chainHolder, held bool) (read int64, early, gotEarly bool) {
	t.Helper()
	aIn, aGo, bIn := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var aErr, bErr, dErr error
	if held {
		c.armed.Store(true)
	}
	committed := c.appConn.ended.Load() // COMMITs returned before A's
	wg.Go(func() {
		aErr = c.l.DoTx(ctx, c.key, c.app, c.serializable, func(ctx context.Context, tx *sql.Tx) error {
			close(aIn)
			<-aGo
			_, err := tx.ExecContext(ctx, "UPDATE "+c.table+" SET v = v + 1 WHERE id = 1")
			return err
		})
	})
	<-aIn
	wg.Go(func() {
		bErr = c.l.DoTx(ctx, c.key, c.app, c.serializable, func(context.Context, *sql.Tx) error {
			early = c.appConn.ended.Load() == committed // A's COMMIT has not returned
			close(bIn)
			return nil
		})
	})
	poll(t, "B not queued behind A", func() bool { return c.l.Stats().Queued == 1 })
	dGot, dDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(dDone)
		if d.newcomer {
			<-bIn
		}
		read, dErr = d.run(ctx, c.l, c.other, c.plain, c.table, c.key, func() { close(dGot) })
	}()
	switch {
	case d.newcomer:
	case d.atServer:
		poll(t, "D not waiting at the server", func() bool { return waitingAtServer(t, c.adm, keyfmt.Portable(c.key)) })
	default:
		poll(t, "D not queued behind B", func() bool { return c.l.Stats().Queued == 2 })
	}
	close(aGo)
	if held {
		select {
		case <-dGot:
			gotEarly = true
		case <-time.After(300 * time.Millisecond):
		}
		c.openGate()
	}
	wg.Wait()
	<-dDone
	if aErr != nil || bErr != nil || dErr != nil {
		t.Fatalf("A: %v; B: %v; D (%s): %v", aErr, bErr, d.name, dErr)
	}
	return read, early, gotEarly
}

// TestSerializableChainThenOtherHolder: 200 rounds, for each kind of holder
// D that the server does not order after a DoTx at SERIALIZABLE (Do, DoTx
// at REPEATABLE READ, Acquire, a Do of another instance waiting at the
// server), of A → B → D: A increments the counter at SERIALIZABLE and hands
// its lock to B before its COMMIT; B, also at SERIALIZABLE, touches nothing
// and lets go at once; D reads the counter and writes it back plus one. D
// must read every increment committed before it, A's included, and the
// counter end at twice the rounds. Fails on a B that passes the lock on
// before A's COMMIT has returned (the reproduction: 1–9 of 200
// rounds stale on MariaDB, 144 of 200 on MySQL).
func TestSerializableChainThenOtherHolder(t *testing.T) {
	leakCheck(t)
	const rounds = 200
	for _, d := range chainHolders {
		t.Run(d.name, func(t *testing.T) {
			c := newChainSetup(t)
			ctx := testCtx(t, 2*time.Minute)
			stale, early := 0, 0
			start := time.Now()
			for r := range rounds {
				read, e, _ := c.round(t, ctx, d, false)
				if e {
					early++
				}
				if want := int64(2*r + 1); read != want {
					if stale == 0 {
						t.Errorf("round %d: D read %d, want %d (A's increment committed before D got the lock)", r, read, want)
					}
					stale++
				}
			}
			var v int64
			if err := c.plain.QueryRowContext(ctx, "SELECT v FROM "+c.table+" WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			st := c.l.Stats()
			t.Logf("%s: %d rounds in %v, %d handed on before A's COMMIT had returned, %d stale reads, counter %d, %d handoffs, %d server acquisitions", c.srv.Name, rounds, time.Since(start).Round(time.Millisecond), early, stale, v, st.Handoffs, st.ServerAcquisitions)
			if stale > 0 || v != 2*rounds {
				t.Errorf("%d of %d rounds stale; counter %d, want %d", stale, rounds, v, 2*rounds)
			}
			if early == 0 {
				t.Errorf("in none of %d rounds did A hand its lock to B before its COMMIT had returned: the chain was not tested", rounds)
			}
		})
	}
}

// TestSerializableChainHeldBackCommit: the A → B → D chain of
// TestSerializableChainThenOtherHolder with A's COMMIT held back (a driver
// wrapper delays it) for 300 ms after A's fn has returned: D, of each kind,
// does not get the lock meanwhile, and once the COMMIT is let go reads A's
// increment; both increments count. Fails deterministically on a B that
// passes the lock on before A's COMMIT has returned: D reads 0, writes 1
// (its UPDATE waiting for A's row lock), and the counter ends at 1 after
// two increments that returned nil.
func TestSerializableChainHeldBackCommit(t *testing.T) {
	leakCheck(t)
	for _, d := range chainHolders {
		t.Run(d.name, func(t *testing.T) {
			c := newChainSetup(t)
			ctx := testCtx(t, time.Minute)
			read, early, gotEarly := c.round(t, ctx, d, true)
			var v int64
			if err := c.plain.QueryRowContext(ctx, "SELECT v FROM "+c.table+" WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: D read %d, got the lock while A's COMMIT was held back: %v; counter %d", c.srv.Name, read, gotEarly, v)
			if !early {
				t.Error("A did not hand its lock to B before its COMMIT")
			}
			if gotEarly {
				t.Error("D got the lock while A's COMMIT was held back")
			}
			if read != 1 || v != 2 {
				t.Errorf("D read %d, counter %d; want 1 and 2", read, v)
			}
		})
	}
}

// TestSerializableChaosMixed: goroutines of two instances increment one
// counter under one key, each call chosen at random: a DoTx at
// SERIALIZABLE of a Locker WithSerializableHandoff (read and write through
// tx; some write and then fail, some touch nothing, some give up waiting),
// a Do and an Acquire (read and write through the pool, autocommit), a
// DoTx at REPEATABLE READ of the other instance, and a Do of the other
// instance. Every increment that committed counts once: the counter ends
// at the number of committed increments, and the DoTx at SERIALIZABLE
// handed the lock on early. Each DoTx that writes logs its call in a
// history table: every one that returned nil has its row, every one that
// returned an error (a deadlock the server broke included) has none.
func TestSerializableChaosMixed(t *testing.T) {
	leakCheck(t)
	srv := requireSerialLocks(t)
	app := testdb.OpenDB(t, srv.DSN)
	table := counterTable(t, sqlx.NewDb(app, "mysql"), 1)
	hist := historyTable(t, app)
	key := keyfmt.Key(table, 1)
	l := newInstance(t, srv.DSN, namedlock.WithSerializableHandoff(), namedlock.WithHandoff(namedlock.DefaultMaxHandoffs, time.Minute)).locker
	other := newInstance(t, srv.DSN).locker
	ctx := testCtx(t, 2*time.Minute)
	serializable := &sql.TxOptions{Isolation: sql.LevelSerializable}
	errRollback := errors.New("chaos: roll back")
	var committed, seq, deadlocks atomic.Int64
	var mu sync.Mutex
	results := map[string]error{} // DoTx call -> its result
	// dotx runs one DoTx on lk that increments the counter and logs its
	// call in the history table, then fails with fail if not nil; it
	// records the result, counts the increment when it returned nil, and
	// returns the error unless the server rolled the transaction back in
	// a deadlock (counted: the mode's documented cost).
	dotx := func(ctx context.Context, lk *namedlock.Locker, opts *sql.TxOptions, fail error) error {
		sec := "c" + strconv.FormatInt(seq.Add(1), 10)
		err := lk.DoTx(ctx, key, app, opts, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := readIncrement(ctx, tx, table); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+hist+" (sec) VALUES (?)", sec); err != nil {
				return err
			}
			return fail
		})
		mu.Lock()
		results[sec] = err
		mu.Unlock()
		var me *mysql.MySQLError
		switch {
		case err == nil:
			committed.Add(1)
		case errors.As(err, &me) && me.Number == 1213:
			deadlocks.Add(1)
			return nil
		}
		return err
	}
	// autocommitted is the result of a Do or an Acquire whose statements
	// run in autocommit: a deadlock the server broke (1213) rolled its
	// statement back, and is counted, not failed. A DoTx that gave up
	// mid-statement (its ctx ended: the driver closed its connection) has
	// let the lock go while the server may still run that statement, with
	// its row locks, until it sees the connection gone: the next holder can
	// meet those locks, and the server may break the wait as a deadlock.
	// Nothing of the abandoned transaction commits.
	autocommitted := func(err error) error {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1213 {
			deadlocks.Add(1)
			return nil
		}
		return err
	}
	kinds := []func(rng *rand.Rand) error{
		func(*rand.Rand) error { // DoTx at SERIALIZABLE, increments
			return dotx(ctx, l, serializable, nil)
		},
		func(*rand.Rand) error { // DoTx at SERIALIZABLE, touches nothing
			return l.DoTx(ctx, key, app, serializable, func(context.Context, *sql.Tx) error { return nil })
		},
		func(*rand.Rand) error { // DoTx at the default level (run at SERIALIZABLE), writes and rolls back
			if err := dotx(ctx, l, nil, errRollback); !errors.Is(err, errRollback) {
				return err
			}
			return nil
		},
		func(rng *rand.Rand) error { // DoTx at SERIALIZABLE that may give up waiting
			wctx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(3000))*time.Microsecond)
			defer cancel()
			// A statement cut by the deadline may say so before wctx does
			// (a dial's "i/o timeout" at the same instant): the clock tells.
			deadline, _ := wctx.Deadline()
			if err := dotx(wctx, l, serializable, nil); err != nil && wctx.Err() == nil && time.Now().Before(deadline) {
				return err
			}
			// Gave up (waiting, or mid-transaction: rolled back).
			return nil
		},
		func(*rand.Rand) error { // Do, autocommit through the pool
			return autocommitted(l.Do(ctx, key, func(ctx context.Context) error {
				_, err := readIncrement(ctx, app, table)
				if err == nil {
					committed.Add(1)
				}
				return err
			}))
		},
		func(*rand.Rand) error { // Acquire, autocommit through the pool
			k, err := l.Acquire(ctx, key)
			if err != nil {
				return err
			}
			if _, err = readIncrement(ctx, app, table); err == nil {
				committed.Add(1)
			}
			return autocommitted(errors.Join(err, k.Release(ctx)))
		},
		func(*rand.Rand) error { // DoTx at REPEATABLE READ, of the other instance (no serializable handoff)
			return dotx(ctx, other, &sql.TxOptions{Isolation: sql.LevelRepeatableRead}, nil)
		},
		func(*rand.Rand) error { // Do of the other instance
			return autocommitted(other.Do(ctx, key, func(ctx context.Context) error {
				_, err := readIncrement(ctx, app, table)
				if err == nil {
					committed.Add(1)
				}
				return err
			}))
		},
	}
	const workers, each = 8, 60
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 24))
			for range each {
				// Mostly DoTx at SERIALIZABLE, so chains of early handoffs form.
				i := rng.IntN(len(kinds) + 4)
				if i >= len(kinds) {
					i = rng.IntN(2)
				}
				if err := kinds[i](rng); err != nil {
					t.Errorf("kind %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	var v int64
	if err := app.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	// Every DoTx that returned nil has its history row; every one that
	// returned an error (other than ErrCommitUnknown) has none.
	for sec, err := range results {
		checkResult(t, "DoTx "+sec, err, inHistory(t, app, hist, sec))
	}
	st := l.Stats()
	t.Logf("%s: %d calls in %v (%d DoTx that wrote), %d committed increments, counter %d, %d handoffs, %d server acquisitions, %d deadlocks (rolled back)", srv.Name, workers*each, time.Since(start).Round(time.Millisecond), len(results), committed.Load(), v, st.Handoffs, st.ServerAcquisitions, deadlocks.Load())
	if v != committed.Load() {
		t.Errorf("counter %d, %d increments committed: lost or phantom updates", v, committed.Load())
	}
	if st.Handoffs == 0 {
		t.Error("no handoff at all")
	}
}

// TestFencingChainHeldBackCommit: the same chain with fencing, where the
// early handoff comes once A's mint holds the fence row. A, a fenced DoTx,
// increments the counter and its COMMIT is held back; B, the fenced DoTx
// it handed the lock to, waits at its mint for A's fence row until its ctx
// ends, rolls back and lets go; D takes the lock — a Do or an Acquire of
// the same Locker queued behind B, a Do arriving as B lets go, a Do of
// another fenced instance waiting at the server — and must not run before
// A's COMMIT: each mints first, and its mint waits for A's fence row.
func TestFencingChainHeldBackCommit(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	for _, d := range []chainHolder{chainHolders[0], chainHolders[2], chainHolders[3], chainHolders[4]} {
		t.Run(d.name, func(t *testing.T) {
			armed := new(atomic.Bool)
			app, g := gatedDBArmed(t, srv.DSN, armed)
			openGate := sync.OnceFunc(func() { close(g.gate) })
			t.Cleanup(openGate) // before the pool closes, which waits for the COMMIT
			plain := testdb.OpenDB(t, srv.DSN)
			table := counterTable(t, sqlx.NewDb(plain, "mysql"), 1)
			key := keyfmt.Key(table, 1)
			fence := fenceTable(t, plain)
			l := newInstance(t, srv.DSN, namedlock.WithFencing(app, fence), namedlock.WithHandoff(namedlock.DefaultMaxHandoffs, time.Minute)).locker
			other := newInstance(t, srv.DSN, namedlock.WithFencing(app, fence)).locker
			adm := testdb.OpenDB(t, srv.DSN)
			ctx := testCtx(t, time.Minute)

			armed.Store(true)
			aIn, aGo := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			var aErr, bErr, dErr error
			wg.Go(func() {
				aErr = l.DoTx(ctx, key, app, nil, func(ctx context.Context, tx *sql.Tx) error {
					close(aIn)
					<-aGo
					_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
					return err
				})
			})
			<-aIn // A has minted
			bctx, bcancel := context.WithCancel(ctx)
			defer bcancel()
			bIn := make(chan struct{})
			wg.Go(func() {
				defer close(bIn)
				bErr = l.DoTx(bctx, key, app, nil, func(context.Context, *sql.Tx) error {
					t.Error("B's fn ran: its mint did not wait for A's fence row")
					return nil
				})
			})
			poll(t, "B not queued behind A", func() bool { return l.Stats().Queued == 1 })
			var read int64
			dGot, dDone := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(dDone)
				if d.newcomer {
					<-bIn
				}
				read, dErr = d.run(ctx, l, other, plain, table, key, func() { close(dGot) })
			}()
			switch {
			case d.newcomer:
			case d.atServer:
				poll(t, "D not waiting at the server", func() bool { return waitingAtServer(t, adm, keyfmt.Portable(key)) })
			default:
				poll(t, "D not queued behind B", func() bool { return l.Stats().Queued == 2 })
			}
			close(aGo) // A hands on to B (if not done at its mint), writes, and its COMMIT is held back
			poll(t, "A's COMMIT not held back", func() bool { return !armed.Load() })
			time.Sleep(100 * time.Millisecond) // B waits at its mint
			bcancel()
			<-bIn
			gotEarly := false
			select {
			case <-dGot:
				gotEarly = true
			case <-time.After(300 * time.Millisecond):
			}
			openGate()
			wg.Wait()
			<-dDone
			if aErr != nil || dErr != nil {
				t.Fatalf("A: %v; D: %v", aErr, dErr)
			}
			if !errors.Is(bErr, context.Canceled) {
				t.Errorf("B = %v, want its mint ended by its ctx", bErr)
			}
			var v int64
			if err := plain.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: D read %d, got the lock while A's COMMIT was held back: %v; counter %d", srv.Name, read, gotEarly, v)
			if gotEarly {
				t.Error("D got the lock while A's COMMIT was held back")
			}
			if read != 1 || v != 2 {
				t.Errorf("D read %d, counter %d; want 1 and 2", read, v)
			}
		})
	}
}
