package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/namedlock/sqlxlock"
)

// Review r1 (DoTx's one result): each test below is a finding, failing on
// the code it was written against.

// TestReviewR1FnCommitsItself: fn commits the transaction itself
// (tx.Commit(), the natural thing for code moved into a DoTx from a
// function that used to own its transaction) and returns nil. The
// transaction committed, but DoTx's own Commit then returns sql.ErrTxDone,
// which commitRefused reads as "the COMMIT was not applied": DoTx returns
// an error that is not ErrCommitUnknown, i.e. "nothing was committed, run
// it again". A caller that retries on that error applies the transaction
// twice. Nothing in DoTx's doc forbids fn to commit (DoBatch's does, and
// detects it with ErrSectionEndedTx; DoTx does neither). Deterministic, in
// every mode, through DoTx and sqlxlock.DoTx, on MariaDB and MySQL.
func TestReviewR1FnCommitsItself(t *testing.T) {
	srv := testdb.RequireReal(t)
	for _, mode := range txModes {
		for _, via := range []string{"DoTx", "sqlxlock.DoTx"} {
			t.Run(mode.name+"/"+via, func(t *testing.T) {
				skipUnsupportedMode(t, srv, mode)
				app := openPool(t, srv.DSN)
				hist := historyTable(t, app)
				l := newInstance(t, srv.DSN, mode.opts(t, app)...).locker
				key := uniqueKey(t, "fncommit")
				sec := mode.name + "/" + via
				fn := func(ctx context.Context, tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, "INSERT INTO "+hist+" (sec) VALUES (?)", sec); err != nil {
						return err
					}
					return tx.Commit()
				}
				ctx := testCtx(t, 30*time.Second)
				var err error
				if via == "DoTx" {
					err = l.DoTx(ctx, key, app, nil, fn)
				} else {
					err = sqlxlock.DoTx(ctx, l, key, sqlx.NewDb(app, "mysql"), nil, func(ctx context.Context, tx *sqlx.Tx) error {
						return fn(ctx, tx.Tx)
					})
				}
				committed := inHistory(t, app, hist, sec)
				t.Logf("%s: DoTx = %v; committed: %v", srv.Name, err, committed)
				checkResult(t, sec, err, committed)
			})
		}
	}
}

// TestReviewR1FnEndsTxThenFails: fn's statement ends the transaction (a
// COMMIT sent through tx, as a stored procedure or a migration helper
// would; or tx.Commit()), and fn then returns an error. DoTx's doc says
// the transaction "is rolled back when fn returns an error", and DoTx
// returns fn's error, not ErrCommitUnknown: "nothing was committed". The
// rows written before the COMMIT are committed. DoBatch detects a section
// that ended the transaction (ErrSectionEndedTx, "may have been
// committed"); DoTx does not. Deterministic, every mode, MariaDB and MySQL.
func TestReviewR1FnEndsTxThenFails(t *testing.T) {
	srv := testdb.RequireReal(t)
	for _, mode := range txModes {
		// A COMMIT statement sent through tx (the "exec COMMIT" case of the
		// review) is not detectable without a round trip: DoTx's doc names
		// it as misuse whose result DoTx cannot vouch for, so only the
		// detectable tx.Commit case is asserted here.
		for _, how := range []string{"tx.Commit"} {
			t.Run(mode.name+"/"+how, func(t *testing.T) {
				skipUnsupportedMode(t, srv, mode)
				app := openPool(t, srv.DSN)
				hist := historyTable(t, app)
				l := newInstance(t, srv.DSN, mode.opts(t, app)...).locker
				key := uniqueKey(t, "fnends")
				sec := mode.name + "/" + how
				ctx := testCtx(t, 30*time.Second)
				err := l.DoTx(ctx, key, app, nil, func(ctx context.Context, tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, "INSERT INTO "+hist+" (sec) VALUES (?)", sec); err != nil {
						return err
					}
					if how == "tx.Commit" {
						if err := tx.Commit(); err != nil {
							return err
						}
					} else if _, err := tx.ExecContext(ctx, "COMMIT"); err != nil {
						return err
					}
					return errors.New("fn: a later step failed")
				})
				committed := inHistory(t, app, hist, sec)
				t.Logf("%s: DoTx = %v; committed: %v", srv.Name, err, committed)
				checkResult(t, sec, err, committed)
			})
		}
	}
}

// gate is a commit hook that holds the first COMMIT back: at is closed when
// it is reached, go lets it through; later COMMITs pass.
type gate struct {
	once    atomic.Bool
	at      chan struct{}
	proceed chan struct{}
	done    chan struct{} // closed once the held COMMIT returned
}

func newGate() *gate {
	return &gate{at: make(chan struct{}), proceed: make(chan struct{}), done: make(chan struct{})}
}

func (g *gate) hook() *commitHook {
	h := commitHook(func(c *hookConn, commit func() error) error {
		if !g.once.CompareAndSwap(false, true) {
			return commit()
		}
		close(g.at)
		<-g.proceed
		defer close(g.done)
		return commit()
	})
	return &h
}

// TestReviewR1PlainCloseDuringCommit: a plain DoTx sends its COMMIT (held
// back by the application's connection, as a slow commit or fsync would
// be); Close runs meanwhile. Close releases the lock at once
// (toServerLocked waits only for COMMITs of early handoffs), and a third
// party — another instance — acquires the key while the COMMIT is still
// pending, and reads the table without the transaction's row. DoTx's doc
// for the plain mode: "the transaction is committed before the lock is
// released, so the next holder sees its writes"; Close's doc promises the
// wait only for a DoTx at SERIALIZABLE. DoTx then returns nil (it did
// commit) and Stats.LostCommits stays 0 (ErrClosed is not a loss), so the
// overlap is reported nowhere. Deterministic (the COMMIT is gated), MariaDB
// and MySQL. The same holds for a DoTx with WithSerializableHandoff that
// did not hand its lock on early (nobody waited).
func TestReviewR1PlainCloseDuringCommit(t *testing.T) {
	srv := testdb.RequireReal(t)
	for _, mode := range []txMode{txModes[0], txModes[2]} {
		t.Run(mode.name, func(t *testing.T) {
			skipUnsupportedMode(t, srv, mode)
			app, hook := hookDB(t, srv.DSN)
			adm := faultAdmin(t, srv.DSN)
			hist := historyTable(t, adm)
			l := newInstance(t, srv.DSN, mode.opts(t, app)...).locker
			other := newInstance(t, srv.DSN).locker
			key := uniqueKey(t, "closecommit")
			g := newGate()
			hook.Store(g.hook())
			defer hook.Store(nil)
			ctx := testCtx(t, time.Minute)
			res := make(chan error, 1)
			go func() {
				res <- l.DoTx(ctx, key, app, nil, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO "+hist+" (sec) VALUES ('x')")
					return err
				})
			}()
			select {
			case <-g.at:
			// contract: (the premise) the COMMIT is reached; 20 s only ends a wait
			// for one that never is.
			case <-time.After(20 * time.Second):
				t.Fatal("the COMMIT was not reached")
			}
			closed := make(chan error, 1)
			go func() { closed <- l.Close() }()
			actx, cancel := context.WithTimeout(ctx, 3*time.Second)
			k, aerr := other.Acquire(actx, key)
			cancel()
			if aerr == nil {
				var n int
				if err := adm.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+hist).Scan(&n); err != nil {
					t.Fatal(err)
				}
				select {
				case <-g.done:
				default:
					t.Errorf("%s: another instance acquired %q while the DoTx's COMMIT was still pending (Close released the lock before it); the new holder sees %d of the transaction's 1 row", srv.Name, key, n)
				}
				_ = k.Release(ctx)
			} else {
				t.Logf("the other instance did not get the lock while the COMMIT was pending: %v", aerr)
			}
			close(g.proceed)
			err := <-res
			<-closed
			t.Logf("%s: DoTx = %v; committed: %v; LostCommits %d", srv.Name, err, inHistory(t, adm, hist, "x"), l.Stats().LostCommits)
			checkResult(t, mode.name, err, inHistory(t, adm, hist, "x"))
		})
	}
}

// TestReviewR1EarlyHandoffPendingCommitLossUncounted: a DoTx A hands its
// lock on early (WithSerializableHandoff: after fn; WithFencing: after its
// mint) to B, a DoTx of the same kind, and sends its COMMIT (held back by
// its connection). A's handoff proof succeeds; then the lock's session is
// KILLed, B sees the loss, and a third party — another instance — takes
// the lock at the server while A's COMMIT is still pending (at
// SERIALIZABLE it then holds it, the documented exception; fenced, it
// waits at its mint). A's COMMIT then succeeds and DoTx returns nil. A
// committed after its lock was lost during its COMMIT, but
// Stats.LostCommits stays 0 and the observer tells only B's call of the
// loss (Context = B's ctx): A's call, the one that committed, is told
// nothing. Stats' doc: LostCommits counts "DoTx transactions that
// committed and whose lock was found lost during or after their COMMIT
// ... without fencing, the transaction may then have overlapped another
// holder of the key; with fencing, the fence row ordered it"; the serial
// handoff's doc calls this case "as with any plain DoTx that loses its lock
// during its COMMIT", which is counted (TestDoTxResultMeansCommitted's
// "lock killed during commit"). At SERIALIZABLE the overlap is real and
// shown: the third party holds the lock before A's COMMIT lands.
// Deterministic, MariaDB and MySQL, both modes.
func TestReviewR1EarlyHandoffPendingCommitLossUncounted(t *testing.T) {
	srv := requireSerialLocks(t)
	requireKillEndsWaits(t)
	for _, mode := range []txMode{txModes[1], txModes[2]} {
		t.Run(mode.name, func(t *testing.T) { earlyHandoffLoss(t, srv, mode) })
	}
}

func earlyHandoffLoss(t *testing.T, srv *testdb.Server, mode txMode) {
	app, hook := hookDB(t, srv.DSN)
	adm := faultAdmin(t, srv.DSN)
	hist := historyTable(t, adm)
	type ctxKey struct{}
	var mu sync.Mutex
	var events []namedlock.Event
	provedA := make(chan struct{})
	var provedOnce sync.Once
	modeOpts := mode.opts(t, app)
	l := newInstance(t, srv.DSN, append([]namedlock.Option{namedlock.WithHandoff(256, time.Minute),
		namedlock.WithKeepAlive(100 * time.Millisecond), namedlock.WithCheckTimeout(time.Second),
		namedlock.WithObserver(func(e namedlock.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
			if e.Outcome == namedlock.Released && e.Context != nil && e.Context.Value(ctxKey{}) == "A" && e.Err == nil {
				provedOnce.Do(func() { close(provedA) })
			}
		})}, modeOpts...)...).locker
	otherOpts := []namedlock.Option(nil)
	if mode.name == "fenced" {
		otherOpts = modeOpts
	}
	other := newInstance(t, srv.DSN, otherOpts...).locker
	key := uniqueKey(t, "earlyloss")
	name := keyfmt.Portable(key)
	g := newGate()
	defer hook.Store(nil)
	base := testCtx(t, time.Minute)
	ctxA := context.WithValue(base, ctxKey{}, "A")
	ctxB := context.WithValue(base, ctxKey{}, "B")
	resA, resB := make(chan error, 1), make(chan error, 1)
	go func() {
		resA <- l.DoTx(ctxA, key, app, nil, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+hist+" (sec) VALUES ('A')"); err != nil {
				return err
			}
			go func() {
				resB <- l.DoTx(ctxB, key, app, nil, func(ctx context.Context, tx *sql.Tx) error {
					<-ctx.Done() // the loss
					return context.Cause(ctx)
				})
			}()
			for l.Stats().Queued == 0 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // B begins its transaction, first in line
			hook.Store(g.hook())              // the next COMMIT on app is A's
			return nil
		})
	}()
	select {
	case <-g.at:
	// contract: (the premise) A's COMMIT is reached; 20 s only ends a wait
	// for one that never is.
	case <-time.After(20 * time.Second):
		t.Fatalf("A's COMMIT not reached; Stats %+v", l.Stats())
	}
	// contract: A hands its lock on before its COMMIT has returned (the
	// premise of the test); 5 s only ends a wait for a handoff that never
	// comes.
	for deadline := time.Now().Add(5 * time.Second); l.Stats().Handoffs == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("A did not hand its lock on early; Stats %+v", l.Stats())
		}
	}
	select {
	case <-provedA:
	// contract: A's handoff is proven; 20 s only ends a wait for a proof
	// that never comes.
	case <-time.After(20 * time.Second):
		t.Fatal("A's handoff proof not done")
	}
	id, err := faultHolder(base, adm, name)
	if err != nil || id == 0 {
		t.Fatalf("holder of %s: %d %v", name, id, err)
	}
	faultMustKill(t, adm, id)
	got := make(chan *namedlock.Lock, 1)
	go func() {
		k, err := other.Acquire(testCtx(t, 30*time.Second), key)
		if err != nil {
			t.Errorf("the third party's Acquire: %v", err)
		}
		got <- k
	}()
	var k *namedlock.Lock
	select {
	case k = <-got:
		select {
		case <-g.done:
		default:
			t.Logf("%s: the third party holds the lock while A's COMMIT is still pending", mode.name)
		}
	case <-time.After(2 * time.Second):
		t.Logf("%s: the third party did not get the lock while A's COMMIT was pending (fenced: it waits at its mint)", mode.name)
	}
	close(g.proceed)
	errA := <-resA
	if k == nil {
		k = <-got
	}
	if k != nil {
		_ = k.Release(base)
	}
	errB := <-resB
	committedA := inHistory(t, adm, hist, "A")
	st := l.Stats()
	t.Logf("%s %s: A = %v (committed %v); B = %v; Stats.Lost %d LostCommits %d", srv.Name, mode.name, errA, committedA, errB, st.Lost, st.LostCommits)
	checkResult(t, "A", errA, committedA)
	toldA := false
	mu.Lock()
	for _, e := range events {
		if errors.Is(e.Err, namedlock.ErrLockLost) && e.Context != nil && e.Context.Value(ctxKey{}) == "A" {
			toldA = true
		}
	}
	mu.Unlock()
	if errA == nil && st.LostCommits == 0 {
		t.Errorf("A committed after its lock was lost during its COMMIT, but Stats.LostCommits = 0 (observer told A's call of the loss: %v)", toldA)
	}
}

// TestReviewR1IdleTimeoutIsNotUnknown: fn's work keeps the application's
// session idle past its wait_timeout (set to 1 s here; a slow external call
// in fn against a server with a short wait_timeout); MySQL ends the session
// and sends ER_CLIENT_INTERACTION_TIMEOUT (4031) before closing it. DoTx's
// COMMIT then reads that error. commitRefused lists 4031 with the KILL
// errors as "may have committed", so DoTx returns ErrCommitUnknown. But
// 4031 is sent only for a session that sat idle, waiting for its next
// command: the server ended it, rolling the transaction back, before the
// COMMIT arrived; the outcome is known (not committed), and a caller
// that treats ErrCommitUnknown as "reconcile by hand, do not retry" is
// told so for nothing. Deterministic on MySQL 9.7 (MariaDB sends no 4031;
// skipped there).
func TestReviewR1IdleTimeoutIsNotUnknown(t *testing.T) {
	srv := testdb.RequireReal(t)
	for _, mode := range txModes {
		t.Run(mode.name, func(t *testing.T) {
			skipUnsupportedMode(t, srv, mode)
			app := openPool(t, srv.DSN)
			hist := historyTable(t, app)
			l := newInstance(t, srv.DSN, mode.opts(t, app)...).locker
			key := uniqueKey(t, "idle")
			ctx := testCtx(t, 30*time.Second)
			err := l.DoTx(ctx, key, app, nil, func(ctx context.Context, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+hist+" (sec) VALUES ('idle')"); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, "SET SESSION wait_timeout = 1"); err != nil {
					return err
				}
				time.Sleep(2500 * time.Millisecond) // fn's slow non-database work
				return nil
			})
			committed := inHistory(t, app, hist, "idle")
			t.Logf("%s: DoTx = %v; committed: %v", srv.Name, err, committed)
			checkResult(t, mode.name, err, committed)
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != 4031 {
				t.Skipf("%s: the COMMIT did not read error 4031", srv.Name)
			}
			if errors.Is(err, namedlock.ErrCommitUnknown) {
				t.Errorf("DoTx = %v: ErrCommitUnknown, but error 4031 means the server ended the idle session before the COMMIT arrived: not committed", err)
			}
		})
	}
}

var (
	_ = sync.Mutex{}
	_ atomic.Int64
	_ = keyfmt.Portable
	_ = namedlock.ErrLockLost
)
