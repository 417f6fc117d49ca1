package namedlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
)

// phantomBound is how long after a cancelled Acquire returns a server
// session of ours may still wait for the lock (issue 3: none after 1.5 s).
const phantomBound = 1500 * time.Millisecond

// TestFaultCancelledWaitNoPhantom: when ctx is cancelled while the Locker
// waits in GET_LOCK, the driver only closes its socket and the server would
// keep the session waiting (and could grant it the lock). After Acquire
// returns, no session of ours waits for the lock and none holds it, within
// 1.5 s; the test measures how soon the phantom is gone (polling the process
// list every 10 ms). Also: a wait that reaches its deadline leaves nothing
// (MariaDB answers the timeout itself; on MySQL, whose timeouts are whole
// seconds, a sub-second deadline is a cut wait), and a cancel racing the
// holder's release never leaves the lock held by a session nobody owns.
func TestFaultCancelledWaitNoPhantom(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	requireKillEndsWaits(t)
	adm := faultAdmin(t, srv.DSN)
	a := newInstance(t, srv.DSN)
	b := newInstance(t, srv.DSN)
	base := faultBase(t)

	// waitingSession returns our session waiting for name, once it waits.
	waitingSession := func(t *testing.T, name string) int64 {
		t.Helper()
		var ids []int64
		if _, ok := faultPoll(5*time.Second, func() bool {
			ids = faultWaiters(t, adm, name)
			return len(ids) > 0
		}); !ok || len(ids) != 1 {
			t.Fatalf("sessions waiting for %q: %v, want one", name, ids)
		}
		return ids[0]
	}

	t.Run("cancel", func(t *testing.T) {
		key := base + ":cancel"
		held := faultAcquire(t, a.locker, key, 5*time.Second)
		holder := holderOf(t, adm, key)
		var phantoms []time.Duration
		for i := range 5 {
			before := b.locker.Stats()
			ctx, cancel := context.WithCancel(context.Background())
			var id int64
			var cancelledAt time.Time
			go func() {
				id = waitingSession(t, key)
				time.Sleep(20 * time.Millisecond)
				cancelledAt = time.Now()
				cancel()
			}()
			k, err := b.locker.Acquire(ctx, key)
			returned := time.Now()
			cancel()
			if k != nil || !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Acquire = %v, %v; want ErrNotAcquired and context.Canceled", k, err)
			}
			gone, ok := faultPoll(phantomBound, func() bool {
				return len(faultWaiters(t, adm, key)) == 0 && !faultSessionExists(t, adm, id)
			})
			t.Logf("#%d: Acquire returned %v after cancel; phantom session %d gone %v after Acquire returned",
				i+1, returned.Sub(cancelledAt), id, gone)
			phantoms = append(phantoms, gone)
			if !ok {
				t.Errorf("#%d: session %d still there %v after the cancelled Acquire returned", i+1, id, gone)
			}
			if got := holderOf(t, adm, key); got != holder {
				t.Errorf("#%d: IS_USED_LOCK = %d, want the holder %d", i+1, got, holder)
			}
			if st := b.locker.Stats(); st.CancelledWaits != before.CancelledWaits+1 || st.Waiting != 0 {
				t.Errorf("#%d: Stats = %+v, want CancelledWaits %d, Waiting 0", i+1, st, before.CancelledWaits+1)
			}
			faultInUse(t, b.db, 0, 0)
		}
		if err := faultRelease(held); err != nil {
			t.Fatal(err)
		}
		// 1.5 s after the last cancel, still nobody got it.
		time.Sleep(phantomBound - phantoms[len(phantoms)-1])
		if got := holderOf(t, adm, key); got != 0 {
			t.Errorf("after the holder released, session %d holds %q", got, key)
		}
		t.Logf("phantom cleanup times after a cancelled wait: %v (bound %v)", phantoms, phantomBound)
	})

	// A deadline 300 ms away. MariaDB takes fractional timeouts: the
	// server is told GET_LOCK(name, 0.3) and answers 0 itself at the
	// deadline, so nothing is left waiting and no wait is cancelled. MySQL
	// takes whole seconds only (0.3 would not wait at all): the server is
	// told 1 s, ctx cuts the wait at the deadline and the session is killed,
	// as for any cancelled wait, so it counts as one, and its session is
	// gone within phantomBound.
	t.Run("deadline", func(t *testing.T) {
		key := base + ":deadline"
		held := faultAcquire(t, a.locker, key, 5*time.Second)
		holder := holderOf(t, adm, key)
		before := b.locker.Stats()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		k, err := b.locker.Acquire(ctx, key)
		cancel()
		if k != nil || !errors.Is(err, namedlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire to its deadline = %v, %v; want ErrNotAcquired and DeadlineExceeded", k, err)
		}
		st := b.locker.Stats()
		if srv.Flavor.FractionalTimeouts() {
			t.Logf("%s: the server timed the wait out at the deadline itself", srv.Name)
			if ids := faultWaiters(t, adm, key); len(ids) != 0 {
				t.Errorf("right after the deadline, sessions %v still wait for %q", ids, key)
			}
			if st.CancelledWaits != before.CancelledWaits {
				t.Errorf("a wait that the server timed out counted as cancelled: %+v", st)
			}
		} else {
			gone, ok := faultPoll(phantomBound, func() bool { return len(faultWaiters(t, adm, key)) == 0 })
			t.Logf("%s: whole-second timeouts: the wait was cut at the deadline and its session killed; gone %v after Acquire returned", srv.Name, gone)
			if !ok {
				t.Errorf("sessions %v still wait for %q %v after the deadline", faultWaiters(t, adm, key), key, gone)
			}
			if st.CancelledWaits != before.CancelledWaits+1 {
				t.Errorf("a wait cut at its deadline (the server cannot time 300 ms) counted %d cancelled, want 1: %+v", st.CancelledWaits-before.CancelledWaits, st)
			}
		}
		if got := holderOf(t, adm, key); got != holder {
			t.Errorf("IS_USED_LOCK = %d, want the holder %d", got, holder)
		}
		faultInUse(t, b.db, 0, 0)
		if err := faultRelease(held); err != nil {
			t.Fatal(err)
		}
		// The timed-out wait was not granted the lock the holder gave back.
		time.Sleep(100 * time.Millisecond)
		if got := holderOf(t, adm, key); got != 0 {
			t.Errorf("after the holder released, session %d holds %q", got, key)
		}
	})

	t.Run("cancel races release", func(t *testing.T) {
		key := base + ":race"
		var got, missed int
		var worst time.Duration
		for range 10 {
			held := faultAcquire(t, a.locker, key, 5*time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				waitingSession(t, key)
				var wg sync.WaitGroup
				wg.Go(cancel)
				wg.Go(func() { _ = faultRelease(held) })
				wg.Wait()
			}()
			k, err := b.locker.Acquire(ctx, key)
			cancel()
			if err == nil {
				got++
				if err := faultRelease(k); err != nil {
					t.Errorf("Release of the lock granted as the wait was cancelled: %v", err)
				}
			} else {
				missed++
			}
			d, ok := faultPoll(phantomBound, func() bool {
				return len(faultWaiters(t, adm, key)) == 0 && holderOf(t, adm, key) == 0
			})
			worst = max(worst, d)
			if !ok {
				t.Errorf("%v after Acquire returned (%v): waiters %v, holder %d", d, err, faultWaiters(t, adm, key), holderOf(t, adm, key))
			}
		}
		t.Logf("cancel racing the holder's release: %d granted, %d cancelled; the key was free of waiters and holders within %v", got, missed, worst)
		faultInUse(t, b.db, 0, time.Second)
	})

	if st := b.locker.Stats(); st.Held != 0 || st.Waiting != 0 || st.Queued != 0 {
		t.Errorf("Stats at the end = %+v", st)
	}
}

// TestFaultCancelledWaitBurst: 1,000 acquisitions at once from one Locker,
// each with a short ctx (half with a deadline, half cancelled), on keys that
// another instance holds (250 callers on 4 hot keys, 250 on 16 others), on
// one free key shared by 250 callers, and on 250 distinct free keys: they wait in the local queue, for one of the 32 pool connections, or
// at the server, and most give up. Afterwards the pool and the server are
// clean: no connection in use, no session of ours waiting 1.5 s later, the
// other instance still holds its locks, every name is free once it lets go,
// and Stats adds up.
func TestFaultCancelledWaitBurst(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	const n = 1000
	adm := faultAdmin(t, srv.DSN)
	h := newInstance(t, srv.DSN)
	b := newInstance(t, srv.DSN)
	base := faultBase(t)

	hot := make([]string, 4)   // 250 callers on 4 held keys
	warm := make([]string, 16) // 250 callers on 16 held keys
	for i := range hot {
		hot[i] = fmt.Sprintf("%s:h%d", base, i)
	}
	for i := range warm {
		warm[i] = fmt.Sprintf("%s:w%d", base, i)
	}
	shared := base + ":shared" // 250 callers on one free key
	heldKeys := append(slices.Clone(hot), warm...)
	holders := make(map[string]int64)
	hLocks := make([]*namedlock.Lock, 0, len(heldKeys))
	for _, k := range heldKeys {
		hLocks = append(hLocks, faultAcquire(t, h.locker, k, 5*time.Second))
		holders[k] = holderOf(t, adm, k)
	}

	keyOf := func(i int) string {
		switch i % 4 {
		case 0:
			return hot[(i/4)%len(hot)]
		case 1:
			return warm[(i/4)%len(warm)]
		case 2:
			return shared
		}
		return fmt.Sprintf("%s:d%d", base, i) // distinct, free
	}
	type outcome struct {
		key string
		err error
	}
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			d := time.Duration(5+rng.IntN(146)) * time.Millisecond
			var ctx context.Context
			var cancel context.CancelFunc
			if i%2 == 0 {
				ctx, cancel = context.WithTimeout(context.Background(), d)
			} else {
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(d, cancel)
			}
			defer cancel()
			<-start
			key := keyOf(i)
			k, err := b.locker.Acquire(ctx, key)
			outcomes[i] = outcome{key, err}
			if err == nil {
				time.Sleep(time.Duration(2+rng.IntN(9)) * time.Millisecond)
				if err := faultRelease(k); err != nil {
					t.Errorf("Release(%q): %v", key, err)
				}
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	ended := time.Now()

	var acquired, notAcquired int
	for i, o := range outcomes {
		switch {
		case o.err == nil:
			acquired++
			if _, isHeld := holders[o.key]; isHeld {
				t.Errorf("caller %d acquired %q, which the other instance holds", i, o.key)
			}
		case errors.Is(o.err, namedlock.ErrNotAcquired):
			notAcquired++
		default:
			t.Errorf("caller %d (%q): %v, want nil or ErrNotAcquired", i, o.key, o.err)
		}
	}
	st := b.locker.Stats()
	t.Logf("burst of %d acquisitions in %v: %d acquired, %d not; Stats %+v", n, ended.Sub(began), acquired, notAcquired, st)
	if st.Acquired != int64(acquired) || st.NotAcquired != int64(notAcquired) || st.Acquired+st.NotAcquired != n {
		t.Errorf("Stats Acquired %d + NotAcquired %d, want %d + %d = %d", st.Acquired, st.NotAcquired, acquired, notAcquired, n)
	}
	if st.Held != 0 || st.Waiting != 0 || st.Queued != 0 || st.Acquired != st.ServerAcquisitions+st.Handoffs {
		t.Errorf("Stats = %+v, want Held, Waiting, Queued 0 and Acquired = ServerAcquisitions + Handoffs", st)
	}
	faultInUse(t, b.db, 0, time.Second)
	if open := b.db.Stats().OpenConnections; open > 32 {
		t.Errorf("%d open connections in a pool of 32", open)
	}
	clean, ok := faultPoll(phantomBound+slice(t), func() bool { return len(faultWaiters(t, adm, base)) == 0 })
	t.Logf("no session of ours waiting %v after the last caller returned (%d waits cancelled at the server)", clean, st.CancelledWaits)
	if !ok {
		t.Errorf("sessions %v still wait %v after the burst", faultWaiters(t, adm, base), clean)
	}
	for _, k := range heldKeys {
		if got := holderOf(t, adm, k); got != holders[k] {
			t.Errorf("%q: IS_USED_LOCK = %d, want the other instance's %d", k, got, holders[k])
		}
	}
	for _, k := range hLocks {
		if err := faultRelease(k); err != nil {
			t.Errorf("the other instance's Release(%q): %v", k.Key(), err)
		}
	}
	names := append(slices.Clone(heldKeys), shared)
	for i := 3; i < n; i += 4 {
		names = append(names, keyOf(i))
	}
	for _, name := range names {
		if got := holderOf(t, adm, name); got != 0 {
			t.Errorf("%q is held by session %d after everyone let go", name, got)
		}
	}
}
