package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
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

// TestReviewCloseCountWaitLeaseExpires: A, a DoTx at SERIALIZABLE,
// increments the counter and hands its lock early to B; A's COMMIT is held
// back. B lets go and waits for A's COMMIT (its queue, and so the
// keep-alive, still has the session). Close then takes the session over and
// waits for A's COMMIT before its RELEASE_LOCK, as its doc promises ("the
// lock never goes to anyone else before the COMMITs it was handed ahead
// of"). But Close has removed the queue first: the keep-alive no longer
// touches the lock connection, which sits idle. Past the lock pool's lease
// (its wait_timeout) the server ends that session and frees the lock, and
// another instance gets it and reads the counter before A's COMMIT.
func TestReviewCloseCountWaitLeaseExpires(t *testing.T) {
	leakCheck(t)
	srv := requireSerialLocks(t)
	armed := new(atomic.Bool)
	app, g := gatedDBArmed(t, srv.DSN, armed)
	openGate := sync.OnceFunc(func() { close(g.gate) })
	t.Cleanup(openGate)
	plain := testdb.OpenDB(t, srv.DSN)
	table := counterTable(t, sqlx.NewDb(plain, "mysql"), 1)
	key := keyfmt.Key(table, 1)
	const lease = 2 * time.Second
	lockPool := openPool(t, srv.DSN, pool.WithLease(lease))
	l, err := namedlock.New(lockPool, namedlock.WithKeepAlive(300*time.Millisecond), namedlock.WithCheckTimeout(time.Second),
		namedlock.WithHandoff(namedlock.DefaultMaxHandoffs, time.Minute), namedlock.WithSerializableHandoff())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	other := newInstance(t, srv.DSN).locker
	ctx := testCtx(t, time.Minute)
	serializable := &sql.TxOptions{Isolation: sql.LevelSerializable}

	armed.Store(true)
	aIn, aGo := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var aErr, bErr error
	wg.Go(func() {
		aErr = l.DoTx(ctx, key, app, serializable, func(ctx context.Context, tx *sql.Tx) error {
			close(aIn)
			<-aGo
			_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
			return err
		})
	})
	<-aIn
	bRan := make(chan struct{})
	wg.Go(func() {
		bErr = l.DoTx(ctx, key, app, serializable, func(context.Context, *sql.Tx) error {
			close(bRan)
			return nil
		})
	})
	poll(t, "B not queued behind A", func() bool { return l.Stats().Queued == 1 })
	close(aGo)
	<-bRan // A handed its lock on early; its COMMIT is held back
	poll(t, "A's COMMIT not held back", func() bool { return !armed.Load() })

	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	time.Sleep(100 * time.Millisecond) // Close waits for A's COMMIT

	// Another instance waits at the server: it must not get the lock before
	// A's COMMIT has returned.
	var read int64
	dGot := make(chan time.Time, 1)
	dDone := make(chan error, 1)
	start := time.Now()
	go func() {
		dDone <- other.Do(ctx, key, func(ctx context.Context) error {
			dGot <- time.Now()
			var err error
			read, err = readIncrement(ctx, plain, table)
			return err
		})
	}()
	hold := 3*lease + 2*time.Second
	gotEarly := false
	select {
	case at := <-dGot:
		gotEarly = true
		t.Errorf("%s: another instance got the lock %v after it asked, while A's COMMIT was still held back (Close was waiting for it)",
			srv.Name, at.Sub(start).Round(time.Millisecond))
	case <-time.After(hold):
	}
	openGate()
	wg.Wait()
	if err := <-dDone; err != nil {
		t.Fatalf("D: %v", err)
	}
	cerr := <-closed
	var v int64
	if err := plain.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: A: %v; B: %v; Close: %v; D read %d, got the lock early: %v; counter %d", srv.Name, aErr, bErr, cerr, read, gotEarly, v)
	if aErr != nil {
		t.Errorf("A: %v", aErr)
	}
	if bErr != nil && !errors.Is(bErr, namedlock.ErrClosed) {
		t.Errorf("B: %v", bErr)
	}
	if read != 1 || v != 2 {
		t.Errorf("D read %d, counter %d; want 1 and 2 (A's increment committed before D read)", read, v)
	}
}

// TestReviewCloseWaitsForBeginAtHead: a DoTx at SERIALIZABLE first in line
// for a key begins its transaction while it is at the head of the key's
// queue, before it goes to the server, on its own ctx. Close waits until
// every queue is gone (the drained wait), and that queue goes only once the
// BEGIN has returned: Close, which is to fail waiting callers at once, is
// held up by a BEGIN waiting for a connection of the application's pool,
// bounded by nothing Close ends. Here the caller's ctx never ends and the
// pool's only connection is held by the goroutine that calls Close (a
// shutdown inside a transaction): Close never returns until that
// connection is let go.
func TestReviewCloseWaitsForBeginAtHead(t *testing.T) {
	leakCheck(t)
	srv := requireSerialLocks(t)
	app := testdb.OpenDB(t, srv.DSN)
	app.SetMaxOpenConns(1)
	table := counterTable(t, sqlx.NewDb(testdb.OpenDB(t, srv.DSN), "mysql"), 1)
	l := newInstance(t, srv.DSN, namedlock.WithSerializableHandoff()).locker
	ctx := testCtx(t, time.Minute)
	serializable := &sql.TxOptions{Isolation: sql.LevelSerializable}
	// The Locker learns app's server (one look, then remembered).
	if err := l.DoTx(ctx, keyfmt.Key(table, 0), app, serializable, func(context.Context, *sql.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	conn, err := app.Conn(ctx) // the pool's only connection
	if err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(func() { _ = conn.Close() })
	t.Cleanup(release)

	bDone := make(chan error, 1)
	go func() {
		bDone <- l.DoTx(context.Background(), keyfmt.Key(table, 1), app, serializable, func(context.Context, *sql.Tx) error { return nil })
	}()
	poll(t, "B not waiting for a connection of app", func() bool { return app.Stats().WaitCount > 0 && l.Stats().Waiting == 1 })

	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	const bound = 5 * time.Second
	returned := false
	select {
	case err := <-closed:
		returned = true
		t.Logf("%s: Close returned %v with B's BEGIN still waiting", srv.Name, err)
	// contract: Close does not wait for a caller not yet at the server
	// (Locker.Close); bound only ends a wait for a Close that hangs.
	case <-time.After(bound):
		t.Errorf("%s: Close has not returned after %v: it waits for B's BEGIN at the head of its queue, which waits for the app pool's connection (held by Close's own caller)", srv.Name, bound)
	}
	release()
	bErr := <-bDone
	t.Logf("%s: B: %v", srv.Name, bErr)
	if !errors.Is(bErr, namedlock.ErrClosed) {
		t.Errorf("B = %v, want ErrClosed", bErr)
	}
	if !returned {
		<-closed
	}
}
