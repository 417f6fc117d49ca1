package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// fenceLevels are the isolation levels a caller can ask a fenced DoTx
// for (sql.LevelDefault: opts nil), which the fenced DoTx isolation tests
// run at. TiDB refuses READ UNCOMMITTED and SERIALIZABLE unless
// tidb_skip_isolation_level_check is set (fenceLevelDSN sets it).
var fenceLevels = []sql.IsolationLevel{sql.LevelDefault, sql.LevelReadUncommitted, sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable}

// fenceLevelDSN is the test server's DSN for an application pool that can
// begin a transaction at every level of fenceLevels: on TiDB with
// tidb_skip_isolation_level_check=1.
func fenceLevelDSN(srv *testdb.Server) string {
	if srv.Flavor == flavor.TiDB {
		return srv.DSN + paramSep(srv.DSN) + "tidb_skip_isolation_level_check=1"
	}
	return srv.DSN
}

// levelOpts returns the options that ask for level: nil for the default.
func levelOpts(level sql.IsolationLevel) *sql.TxOptions {
	if level == sql.LevelDefault {
		return nil
	}
	return &sql.TxOptions{Isolation: level}
}

// refusesLevel reports whether a fenced DoTx on srv is refused at level:
// on TiDB at every level but the default (run as READ COMMITTED there) and
// READ COMMITTED, since a transaction there that keeps one snapshot takes
// it before its mint waited and can miss a commit made meanwhile.
func refusesLevel(srv *testdb.Server, level sql.IsolationLevel) bool {
	return srv.Flavor == flavor.TiDB && level != sql.LevelDefault && level != sql.LevelReadCommitted
}

// checkRefused runs a fenced DoTx of in on key at level, on app (which
// holds the fence table), and checks that it is refused before anything
// runs: an error matching ErrFencing and ErrInvalidArgument that names the
// level and what to use instead; fn never runs; nothing is acquired,
// waited for or held; no token is minted (the fence table has no row for
// key).
func checkRefused(t *testing.T, srv *testdb.Server, in *instance, app *sqlx.DB, table, key string, level sql.IsolationLevel) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	before := in.locker.Stats()
	err := in.locker.DoTx(ctx, key, app.DB, levelOpts(level), func(context.Context, *sql.Tx) error {
		t.Errorf("%s, %v: fn ran", srv.Name, level)
		return nil
	})
	t.Logf("%s, %v: %v", srv.Name, level, err)
	if !errors.Is(err, namedlock.ErrFencing) || !errors.Is(err, namedlock.ErrInvalidArgument) {
		t.Errorf("DoTx at %v = %v, want ErrFencing and ErrInvalidArgument", level, err)
	} else if msg := err.Error(); !strings.Contains(msg, strings.ToUpper(level.String())) || !strings.Contains(msg, "READ COMMITTED") {
		t.Errorf("DoTx at %v = %q: want it to name the level and say to use READ COMMITTED", level, msg)
	}
	st := in.locker.Stats()
	if st.Acquired != before.Acquired || st.NotAcquired != before.NotAcquired || st.ServerAcquisitions != before.ServerAcquisitions || st.Held != 0 || st.FencedCommits != before.FencedCommits {
		t.Errorf("stats %+v after %+v: a refused DoTx locked, waited or committed", st, before)
	}
	var n int
	if err := app.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+table+"` WHERE name = ?", keyfmt.Portable(key)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("a refused DoTx minted a token: the fence table has %d row(s) for its key", n)
	}
}

// TestFencedDoTxIsolation: one fenced Locker, one key, 8 goroutines × 10
// fenced read-increment-write DoTx, at every isolation level a caller can
// ask for: each one reads what the previous holder committed, although the
// previous one hands it the lock right after its mint, before its COMMIT
// (the next one waits at its own mint). No update is lost: the counter
// equals the number of DoTx that returned nil, and every one did. On TiDB,
// whose transactions read from a snapshot taken at their first statement
// (before the mint waited), this lost 36 of 80 updates at REPEATABLE READ
// when that level ran as asked; there the default level (run as READ
// COMMITTED) and READ COMMITTED run the 80, and every other level is
// refused before anything runs (checkRefused).
func TestFencedDoTxIsolation(t *testing.T) {
	srv := testdb.RequireReal(t)
	leakCheck(t)
	for _, level := range fenceLevels {
		t.Run(strings.ReplaceAll(level.String(), " ", ""), func(t *testing.T) {
			app := testdb.OpenDB(t, fenceLevelDSN(srv))
			appx := sqlx.NewDb(app, "mysql")
			in, table := fenced(t, app)
			key := uniqueKey(t, "iso")
			if refusesLevel(srv, level) {
				checkRefused(t, srv, in, appx, table, key, level)
				return
			}
			counter := counterTable(t, appx, 1)
			ctx := testCtx(t, 180*time.Second)
			var commits atomic.Int64
			var mu sync.Mutex
			var errs []error
			var wg sync.WaitGroup
			start := time.Now()
			for range 8 {
				wg.Go(func() {
					for range 10 {
						err := in.locker.DoTx(ctx, key, appx.DB, levelOpts(level), func(ctx context.Context, tx *sql.Tx) error {
							_, err := readIncrement(ctx, tx, counter)
							return err
						})
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							continue
						}
						commits.Add(1)
					}
				})
			}
			wg.Wait()
			var v int64
			if err := app.QueryRowContext(ctx, "SELECT v FROM "+counter+" WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			st := in.locker.Stats()
			t.Logf("%s, %v: 80 fenced DoTx in %v: %d returned nil, counter %d; %d handoffs, %d server acquisitions",
				srv.Name, level, time.Since(start).Round(time.Millisecond), commits.Load(), v, st.Handoffs, st.ServerAcquisitions)
			if v != commits.Load() {
				t.Errorf("counter %d after %d DoTx that returned nil: %d updates lost", v, commits.Load(), commits.Load()-v)
			}
			if len(errs) > 0 {
				t.Errorf("%d of 80 DoTx failed; the first: %v", len(errs), errs[0])
			}
		})
	}
}

// TestFencedDoTxZombieIsolation: a fenced DoTx of instance A mints its
// token and reads the counter; its lock is then lost (its lock session
// killed) and instance B's fenced DoTx takes the lock and waits at its mint
// for A's fence row. A, a zombie that ignores its cancelled ctx, writes
// what it read plus one and commits. B must read A's commit (1), at every
// isolation level a caller can ask for, and write 2. On TiDB at REPEATABLE
// READ, when that level ran as asked, B read 0; there every level but the
// default (run as READ COMMITTED) and READ COMMITTED is refused before
// anything runs (checkRefused).
func TestFencedDoTxZombieIsolation(t *testing.T) {
	srv := testdb.RequireReal(t)
	leakCheck(t)
	for _, level := range fenceLevels {
		t.Run(strings.ReplaceAll(level.String(), " ", ""), func(t *testing.T) {
			app := testdb.OpenDB(t, fenceLevelDSN(srv))
			appx := sqlx.NewDb(app, "mysql")
			a, table := fenced(t, app)
			key := uniqueKey(t, "zombie")
			if refusesLevel(srv, level) {
				checkRefused(t, srv, a, appx, table, key, level)
				return
			}
			b := newInstance(t, "", namedlock.WithFencing(app, table))
			counter := counterTable(t, appx, 1)
			name := keyfmt.Portable(key)
			ctx := testCtx(t, 60*time.Second)

			read := make(chan struct{})
			write := make(chan struct{})
			aDone := make(chan error, 1)
			go func() {
				aDone <- a.locker.DoTx(ctx, key, appx.DB, levelOpts(level), func(fctx context.Context, tx *sql.Tx) error {
					var v int64
					// A zombie: its statements ignore fn's ctx, which the loss ends.
					if err := tx.QueryRowContext(context.Background(), "SELECT v FROM "+counter+" WHERE id = 1").Scan(&v); err != nil {
						close(read)
						return err
					}
					close(read)
					<-write
					_, err := tx.ExecContext(context.Background(), "UPDATE "+counter+" SET v = ? WHERE id = 1", v+1)
					return err
				})
			}()
			select {
			case <-read:
			case err := <-aDone:
				t.Fatalf("A's DoTx ended before its fn read: %v", err)
			}
			killSession(t, admin(t), holderOf(t, admin(t), name))

			bRead := make(chan int64, 1)
			bDone := make(chan error, 1)
			go func() {
				bDone <- b.locker.DoTx(ctx, key, appx.DB, levelOpts(level), func(ctx context.Context, tx *sql.Tx) error {
					v, err := readIncrement(ctx, tx, counter)
					bRead <- v
					return err
				})
			}()
			// B holds the named lock and waits at its mint, for A's fence row.
			eventually(t, 30*time.Second, "B never waited at its mint", func() bool {
				if b.locker.Stats().Held != 1 {
					return false
				}
				for _, s := range sessions(t, admin(t)) {
					if strings.Contains(s.info, "INSERT INTO `"+table+"`") {
						return true
					}
				}
				return false
			})
			close(write)
			aErr := <-aDone
			bErr := <-bDone
			var got int64 = -1
			select {
			case got = <-bRead:
			default:
			}
			var v int64
			if err := app.QueryRowContext(ctx, "SELECT v FROM "+counter+" WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, %v: the zombie A: %v; B read %d: %v; counter %d", srv.Name, level, aErr, got, bErr, v)
			if aErr != nil {
				t.Errorf("A's DoTx = %v, want nil: its transaction was fenced from its mint on and committed", aErr)
			}
			if bErr != nil {
				t.Errorf("B's DoTx = %v, want nil", bErr)
			}
			if got != 1 || v != 2 {
				t.Errorf("B read %d and the counter is %d: want B to read the zombie's commit (1) and the counter 2", got, v)
			}
		})
	}
}

// TestFencedDoTxTiDBModes: on TiDB, a fenced DoTx refuses a session in
// optimistic transaction mode (tidb_txn_mode='optimistic', set here in the
// application pool's DSN) with ErrFencing before fn runs, since an
// optimistic transaction takes no lock at its mint and would fail at its
// COMMIT behind any other holder; and without
// tidb_skip_isolation_level_check, SERIALIZABLE (which TiDB itself would
// refuse at BEGIN, error 8048) is refused by the fenced DoTx first, as at
// every level but the default and READ COMMITTED.
func TestFencedDoTxTiDBModes(t *testing.T) {
	srv := testdb.Get(t)
	if srv.Flavor != flavor.TiDB {
		t.Skipf("%s: tidb_txn_mode and TiDB's isolation level check exist only on TiDB", srv.Name)
	}
	leakCheck(t)
	ctx := testCtx(t, 30*time.Second)
	fn := func(context.Context, *sql.Tx) error {
		t.Error("fn ran")
		return nil
	}

	app := testdb.OpenDB(t, srv.DSN+paramSep(srv.DSN)+"tidb_txn_mode=%27optimistic%27")
	in, _ := fenced(t, app)
	for _, level := range []sql.IsolationLevel{sql.LevelDefault, sql.LevelReadCommitted} {
		err := in.locker.DoTx(ctx, uniqueKey(t, "opt"), app, levelOpts(level), fn)
		t.Logf("%s, optimistic, %v: %v", srv.Name, level, err)
		if !errors.Is(err, namedlock.ErrFencing) || !strings.Contains(err.Error(), "optimistic") {
			t.Errorf("DoTx in optimistic mode at %v = %v, want ErrFencing saying why", level, err)
		}
	}
	if st := in.locker.Stats(); st.FencedCommits != 0 {
		t.Errorf("stats %+v: a fenced commit in optimistic mode", st)
	}

	plain := testdb.OpenDB(t, srv.DSN)
	in, table := fenced(t, plain)
	checkRefused(t, srv, in, sqlx.NewDb(plain, "mysql"), table, uniqueKey(t, "ser"), sql.LevelSerializable)
}

// TestFencedDoTxFnWriteConflict: a fenced DoTx whose fn returns TiDB's
// write conflict (error 9007, which fn's statements can get at READ
// COMMITTED in pessimistic mode when tidb_rc_read_check_ts is on and a
// read's one retry conflicts again; here fn returns one itself, wrapped,
// after an UPDATE) returns an error that matches ErrWriteConflict and
// still fn's error and the *mysql.MySQLError, with fn's text; the
// transaction is rolled back (the UPDATE is gone) and nothing is counted
// as committed.
func TestFencedDoTxFnWriteConflict(t *testing.T) {
	srv := testdb.RequireReal(t)
	leakCheck(t)
	app := testdb.OpenDB(t, srv.DSN)
	appx := sqlx.NewDb(app, "mysql")
	in, _ := fenced(t, app)
	counter := counterTable(t, appx, 1)
	ctx := testCtx(t, 30*time.Second)
	conflict := &mysql.MySQLError{Number: 9007, Message: "Write conflict, txnStartTS=1, conflictStartTS=2, conflictCommitTS=3, key={tableID=1, handle=1} [try again later]"}
	errFn := errors.New("fn's read")
	err := in.locker.DoTx(ctx, uniqueKey(t, "wc"), appx.DB, nil, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE "+counter+" SET v = 100 WHERE id = 1"); err != nil {
			return err
		}
		return fmt.Errorf("%w: %w", errFn, conflict)
	})
	t.Logf("%s: fn returned a 9007: %v", srv.Name, err)
	var me *mysql.MySQLError
	if !errors.Is(err, namedlock.ErrWriteConflict) || !errors.Is(err, errFn) || !errors.As(err, &me) || me.Number != 9007 {
		t.Errorf("DoTx = %v, want it to match ErrWriteConflict, fn's error and the 9007", err)
	}
	if err != nil && !strings.Contains(err.Error(), "fn's read") {
		t.Errorf("DoTx = %q, want fn's text", err)
	}
	var v int64
	if err := app.QueryRowContext(ctx, "SELECT v FROM "+counter+" WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != 0 {
		t.Errorf("counter %d: fn's UPDATE was committed, want it rolled back", v)
	}
	if st := in.locker.Stats(); st.FencedCommits != 0 || st.Held != 0 {
		t.Errorf("stats %+v: want no fenced commit and nothing held", st)
	}
}
