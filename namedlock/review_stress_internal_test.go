package namedlock

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
)

// TestReviewDoMultiTwoInstancesStress: two instances (pools of two and
// three connections, two Lockers on the first pool) run DoMulti on random
// sets of two or three of five shared keys, single Do and TryDo, with short
// ctx that end some waits at the server and in the budget. Every call ends
// within its ctx (none hangs past it) and every budget returns to zero.
func TestReviewDoMultiTwoInstancesStress(t *testing.T) {
	t.Run("pool.Open", func(t *testing.T) {
		db1, _ := reviewPool(t, 3)
		db2, _ := reviewPool(t, 3)
		stress(t, db1, db2)
	})
	// Plain pools: the killer's KILL runs on the lock pool itself.
	t.Run("plain", func(t *testing.T) {
		srv := testdb.RequireReal(t)
		db1, db2 := testdb.OpenDB(t, srv.DSN), testdb.OpenDB(t, srv.DSN)
		db1.SetMaxOpenConns(3)
		db2.SetMaxOpenConns(3)
		stress(t, db1, db2)
	})
}

func stress(t *testing.T, db1, db2 *sql.DB) {
	var lockers []*Locker
	for _, db := range []*sql.DB{db1, db1, db2} {
		l, err := New(db)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lockers = append(lockers, l)
	}
	base := testdb.UniqueName(t)
	keys := make([]string, 5)
	for i := range keys {
		keys[i] = fmt.Sprintf("%sk%d", base, i)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	deadline := time.Now().Add(15 * time.Second)
	for g := range 9 {
		l := lockers[g%3]
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for time.Now().Before(deadline) {
				budget := time.Duration(50+r.IntN(400)) * time.Millisecond
				if g%2 == 0 {
					budget = 30 * time.Second // waits that only a deadlock would make long
				}
				ctx, cancel := context.WithTimeout(context.Background(), budget)
				start := time.Now()
				var err error
				switch r.IntN(3) {
				case 0:
					err = l.Do(ctx, keys[r.IntN(5)], func(context.Context) error { time.Sleep(time.Duration(r.IntN(5)) * time.Millisecond); return nil })
				default:
					perm := r.Perm(5)
					n := 2 + r.IntN(2)
					ks := make([]string, n)
					for i := range n {
						ks[i] = keys[perm[i]]
					}
					err = l.DoMulti(ctx, ks, func(context.Context) error { time.Sleep(time.Duration(r.IntN(5)) * time.Millisecond); return nil })
				}
				cancel()
				// contract: no deadlock: a call with no short deadline
				// ends, its waits only for sections of a few ms; 8 s only
				// catches one that does not.
				if took := time.Since(start); budget == 30*time.Second && took > 8*time.Second {
					t.Errorf("a call with no short deadline took %v: %v", took, err)
				}
				// contract: a call returns once its ctx ends (Acquire);
				// 5 s past it only catches one that does not.
				if over := time.Since(start) - budget; over > 5*time.Second {
					t.Errorf("a call returned %v past its ctx: %v", over, err)
				}
				mu.Lock()
				if err == nil {
					counts["ok"]++
				} else {
					counts["err"]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("calls: %v", counts)
	for i, l := range lockers {
		wantBudgetZero(t, l, fmt.Sprintf("the stress (locker %d)", i))
	}
}
