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
// of the application's). Nobody holds key, anywhere. Caller B's TryDo on
// the same Locker returns (false, nil) at once — "held by another caller
// of this Locker" — so B skips its work as if someone were doing it; then A
// gives up with an error, and the work is done by nobody. B alone would have
// waited for a connection and returned an error (false, err), as TryDo's
// doc says for "the pool".
func TestReviewR3TryDoFalseNilWhileNobodyHolds(t *testing.T) {
	in := newInstanceWithPool(t, []pool.Option{pool.WithMaxConns(1)})
	key := uniqueKey(t, "trydo-nobody")
	ctx := testCtx(t, 30*time.Second)

	busy, err := in.db.Conn(ctx) // the pool's only connection, busy elsewhere
	if err != nil {
		t.Fatal(err)
	}
	aErr := make(chan error, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		aErr <- in.locker.Do(actx, key, func(context.Context) error { return nil })
	}()
	time.Sleep(300 * time.Millisecond) // A is the head of key's queue, waiting for a connection

	bctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	ran, berr := in.locker.TryDo(bctx, key, func(context.Context) error { return nil })
	holder := holderOf(t, admin(t), keyfmt.Portable(key))
	a := <-aErr
	_ = busy.Close()
	t.Logf("B: TryDo = %v, %v; holder at the server then: %d; A: %v", ran, berr, holder, a)
	if !ran && berr == nil && holder == 0 && a != nil {
		t.Errorf("TryDo said the key was held (false, nil) while nobody held it, and the caller it deferred to failed (%v): the work ran nowhere", a)
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
// DoBatch), which returns, then TryDo on the same key and Locker. Nobody
// holds the key and no other caller exists, yet TryDo may answer (false,
// nil), "held by another caller of this Locker": the Locker's release (or
// the DoBatch group worker's grace and release) is still going on behind
// the returned call. A caller who just finished its own work and tries
// again skips it as if someone else were doing it.
func TestReviewR3TryDoAfterOwnCall(t *testing.T) {
	srv := testdb.RequireReal(t)
	app := testdb.OpenDB(t, srv.DSN)
	in, _ := fenced(t, app)
	ctx := testCtx(t, 60*time.Second)
	for _, mode := range []string{"Do", "DoBatch"} {
		key := uniqueKey(t, mode)
		skipped, n := 0, 100
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
			ran, err := in.locker.TryDo(ctx, key, func(context.Context) error { return nil })
			if err != nil {
				t.Fatalf("TryDo: %v", err)
			}
			if !ran {
				skipped++
			}
		}
		if skipped > 0 {
			t.Errorf("after %s returned, TryDo by the same (only) caller answered (false, nil) %d of %d times", mode, skipped, n)
		}
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
