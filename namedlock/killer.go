package namedlock

import (
	"context"
	"database/sql"
	"strconv"
	"sync"
	"time"

	"github.com/namedlock/mysql/internal/lockconn"
)

// killTimeout bounds one KILL on the control connection.
const killTimeout = 2 * time.Second

// killer ends the server sessions of cancelled waits. When ctx ends during
// GET_LOCK the driver only closes its socket; the server keeps the session
// waiting (and may even grant it the lock) until it notices. The killer runs
// KILL CONNECTION for such sessions from a goroutine of its own, started at
// the first kill and stopped by close, on a control connection opened
// outside the bounded lock pool when the pool came from pool.Open, so the
// caller never waits for it and it never competes with lock waiters for a
// pool connection.
type killer struct {
	db *sql.DB // the lock pool

	mu     sync.Mutex
	ids    []int64
	closed bool
	wake   chan struct{} // non-nil once the goroutine runs
	stop   context.CancelFunc
	done   chan struct{} // closed when the goroutine returns
}

// kill queues a KILL for session id. It never blocks.
func (k *killer) kill(id int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.ids = append(k.ids, id)
	if k.wake == nil {
		ctrl, own := k.db, false
		if c := lockconn.Of(k.db); c != nil {
			ctrl, own = sql.OpenDB(c.Control()), true
			ctrl.SetMaxOpenConns(1)
			ctrl.SetMaxIdleConns(1)
			ctrl.SetConnMaxIdleTime(c.IdleTimeout()) // its sessions have the lease too
		}
		ctx, stop := context.WithCancel(context.Background())
		k.wake, k.stop, k.done = make(chan struct{}, 1), stop, make(chan struct{})
		go k.run(ctx, ctrl, own)
	}
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

func (k *killer) run(ctx context.Context, ctrl *sql.DB, own bool) {
	defer close(k.done)
	if own {
		defer ctrl.Close()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.wake:
		}
		for {
			k.mu.Lock()
			ids, closed := k.ids, k.closed
			k.ids = nil
			k.mu.Unlock()
			if len(ids) == 0 {
				if closed {
					return // close waits for the kills queued before it
				}
				break
			}
			for _, id := range ids {
				kctx, cancel := context.WithTimeout(ctx, killTimeout)
				// Error 1094 (unknown thread) means the session already ended.
				_, _ = ctrl.ExecContext(kctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
				cancel()
			}
		}
	}
}

// close runs the kills still queued, within killTimeout in all, then stops
// the killer's goroutine, if it runs, and waits for it. Kills it could not
// run in time are dropped: their connections were discarded, and the
// server ends those sessions when it notices.
func (k *killer) close() {
	k.mu.Lock()
	k.closed = true
	stop, wake, done := k.stop, k.wake, k.done
	k.mu.Unlock()
	if stop == nil {
		return
	}
	select {
	case wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(killTimeout)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
	stop()
	<-done
}
