package namedlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestConnBudget: units are granted up to the limit; a waiter for two
// does not hold up a later one for one that fits; a waiter whose ctx ends
// takes nothing, and one granted as its ctx ends gives its units back; no
// limit grants everything.
func TestConnBudget(t *testing.T) {
	var b connBudget
	ctx := context.Background()
	three := func() int { return 3 }
	if err := b.take(ctx, 2, three); err != nil || b.used != 2 {
		t.Fatalf("take 2 of 3: %v, used %d", err, b.used)
	}
	two := make(chan error, 1)
	go func() { two <- b.take(ctx, 2, three) }()
	for !b.waiting(1) {
		time.Sleep(time.Millisecond)
	}
	if err := b.take(ctx, 1, three); err != nil || b.used != 3 {
		t.Fatalf("take 1 behind a waiter for 2 that does not fit: %v, used %d", err, b.used)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.take(short, 1, three); !errors.Is(err, context.DeadlineExceeded) || b.used != 3 {
		t.Fatalf("take 1 of a full budget, ctx ending: %v, used %d", err, b.used)
	}
	b.give(1)
	select {
	case err := <-two:
		t.Fatalf("the waiter for 2 got them with one free: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	b.give(1)
	if err := <-two; err != nil || b.used != 3 {
		t.Fatalf("the waiter for 2: %v, used %d", err, b.used)
	}
	b.give(3)
	if b.used != 0 || len(b.waiters) != 0 {
		t.Fatalf("used %d, %d waiters; want none", b.used, len(b.waiters))
	}
	if err := b.take(ctx, 100, func() int { return 0 }); err != nil {
		t.Fatalf("take without a limit: %v", err)
	}
	b.give(100)
	var nilBudget *connBudget
	nilBudget.give(1) // no budget: nothing to give back
}

// waiting reports whether n callers wait.
func (b *connBudget) waiting(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters) == n
}
