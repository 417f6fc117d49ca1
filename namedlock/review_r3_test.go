package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// TestReviewR3HeldInsideFn: a caller holding key asks Held(key) in its fn,
// on a lock pool of one connection. Held "takes no lock, waits for none",
// and the Locker knows it holds the key, yet Held borrows an uncounted
// connection of the lock pool, which the caller's own lock pins: it waits
// for its own caller's release, until ctx ends, and returns an error
// instead of true. (With the default 32 connections the same happens as
// soon as 32 keys are held.)
func TestReviewR3HeldInsideFn(t *testing.T) {
	in := newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(1)})
	key := uniqueKey(t, "held-in-fn")
	ctx := testCtx(t, 30*time.Second)
	var held bool
	var herr error
	start := time.Now()
	err := in.locker.Do(ctx, key, func(ctx context.Context) error {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		held, herr = in.locker.Held(hctx, key)
		return nil
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if !held || herr != nil {
		t.Errorf("Held(key) inside the key's own Do = %v, %v after %v; want true, nil", held, herr, time.Since(start).Round(time.Millisecond))
	}
}

// TestReviewR3TryDoFalseNilWhileNobodyHolds: caller A of a Locker is the
// head of key's local queue but cannot reach the server (no connection of
// the lock pool is free: here the one connection is busy with a statement
// of the application's). Nobody holds key at the server. TryDo's doc counts
// the key as held while another caller of this Locker is taking it ("the
// first in line for it, still taking it ... even if it then fails to"):
// caller B's TryDo on the same Locker returns (false, nil) at once, without
// waiting for a connection, though A then gives up. (Documented behaviour:
// TryDo never waits for another caller of this Locker to decide.)
func TestReviewR3TryDoFalseNilWhileNobodyHolds(t *testing.T) {
	in := newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(1)})
	key := uniqueKey(t, "trydo-nobody")
	ctx := testCtx(t, 30*time.Second)

	busy, err := in.db.Conn(ctx) // the pool's only connection, busy elsewhere
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	aErr := make(chan error, 1)
	go func() {
		aErr <- in.locker.Do(actx, key, func(context.Context) error { return nil })
	}()
	// Wait until A is the head of key's queue, waiting for a connection.
	for in.locker.Stats().Waiting != 1 {
		if ctx.Err() != nil {
			t.Fatal("A never started waiting")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)

	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	ran, berr := in.locker.TryDo(bctx, key, func(context.Context) error { return nil })
	took := time.Since(start)
	holder := holderOf(t, admin(t), keyfmt.Portable(key))
	acancel()
	a := <-aErr
	t.Logf("B: TryDo = %v, %v after %v; holder at the server then: %d; A: %v", ran, berr, took.Round(time.Millisecond), holder, a)
	if ran || berr != nil {
		t.Errorf("TryDo while another caller of this Locker is taking the key = %v, %v; want false, nil (documented: the key counts as held)", ran, berr)
	}
	// contract: TryDo answers at once while another caller of its Locker
	// is taking the key (TryDo; TryAcquire): not after the connection wait,
	// which ends only when A is cancelled; 2 s is the generous bound.
	if took > 2*time.Second {
		t.Errorf("TryDo took %v: it waited for the other caller (or a connection) instead of answering at once", took)
	}
	if holder != 0 {
		t.Errorf("the key was held at the server (%d) though the pool's only connection was busy", holder)
	}
	if a == nil {
		t.Errorf("A's Do succeeded without a connection")
	}
}

// TestReviewR3TokenFromContextNested: TokenFromContext's doc answers for
// "the Do ... whose fn received ctx (or a ctx derived from it)". A fn of
// Do(key1) that calls Do(key2) with its ctx passes a ctx derived from the
// one it received; the inner fn's ctx is derived from it too, and key1's
// lock is still held. Yet TokenFromContext(inner ctx, key1) is 0, false:
// the inner call's locks shadow the outer's, and a write fenced on key1's
// token inside the inner section finds no token.
func TestReviewR3TokenFromContextNested(t *testing.T) {
	srv := testdb.RequireReal(t)
	app := testdb.OpenDB(t, srv.DSN)
	in, _ := fenced(t, app)
	key1, key2 := uniqueKey(t, "outer"), uniqueKey(t, "inner")
	ctx := testCtx(t, 30*time.Second)
	var outerTok, innerSeen uint64
	var innerOK bool
	err := in.locker.Do(ctx, key1, func(ctx1 context.Context) error {
		outerTok, _ = namedlock.TokenFromContext(ctx1, key1)
		return in.locker.Do(ctx1, key2, func(ctx2 context.Context) error {
			innerSeen, innerOK = namedlock.TokenFromContext(ctx2, key1)
			return nil
		})
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if outerTok == 0 {
		t.Fatal("no token for the outer key in its own fn")
	}
	if !innerOK || innerSeen != outerTok {
		t.Errorf("TokenFromContext(inner ctx, outer key) = %d, %v; want %d, true (the outer lock is held and ctx derives from the outer fn's)", innerSeen, innerOK, outerTok)
	}
}

// TestReviewR3TryDoAfterOwnCall: one goroutine, alone on key, calls Do (or
// DoBatch), which returns, then TryDo on the same key and Locker. After a
// Do, no caller of this Locker is left on the key: TryDo runs fn every
// time. After a DoBatch, TryDo's doc says the group worker keeps the key
// briefly and then releases it, and the key counts as held meanwhile: TryDo
// may answer (false, nil); but the worker lets go,
// and a TryDo soon after runs fn. (Documented behaviour for DoBatch.)
func TestReviewR3TryDoAfterOwnCall(t *testing.T) {
	srv := testdb.RequireReal(t)
	app := testdb.OpenDB(t, srv.DSN)
	in, _ := fenced(t, app)
	ctx := testCtx(t, 60*time.Second)
	for _, mode := range []string{"Do", "DoBatch"} {
		key := uniqueKey(t, mode)
		skipped, n := 0, 50
		for i := 0; i < n; i++ {
			var err error
			if mode == "Do" {
				err = in.locker.Do(ctx, key, func(context.Context) error { return nil })
			} else {
				err = in.locker.DoBatch(ctx, key, app, func(context.Context, *sql.Tx) error { return nil })
			}
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				ran, err := in.locker.TryDo(ctx, key, func(context.Context) error { return nil })
				if err != nil {
					t.Fatalf("TryDo: %v", err)
				}
				if ran {
					break
				}
				skipped++
				if mode == "Do" {
					t.Fatalf("after Do returned, TryDo by the same (only) caller answered (false, nil)")
				}
				// contract: the group worker lets go of the key soon
				// after DoBatch returns; 10 s only ends a wait for one
				// that never does.
				if time.Now().After(deadline) {
					t.Fatalf("after DoBatch returned, TryDo answered (false, nil) for 10 s: the group worker never let go")
				}
				time.Sleep(time.Millisecond)
			}
		}
		t.Logf("%s: %d TryDo answers (false, nil) before one ran, over %d rounds", mode, skipped, n)
	}
	if st := in.locker.Stats(); st.Held != 0 {
		t.Errorf("Stats.Held = %d after every call returned", st.Held)
	}
}

// TestReviewR3NewKeepAliveOverflow: New must refuse a keep-alive interval
// plus check timeout not shorter than the lease ("or a vanished holder's
// lock could be granted elsewhere before the holder is told"). A huge
// keep-alive makes the sum overflow to a negative duration, which passes
// the check: New returns a Locker whose holders are never checked, with no
// error.
func TestReviewR3NewKeepAliveOverflow(t *testing.T) {
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/x") // New does no I/O
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, opts := range [][]namedlock.Option{
		{namedlock.WithKeepAlive(math.MaxInt64)},
		{namedlock.WithKeepAlive(math.MaxInt64 / 2), namedlock.WithCheckTimeout(math.MaxInt64/2 + 2)},
	} {
		l, err := namedlock.New(db, opts...)
		if err == nil {
			_ = l.Close()
			t.Errorf("New accepted a keep-alive + check timeout that overflows (longer than any lease)")
		} else if !errors.Is(err, namedlock.ErrInvalidOption) {
			t.Errorf("New: %v, want ErrInvalidOption", err)
		}
	}
}

// TestReviewR3NilLockFromTryAcquire: TryAcquire now answers a held key with
// (nil, nil), and Release on that nil *Lock returns ErrNotHeld, but every
// other method of the nil Lock panics: Done, Err, Token, Key. v0 code that
// checked only err (the held key was an error then) and then watched
// lock.Done() or read lock.Token() compiles unchanged and panics on the
// first held key.
func TestReviewR3NilLockFromTryAcquire(t *testing.T) {
	a := newInstance(t, "")
	b := newInstance(t, "")
	key := uniqueKey(t, "nil-lock")
	_ = mustAcquire(t, a.locker, key)
	ctx := testCtx(t, 10*time.Second)
	k, err := b.locker.TryAcquire(ctx, key)
	if err != nil || k != nil {
		t.Fatalf("TryAcquire of a held key = %v, %v; want nil, nil", k, err)
	}
	for name, call := range map[string]func(){
		"Release": func() { _ = k.Release(ctx) },
		"Err":     func() { _ = k.Err() },
		"Done":    func() { _ = k.Done() },
		"Token":   func() { _ = k.Token() },
		"Key":     func() { _ = k.Key() },
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("(*Lock)(nil).%s panics: %v", name, r)
				}
			}()
			call()
		}()
	}
}
