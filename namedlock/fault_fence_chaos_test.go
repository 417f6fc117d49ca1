package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
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

// fenceChaos is what one run of the fencing chaos workload counted.
type fenceChaos struct {
	mode          chaosMode
	calls         int64 // DoTx calls
	returnedNil   int64 // DoTx that returned nil
	zombies       int64 // sections that ignored their cancelled ctx
	kills         int64 // lock sessions KILLed
	committed     int64 // history rows: transactions that committed
	counter       int64 // the counter's final value
	committedErr  int64 // committed transactions whose DoTx returned an error other than ErrCommitUnknown
	unknown       int64 // DoTx that returned ErrCommitUnknown
	nilNotCommit  int64 // DoTx that returned nil without a committed row
	tokensOrdered bool  // committed tokens strictly increase in commit order
	lost          int64 // lost updates: committed - counter
	handoffs      int64 // locks passed on without the server (Stats.Handoffs)
	lostCommits   int64 // committed, their lock then found lost (Stats.LostCommits)
	deadlocks     int64 // DoTx whose transaction the server rolled back (error 1213)
}

// chaosMode is the kind of DoTx a fencing chaos run uses.
type chaosMode int

const (
	chaosFenced       chaosMode = iota // WithFencing, default isolation
	chaosUnfenced                      // no fencing, default isolation (plain)
	chaosSerializable                  // WithSerializableHandoff (early handoff at SERIALIZABLE)
)

func (m chaosMode) String() string {
	return [...]string{"fenced", "unfenced", "serializable"}[m]
}

// TestFaultFencingChaos: 4 Lockers (each with its own lock pool and its own
// application pool) × 8 goroutines run fenced DoTx on one key for 4 s: read
// a counter, pause 1-4 ms, write it back plus one, and log (section, token)
// in a history table, in the same transaction. Every 40 ms the lock
// session of the current holder is KILLed, and 15 % of the sections are
// zombies: they run their statements on context.Background(), ignoring the
// cancelled ctx, and so try to commit after their lock was lost.
//
// In every mode — fenced, plain, serializable handoff — DoTx's result
// means one thing: every DoTx that returned nil has its history row, and
// every DoTx that returned an error (other than ErrCommitUnknown, whose
// COMMIT got no answer) has none, so a caller that retries on error never
// applies a transaction twice. With fencing the database also keeps the
// zombies in line: the final counter equals the number of committed
// transactions, and the committed tokens strictly increase in commit
// order: no lost update. The plain run's lost updates (a lock is not a
// fencing token: a zombie that commits before its loss is found overwrites
// another's write) are printed beside it, to show what fencing prevents,
// and not asserted. The serializable-handoff run must lose no update
// either: the server orders the transactions.
func TestFaultFencingChaos(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	on := runFenceChaos(t, srv, chaosFenced)
	off := runFenceChaos(t, srv, chaosUnfenced)
	ser := fenceChaos{mode: chaosSerializable}
	if serialLocksReads(t, srv) {
		ser = runFenceChaos(t, srv, chaosSerializable)
	}
	t.Logf("%-32s %10s %10s %12s", "4 instances x 8 goroutines, 4 s", "fenced", "unfenced", "serializable")
	for _, row := range []struct {
		what         string
		on, off, ser int64
	}{
		{"DoTx calls", on.calls, off.calls, ser.calls},
		{"lock sessions KILLed", on.kills, off.kills, ser.kills},
		{"zombie sections", on.zombies, off.zombies, ser.zombies},
		{"committed (history rows)", on.committed, off.committed, ser.committed},
		{"final counter", on.counter, off.counter, ser.counter},
		{"lost updates", on.lost, off.lost, ser.lost},
		{"DoTx returned nil", on.returnedNil, off.returnedNil, ser.returnedNil},
		{"committed but reported failed", on.committedErr, off.committedErr, ser.committedErr},
		{"commit outcome unknown", on.unknown, off.unknown, ser.unknown},
		{"reported nil, not committed", on.nilNotCommit, off.nilNotCommit, ser.nilNotCommit},
		{"rolled back by a deadlock (1213)", on.deadlocks, off.deadlocks, ser.deadlocks},
		{"handoffs", on.handoffs, off.handoffs, ser.handoffs},
		{"committed, then found lost", on.lostCommits, off.lostCommits, ser.lostCommits},
	} {
		t.Logf("%-32s %10d %10d %12d", row.what, row.on, row.off, row.ser)
	}
	t.Logf("%-32s %10v %10s %12s", "tokens increase in commit order", on.tokensOrdered, "(no tokens)", "(no tokens)")
	if serialLocksReads(t, srv) {
		if ser.kills == 0 || ser.zombies == 0 || ser.committed == 0 {
			t.Errorf("serializable run: %d kills, %d zombies, %d commits: the chaos did not happen", ser.kills, ser.zombies, ser.committed)
		}
		if ser.lost != 0 || ser.counter != ser.committed {
			t.Errorf("serializable: counter %d, %d committed: %d lost updates", ser.counter, ser.committed, ser.lost)
		}
	}
	for _, r := range []fenceChaos{on, off, ser} {
		if r.nilNotCommit != 0 || r.committedErr != 0 {
			t.Errorf("%v: %d DoTx returned nil without committing, %d returned an error (not ErrCommitUnknown) and committed", r.mode, r.nilNotCommit, r.committedErr)
		}
	}
	if off.kills == 0 || off.zombies == 0 || off.committed == 0 {
		t.Errorf("plain run: %d kills, %d zombies, %d commits: the chaos did not happen", off.kills, off.zombies, off.committed)
	}
	if off.lost > 0 && off.lostCommits == 0 {
		t.Errorf("plain run: %d lost updates, but no commit was reported in Stats.LostCommits", off.lost)
	}

	if on.kills == 0 || on.zombies == 0 || on.committed == 0 {
		t.Fatalf("fenced run: %d kills, %d zombies, %d commits: the chaos did not happen", on.kills, on.zombies, on.committed)
	}
	if on.lost != 0 || on.counter != on.committed {
		t.Errorf("fenced: counter %d, %d committed: %d lost updates", on.counter, on.committed, on.lost)
	}
	if !on.tokensOrdered {
		t.Error("fenced: committed tokens do not strictly increase in commit order")
	}
}

// runFenceChaos runs the workload of TestFaultFencingChaos once.
func runFenceChaos(t *testing.T, srv *testdb.Server, mode chaosMode) fenceChaos {
	const (
		instances = 4
		workers   = 8
		runFor    = 4 * time.Second
		maxRun    = 30 * time.Second
		keepAlive = 100 * time.Millisecond
	)
	fenced := mode == chaosFenced
	var txOpts *sql.TxOptions
	if mode == chaosSerializable {
		txOpts = &sql.TxOptions{Isolation: sql.LevelSerializable}
	}
	res := fenceChaos{mode: mode}
	adm := faultAdmin(t, srv.DSN)
	ctx := testCtx(t, 2*time.Minute)
	base := tableName(t) + "_" + [...]string{"on", "off", "ser"}[mode]
	ctr, hist := base+"_c", base+"_h"
	for _, q := range []string{
		"CREATE TABLE " + ctr + " (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB",
		"INSERT INTO " + ctr + " VALUES (1, 0)",
		"CREATE TABLE " + hist + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, sec BIGINT NOT NULL, token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := adm.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = adm.Exec("DROP TABLE IF EXISTS " + ctr + ", " + hist) })
	table := ""
	if fenced {
		table = base + "_f"
		if err := namedlock.CreateFenceTable(ctx, adm, table); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = adm.Exec("DROP TABLE IF EXISTS " + table) })
	}
	key := keyfmt.Key(base, "counter")

	type inst struct {
		locker *namedlock.Locker
		app    *sqlx.DB
	}
	insts := make([]inst, instances)
	for i := range insts {
		app := testdb.OpenDB(t, srv.DSN)
		app.SetMaxOpenConns(workers + 2)
		opts := []namedlock.Option{namedlock.WithKeepAlive(keepAlive), namedlock.WithCheckTimeout(time.Second)}
		if fenced {
			opts = append(opts, namedlock.WithFencing(app, table))
		}
		if mode == chaosSerializable {
			opts = append(opts, namedlock.WithSerializableHandoff())
		}
		insts[i] = inst{locker: newInstance(t, srv.DSN, opts...).locker, app: sqlx.NewDb(app, "mysql")}
	}

	stop := make(chan struct{})
	var chaos sync.WaitGroup
	var kills atomic.Int64
	chaos.Go(func() {
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			kctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if faultKillHolder(kctx, adm, keyfmt.Portable(key), 25*time.Millisecond) {
				kills.Add(1)
			}
			cancel()
		}
	})

	var (
		seq, calls, zombies atomic.Int64
		deadlocks           atomic.Int64
		mu                  sync.Mutex
		nilSecs             = map[int64]bool{}
		unknownSecs         = map[int64]bool{}
		wg                  sync.WaitGroup
	)
	// The run lasts runFor, and longer (up to maxRun) until a lock session
	// was KILLed and a zombie ran: the run is void otherwise.
	start := time.Now()
	running := func() bool {
		ran := time.Since(start)
		return ran < runFor || ran < maxRun && (kills.Load() == 0 || zombies.Load() == 0)
	}
	for i := range instances {
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
				in := insts[i]
				for running() {
					sec := seq.Add(1)
					zombie := rng.IntN(100) < 15
					pause := time.Duration(1+rng.IntN(4)) * time.Millisecond
					calls.Add(1)
					err := in.locker.DoTx(ctx, key, in.app.DB, txOpts, func(fctx context.Context, tx *sql.Tx) error {
						sctx := fctx
						if zombie {
							zombies.Add(1)
							sctx = context.Background() // ignores the loss
						}
						var v int64
						if err := tx.QueryRowContext(sctx, "SELECT v FROM "+ctr+" WHERE id = 1").Scan(&v); err != nil {
							return err
						}
						time.Sleep(pause)
						if _, err := tx.ExecContext(sctx, "UPDATE "+ctr+" SET v = ? WHERE id = 1", v+1); err != nil {
							return err
						}
						tok, _ := namedlock.TokenFromContext(fctx, key)
						_, err := tx.ExecContext(sctx, "INSERT INTO "+hist+" (sec, token) VALUES (?, ?)", sec, tok)
						return err
					})
					var me *mysql.MySQLError
					if err == nil {
						mu.Lock()
						nilSecs[sec] = true
						mu.Unlock()
					} else if errors.Is(err, namedlock.ErrCommitUnknown) {
						mu.Lock()
						unknownSecs[sec] = true
						mu.Unlock()
					} else if errors.As(err, &me) && me.Number == 1213 {
						deadlocks.Add(1) // the server rolled it back: a conflict it could not order
					} else if !errors.Is(err, namedlock.ErrLockLost) && !errors.Is(err, namedlock.ErrNotAcquired) &&
						!errors.Is(err, context.Canceled) && !errors.Is(err, sql.ErrTxDone) {
						t.Logf("DoTx (%v): %v", mode, err) // other failures, for the record
					}
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	chaos.Wait()

	res.calls, res.zombies, res.kills, res.deadlocks = calls.Load(), zombies.Load(), kills.Load(), deadlocks.Load()
	for _, in := range insts {
		st := in.locker.Stats()
		res.handoffs += st.Handoffs
		res.lostCommits += st.LostCommits
	}
	res.returnedNil, res.unknown = int64(len(nilSecs)), int64(len(unknownSecs))
	if err := adm.QueryRowContext(ctx, "SELECT v FROM "+ctr+" WHERE id = 1").Scan(&res.counter); err != nil {
		t.Fatal(err)
	}
	rows, err := adm.QueryContext(ctx, "SELECT sec, token FROM "+hist+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	res.tokensOrdered = true
	committed := map[int64]bool{}
	var last uint64
	for rows.Next() {
		var sec int64
		var tok uint64
		if err := rows.Scan(&sec, &tok); err != nil {
			t.Fatal(err)
		}
		committed[sec] = true
		res.committed++
		if !nilSecs[sec] && !unknownSecs[sec] {
			res.committedErr++
		}
		if tok <= last {
			res.tokensOrdered = false
		}
		last = tok
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for sec := range nilSecs {
		if !committed[sec] {
			res.nilNotCommit++
		}
	}
	res.lost = res.committed - res.counter
	return res
}
