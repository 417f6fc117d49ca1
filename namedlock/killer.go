package namedlock

import (
	"context"
	"database/sql"
	"strconv"
	"sync"
	"time"

	"github.com/namedlock/mysql/pool"
)

// killTimeout bounds one KILL on the control connection.
const killTimeout = 2 * time.Second

// killer ends the server sessions of cancelled waits. When ctx ends during
// GET_LOCK the driver only closes its socket; the server keeps the session
// waiting (and may even grant it the lock) until it notices. The killer runs
// KILL CONNECTION for such sessions from a goroutine of the Locker, on a
// control connection opened outside the bounded lock pool when the pool came
// from pool.Open, so the caller never waits for it and it never competes with
// lock waiters for a pool connection.
type killer struct {
	l       *Locker
	mu      sync.Mutex
	ids     []int64
	wake    chan struct{}
	started bool
	ctrl    *sql.DB // control pool; nil until the first kill
	own     bool    // ctrl was opened here and must be closed
}

// kill queues a KILL for session id. It never blocks.
func (k *killer) kill(id int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ids = append(k.ids, id)
	if !k.started {
		k.l.mu.Lock()
		closed := k.l.closed
		if !closed {
			k.l.wg.Add(1)
		}
		k.l.mu.Unlock()
		if closed {
			k.ids = nil
			return
		}
		k.started = true
		k.wake = make(chan struct{}, 1)
		k.ctrl = k.l.db
		if c := pool.ControlConnector(k.l.db); c != nil {
			k.ctrl, k.own = sql.OpenDB(c), true
			k.ctrl.SetMaxOpenConns(1)
			k.ctrl.SetMaxIdleConns(1)
		}
		go k.run(k.wake)
	}
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

func (k *killer) run(wake chan struct{}) {
	defer k.l.wg.Done()
	for {
		select {
		case <-k.l.stop:
			return
		case <-wake:
		}
		for {
			k.mu.Lock()
			ids := k.ids
			k.ids = nil
			k.mu.Unlock()
			if len(ids) == 0 {
				break
			}
			for _, id := range ids {
				ctx, cancel := context.WithTimeout(k.l.bg, killTimeout)
				// Error 1094 (unknown thread) means the session already ended.
				_, _ = k.ctrl.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
				cancel()
			}
		}
	}
}

// close closes the control pool once the killer goroutine has stopped.
func (k *killer) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.own && k.ctrl != nil {
		_ = k.ctrl.Close()
		k.ctrl = nil
	}
}
