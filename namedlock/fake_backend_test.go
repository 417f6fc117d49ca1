package namedlock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// fakeServer is an in-memory backend for the tests of the ordering logic
// (queue, handoff, linger, proof, keep-alive, Close) under testing/synctest:
// named locks held by links, each statement taking rtt of (fake) time. It
// models only what the Locker relies on: one holder per name, a killed
// session loses its lock and fails its statements. The real server's
// semantics are tested against real servers in the other tests.
type fakeServer struct {
	rtt time.Duration
	// holdLimit, when set, is each link's expiry after its take (as on
	// TiDB, where a lock outlives its transaction's max-txn-ttl).
	holdLimit time.Duration

	mu      sync.Mutex
	holders map[string]*fakeLink
	freed   map[string]chan struct{} // closed when the name is freed
	takes   int                      // server acquisitions
	checks  int                      // ownership checks
	stmts   int                      // statements of every kind
	pending int                      // takes and releases in flight
}

func newFakeServer(rtt time.Duration) *fakeServer {
	return &fakeServer{rtt: rtt, holders: map[string]*fakeLink{}, freed: map[string]chan struct{}{}}
}

// fakeLink is a session of fakeServer.
type fakeLink struct {
	f      *fakeServer
	name   string
	id     int64 // its session's id: the number of its take at f
	expiry time.Time
	killed bool // guarded by f.mu
}

func (ln *fakeLink) expires() time.Time { return ln.expiry }

func (ln *fakeLink) sessionID() int64 { return ln.id }

func (f *fakeServer) close() {}

func (f *fakeServer) used(ctx context.Context, key, name string) (bool, error) {
	time.Sleep(f.rtt)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stmts++
	return f.holders[name] != nil, nil
}

func (f *fakeServer) take(callerCtx, ctx context.Context, key, name string, try bool) (link, error) {
	f.mu.Lock()
	f.pending++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.pending--
		f.mu.Unlock()
	}()
	for {
		time.Sleep(f.rtt)
		f.mu.Lock()
		f.stmts++
		if f.holders[name] == nil {
			f.takes++
			ln := &fakeLink{f: f, name: name, id: int64(f.takes)}
			if f.holdLimit > 0 {
				ln.expiry = time.Now().Add(f.holdLimit)
			}
			f.holders[name] = ln
			f.mu.Unlock()
			return ln, nil
		}
		if try {
			f.mu.Unlock()
			return nil, notAcquired(ctx, key, nil)
		}
		ch := f.freed[name]
		if ch == nil {
			ch = make(chan struct{})
			f.freed[name] = ch
		}
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, errCancelledWait{notAcquired(ctx, key, nil)}
		}
	}
}

// freeLocked frees name. f.mu held.
func (f *fakeServer) freeLocked(name string) {
	delete(f.holders, name)
	if ch := f.freed[name]; ch != nil {
		close(ch)
		delete(f.freed, name)
	}
}

// kill ends the session holding name, as an operator's KILL does: the lock
// is freed and the session's statements fail.
func (f *fakeServer) kill(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ln := f.holders[name]; ln != nil {
		ln.killed = true
		f.freeLocked(name)
	}
}

// busy reports whether name is held at the fake server, or a take or a
// release is in flight there.
func (f *fakeServer) busy(name string) (held bool, pending int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holders[name] != nil, f.pending
}

func (f *fakeServer) count() (takes, checks, stmts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.takes, f.checks, f.stmts
}

var errFakeGone = errors.New("fake: invalid connection")

func (ln *fakeLink) owns(ctx context.Context, deadline time.Time) (bool, error) {
	time.Sleep(ln.f.rtt)
	ln.f.mu.Lock()
	defer ln.f.mu.Unlock()
	ln.f.stmts++
	ln.f.checks++
	if ln.killed {
		return false, errFakeGone
	}
	return ln.f.holders[ln.name] == ln, nil
}

func (ln *fakeLink) release(ctx context.Context, deadline time.Time) error {
	ln.f.mu.Lock()
	ln.f.pending++
	ln.f.mu.Unlock()
	time.Sleep(ln.f.rtt)
	ln.f.mu.Lock()
	defer ln.f.mu.Unlock()
	ln.f.pending--
	ln.f.stmts++
	if ln.killed {
		return lost(connClosed, errFakeGone)
	}
	if ln.f.holders[ln.name] != ln {
		return lost("the server says its session no longer held it (RELEASE_LOCK answered NULL)", nil)
	}
	ln.f.freeLocked(ln.name)
	return nil
}

func (ln *fakeLink) discard() {
	ln.f.mu.Lock()
	defer ln.f.mu.Unlock()
	if ln.f.holders[ln.name] == ln {
		ln.f.freeLocked(ln.name)
	}
	ln.killed = true
}
