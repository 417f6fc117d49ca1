package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The order of an early handoff chain (Lock.handOffEarly at SERIALIZABLE)
// against whoever comes after it, on the fake server with fake
// transactions: pure in-process ordering, deterministic under synctest.
// The real servers' side (what the holders read) is in
// serialchain_test.go.

// chainTx is a transaction of serialTx that runs nothing; its Commit waits
// for gate when gate is not nil, and records that it returned.
type chainTx struct {
	gate  chan struct{}
	ended *atomic.Bool // set once Commit or Rollback returned
}

func (t *chainTx) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, nil
}

// QueryRowContext is never called on the serializable path; it is here
// because the fake transactions once stood for fenced ones too, whose mint reads a row.
func (t *chainTx) QueryRowContext(context.Context, string, ...any) *sql.Row {
	panic("chainTx: QueryRowContext")
}

func (t *chainTx) Commit() error {
	if t.gate != nil {
		<-t.gate
	}
	t.ended.Store(true)
	return nil
}

func (t *chainTx) Rollback() error {
	t.ended.Store(true)
	return nil
}

// TestOrderingSerialChainWaitsForCommit: A, a DoTx at SERIALIZABLE, hands
// its lock early to B, the next such DoTx on the same database, and its
// COMMIT is held back. Whatever B does with the lock next — an ordinary
// handoff to a waiting Acquire (as Do, DoMulti and DoTx at another level
// take it), to a DoTx at SERIALIZABLE on another database, a release to
// another instance waiting at the server, a linger a newcomer would take
// over, a give-back after its begin failed, after fn failed or panicked, a
// second early handoff to C and then C's release — the next holder that is
// not ordered by the server gets the lock only once A's COMMIT has
// returned, and B's call returns only then. Close, meanwhile, waits for
// A's COMMIT before it releases the lock at the server. Fails on a release
// that does not wait for the COMMITs handed ahead of.
func TestOrderingSerialChainWaitsForCommit(t *testing.T) {
	type chain struct {
		l, other *Locker
		f        *fakeServer
		db, db2  *sql.DB // identities of two business databases
		gate     chan struct{}
		aEnded   *atomic.Bool
		wg       sync.WaitGroup
	}
	// serial runs a serialTx on db whose begin fails with beginErr (if
	// set), whose fn runs fn, and whose COMMIT waits for gate (if set).
	serial := func(c *chain, ctx context.Context, db *sql.DB, gate chan struct{}, ended *atomic.Bool, beginErr error, fn func() error) error {
		if ended == nil {
			ended = new(atomic.Bool)
		}
		begin := func(context.Context) (*chainTx, error) {
			if beginErr != nil {
				return nil, beginErr
			}
			return &chainTx{gate: gate, ended: ended}, nil
		}
		return serialTx(c.l, ctx, "k", db, begin, func(context.Context, *chainTx) error { return fn() })
	}
	// d is the holder after B: it takes the lock its way and reports
	// whether A's COMMIT had returned when it got it.
	type d struct {
		name string
		// b is B's fn (nil: returns nil); bBegin fails B's begin.
		b      func() error
		bBegin error
		// take takes the lock after B and releases it.
		take func(c *chain, ctx context.Context) error
		// newcomer: take starts once B has let go (or waits to), not
		// queued behind it before.
		newcomer bool
	}
	acquireAfter := func(c *chain, l *Locker, ctx context.Context, got *atomic.Bool) error {
		k, err := l.Acquire(ctx, "k")
		if err != nil {
			return err
		}
		got.Store(c.aEnded.Load())
		return k.Release(ctx)
	}
	var sawCommit atomic.Bool
	for _, tc := range []d{
		{name: "Acquire queued behind B (Do, DoMulti, DoTx at another level)",
			take: func(c *chain, ctx context.Context) error { return acquireAfter(c, c.l, ctx, &sawCommit) }},
		{name: "DoTx at SERIALIZABLE on another database",
			take: func(c *chain, ctx context.Context) error {
				return serial(c, ctx, c.db2, nil, nil, nil, func() error { sawCommit.Store(c.aEnded.Load()); return nil })
			}},
		{name: "another instance at the server",
			take: func(c *chain, ctx context.Context) error { return acquireAfter(c, c.other, ctx, &sawCommit) }},
		{name: "newcomer while B lets go (a linger take-over)", newcomer: true,
			take: func(c *chain, ctx context.Context) error { return acquireAfter(c, c.l, ctx, &sawCommit) }},
		{name: "B's begin failed", bBegin: errors.New("fake: begin failed"),
			take: func(c *chain, ctx context.Context) error { return acquireAfter(c, c.l, ctx, &sawCommit) }},
		{name: "B's fn failed", b: func() error { return errors.New("fake: fn failed") },
			take: func(c *chain, ctx context.Context) error { return acquireAfter(c, c.l, ctx, &sawCommit) }},
		{name: "B's fn panicked", b: func() error { panic("fake: boom") },
			take: func(c *chain, ctx context.Context) error { return acquireAfter(c, c.l, ctx, &sawCommit) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sawCommit.Store(false)
				c := &chain{db: new(sql.DB), db2: new(sql.DB), gate: make(chan struct{}), aEnded: new(atomic.Bool)}
				c.l, c.f = fakeLocker(t, WithHandoff(DefaultMaxHandoffs, time.Minute))
				cfg, _ := newConfig(nil, 30*time.Second)
				c.other = newLocker(c.f, cfg)
				t.Cleanup(func() { _ = c.other.Close() })
				ctx := context.Background()
				aIn, aGo := make(chan struct{}), make(chan struct{})
				c.wg.Go(func() {
					if err := serial(c, ctx, c.db, c.gate, c.aEnded, nil, func() error { close(aIn); <-aGo; return nil }); err != nil {
						t.Errorf("A: %v", err)
					}
				})
				<-aIn
				bDone := make(chan struct{})
				c.wg.Go(func() {
					defer close(bDone)
					defer func() { _ = recover() }()
					b := tc.b
					if b == nil {
						b = func() error { return nil }
					}
					_ = serial(c, ctx, c.db, nil, nil, tc.bBegin, b)
				})
				synctest.Wait() // B waits behind A, its transaction begun
				dDone := make(chan error, 1)
				startD := func() { c.wg.Go(func() { dDone <- tc.take(c, ctx) }) }
				if !tc.newcomer {
					startD()
					synctest.Wait()
				}
				close(aGo) // A hands on to B, and its COMMIT waits for the gate
				synctest.Wait()
				if tc.newcomer {
					// B has let go, or waits to: a caller arriving now
					// would take over a linger.
					startD()
				}
				time.Sleep(10 * time.Second) // fake time: everything that can run, runs
				dErr, dEarly := error(nil), false
				select {
				case dErr = <-dDone:
					dEarly = true
					t.Errorf("the holder after B got the lock and let go (%v) while A's COMMIT had not returned", dErr)
				default:
				}
				select {
				case <-bDone:
					t.Error("B returned while A's COMMIT had not returned")
				default:
				}
				if held, _ := c.f.busy(keyName); !held {
					t.Error("the server lock was let go while A's COMMIT had not returned")
				}
				close(c.gate)
				if !dEarly {
					dErr = <-dDone
				}
				if dErr != nil {
					t.Errorf("the holder after B: %v", dErr)
				}
				c.wg.Wait()
				if !sawCommit.Load() {
					t.Error("the holder after B got the lock before A's COMMIT returned")
				}
				takes, _, _ := c.f.count()
				t.Logf("%d handoffs, %d server grants", c.l.Stats().Handoffs+c.other.Stats().Handoffs, takes)
			})
		})
	}

	// A → B → C, all early; A's COMMIT held back: C's release waits for it
	// too (the COMMITs handed ahead of accumulate along the chain).
	t.Run("chain of three, then Acquire", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sawCommit.Store(false)
			c := &chain{db: new(sql.DB), gate: make(chan struct{}), aEnded: new(atomic.Bool)}
			c.l, c.f = fakeLocker(t, WithHandoff(DefaultMaxHandoffs, time.Minute))
			ctx := context.Background()
			aIn, aGo := make(chan struct{}), make(chan struct{})
			c.wg.Go(func() {
				_ = serial(c, ctx, c.db, c.gate, c.aEnded, nil, func() error { close(aIn); <-aGo; return nil })
			})
			<-aIn
			bIn, bGo := make(chan struct{}), make(chan struct{})
			c.wg.Go(func() {
				_ = serial(c, ctx, c.db, nil, nil, nil, func() error { close(bIn); <-bGo; return nil })
			})
			synctest.Wait()
			close(aGo)
			<-bIn // B holds; A's COMMIT waits
			c.wg.Go(func() { _ = serial(c, ctx, c.db, nil, nil, nil, func() error { return nil }) })
			synctest.Wait()
			dDone := make(chan error, 1)
			c.wg.Go(func() { dDone <- acquireAfter(c, c.l, ctx, &sawCommit) })
			synctest.Wait()
			close(bGo) // B hands on early to C; C commits and lets go
			time.Sleep(10 * time.Second)
			dErr, dEarly := error(nil), false
			select {
			case dErr = <-dDone:
				dEarly = true
				t.Errorf("Acquire after A → B → C got the lock (%v) while A's COMMIT had not returned", dErr)
			default:
			}
			close(c.gate)
			if !dEarly {
				dErr = <-dDone
			}
			if dErr != nil {
				t.Error(dErr)
			}
			c.wg.Wait()
			if !sawCommit.Load() {
				t.Error("Acquire after A → B → C got the lock before A's COMMIT returned")
			}
			if st := c.l.Stats(); st.Handoffs != 3 {
				t.Errorf("Stats.Handoffs = %d, want 3 (two early, one after)", st.Handoffs)
			}
		})
	})

	// Close while B holds and A's COMMIT is held back: Close returns only
	// after the COMMIT, with the server lock released.
	t.Run("Close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := &chain{db: new(sql.DB), gate: make(chan struct{}), aEnded: new(atomic.Bool)}
			c.l, c.f = fakeLocker(t, WithHandoff(DefaultMaxHandoffs, time.Minute))
			ctx := context.Background()
			aIn, aGo := make(chan struct{}), make(chan struct{})
			c.wg.Go(func() {
				_ = serial(c, ctx, c.db, c.gate, c.aEnded, nil, func() error { close(aIn); <-aGo; return nil })
			})
			<-aIn
			bIn := make(chan struct{})
			c.wg.Go(func() {
				_ = serial(c, ctx, c.db, nil, nil, nil, func() error { close(bIn); return nil })
			})
			synctest.Wait()
			close(aGo)
			<-bIn
			closed := make(chan error, 1)
			go func() { closed <- c.l.Close() }()
			time.Sleep(10 * time.Second)
			var cErr error
			returned := false
			select {
			case cErr = <-closed:
				returned = true
				t.Errorf("Close returned (%v) while A's COMMIT had not returned", cErr)
			default:
			}
			if held, _ := c.f.busy(keyName); !held {
				t.Error("Close let the server lock go while A's COMMIT had not returned")
			}
			close(c.gate)
			if !returned {
				cErr = <-closed
			}
			if cErr != nil {
				t.Errorf("Close: %v", cErr)
			}
			if held, pending := c.f.busy(keyName); held || pending != 0 {
				t.Errorf("after Close: held %v, %d statements in flight at the server", held, pending)
			}
			c.wg.Wait()
		})
	})
}

// keyName is the server name of the key "k" of the fake tests.
const keyName = "k"
