package namedlock

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestCloseKeepsCheckingWhileItWaitsForCommit: Close waits for the COMMIT
// that a DoTx at SERIALIZABLE handed its lock on ahead of before it
// releases the lock; meanwhile the keep-alive goes on checking the lock's
// session (an idle one would be ended at the server by its lease, and the
// lock granted elsewhere), and a loss it finds is what Close returns.
// Fails on a Close that takes the session out of the keep-alive's sight
// while it waits: no check runs during the wait.
func TestCloseKeepsCheckingWhileItWaitsForCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = time.Second
		l, f := fakeLocker(t, WithHandoff(DefaultMaxHandoffs, time.Minute), WithKeepAlive(every), WithCheckTimeout(every))
		var wg sync.WaitGroup
		gate, aEnded := make(chan struct{}), new(atomic.Bool)
		_, bDone, bErr := reviewChain(t, l, &wg, gate, aEnded, func() error { return nil })
		closed := make(chan error, 1)
		go func() { closed <- l.Close() }()
		synctest.Wait() // Close waits for A's COMMIT
		_, before, _ := f.count()
		time.Sleep(10 * every) // fake time
		if _, after, _ := f.count(); after-before < 5 {
			t.Errorf("%d ownership checks in %v while Close waited for A's COMMIT, want one about every %v", after-before, 10*every, every)
		}
		f.kill(keyName)
		time.Sleep(3 * every)
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) before A's COMMIT", err)
		case <-bDone:
			t.Fatalf("B returned (%v) before A's COMMIT", *bErr)
		default:
		}
		close(gate)
		err := <-closed
		wg.Wait()
		if !errors.Is(err, ErrLockLost) {
			t.Errorf("Close = %v, want the loss (ErrLockLost)", err)
		}
		if !aEnded.Load() {
			t.Error("A's COMMIT had not returned")
		}
	})
}
