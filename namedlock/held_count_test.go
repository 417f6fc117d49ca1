package namedlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// TestHeldCountCloseDuringMint: Close while an acquisition, its lock
// already taken at the server, waits in its fencing mint for the fence row
// (held here by another transaction) leaves Stats.Held at 0, not -1, both
// at once and once the mint has ended; and that acquisition reports
// ErrClosed rather than a lock that Close has already taken back.
func TestHeldCountCloseDuringMint(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	app := testdb.OpenDB(t, srv.DSN)
	in, table := fenced(t, app)
	key := uniqueKey(t, "k")
	ctx := testCtx(t, 30*time.Second)
	if err := in.locker.Do(ctx, key, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err) // the fence row exists from now on
	}

	tx, err := app.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var token uint64
	if err := tx.QueryRowContext(ctx, "SELECT token FROM "+table+" WHERE name = ? FOR UPDATE", keyfmt.Portable(key)).Scan(&token); err != nil {
		t.Fatal(err)
	}

	type result struct {
		k   *namedlock.Lock
		err error
	}
	res := make(chan result, 1)
	go func() {
		k, err := in.locker.Acquire(ctx, key)
		res <- result{k, err}
	}()
	adm := admin(t)
	eventually(t, 10*time.Second, "the acquisition to hold the server lock and wait in its mint", func() bool {
		return holderOf(t, adm, keyfmt.Portable(key)) != 0 && in.locker.Stats().Waiting == 1
	})
	_ = in.locker.Close()
	if st := in.locker.Stats(); st.Held != 0 {
		t.Errorf("Stats.Held = %d right after Close, with an acquisition in its mint; want 0", st.Held)
	}
	_ = tx.Rollback() // the mint goes on
	select {
	case r := <-res:
		if r.err == nil || !errors.Is(r.err, namedlock.ErrClosed) {
			t.Errorf("Acquire across Close = %v, %v; want ErrClosed", r.k, r.err)
		}
	// contract: the acquisition across Close ends once the fence row is
	// released; 20 s only ends a wait for one that hangs.
	case <-time.After(20 * time.Second):
		t.Fatal("the acquisition did not end within 20 s of the fence row's release")
	}
	if st := in.locker.Stats(); st.Held != 0 {
		t.Errorf("Stats.Held = %d once the acquisition ended; want 0", st.Held)
	}
}

// TestHeldCountNeverNegative: while callers hand a few keys to each other
// and Close comes in the middle, a sampler never sees Stats.Held below 0
// nor above the number of callers, and it ends at 0. (Between a handoff,
// which installs the next holder, and that holder counting itself, Close
// counted it down first.)
func TestHeldCountNeverNegative(t *testing.T) {
	leakCheck(t)
	in := newInstance(t, "")
	base := uniqueKey(t, "")
	ctx := testCtx(t, 30*time.Second)
	const callers = 12
	var minHeld, maxHeld atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			h := int64(in.locker.Stats().Held)
			if h < minHeld.Load() {
				minHeld.Store(h)
			}
			if h > maxHeld.Load() {
				maxHeld.Store(h)
			}
		}
	})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for r := 0; ; r++ {
				err := in.locker.Do(ctx, fmt.Sprintf("%s%d", base, (i+r)%3), func(context.Context) error { return nil })
				if errors.Is(err, namedlock.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Do: %v", err)
					return
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	_ = in.locker.Close()
	wg.Wait()
	close(stop)
	sampler.Wait()
	if lo, hi := minHeld.Load(), maxHeld.Load(); lo < 0 || hi > callers {
		t.Errorf("Stats.Held ranged over [%d, %d]; want within [0, %d]", lo, hi, callers)
	}
	if st := in.locker.Stats(); st.Held != 0 {
		t.Errorf("Stats.Held = %d after Close, want 0", st.Held)
	}
}
