package embedded

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// trackingListener remembers the connections it accepted so that Close can
// cut them, and counts the ones whose serving goroutine has not closed them.
type trackingListener struct {
	net.Listener

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
	// closing is set by closeConns before it cuts the first socket: from
	// then on no connection writes a reply. Otherwise a waiter's GET_LOCK,
	// granted when the holder's socket was cut and its session ended, could
	// still answer 1 before the loop reached the waiter's socket.
	closing atomic.Bool
}

func newTrackingListener(l net.Listener) *trackingListener {
	return &trackingListener{Listener: l, conns: make(map[*trackedConn]struct{})}
}

// Accept wraps the accepted connection so that its Close is seen.
func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

// closeConns closes the sockets of all open connections, without marking them
// done: their serving goroutines do that when they call Close on the way out.
func (l *trackingListener) closeConns() {
	l.closing.Store(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		_ = c.Conn.Close()
	}
}

func (l *trackingListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// wait polls, up to d, until every connection has been closed by its
// goroutine, and returns how many were still open. It starts no goroutine, so
// a stuck connection leaks nothing of ours.
func (l *trackingListener) wait(d time.Duration) int {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		n := l.open()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		<-tick.C
	}
}

func (l *trackingListener) forget(c *trackedConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// trackedConn reports its first Close to its listener. The server calls Close
// as the last step of the goroutine serving the connection.
type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

// Write refuses once the server has begun to cut its connections.
func (c *trackedConn) Write(b []byte) (int, error) {
	if c.l.closing.Load() {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

// Close closes the connection and forgets it, once.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.forget(c) })
	return err
}
