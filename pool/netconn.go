package pool

import (
	"context"
	"database/sql/driver"
	"net"
	"reflect"
	"runtime"
	"sync"
	"unsafe"
	"weak"

	"github.com/go-sql-driver/mysql"
)

// Pools opened by Open dial their connections themselves (the driver's
// Config.DialFunc, dialing exactly as the driver does by default) and
// remember, for each driver connection, the network connection under it, so
// that [NetConn] can hand it to namedlock. Bounding a statement by a deadline
// on the socket, rather than by a context with a timeout, spares the driver
// the goroutine handshake it runs for every statement whose context can be
// cancelled (go-sql-driver/mysql hands such a context to a per-connection
// watcher goroutine: two goroutine wake-ups per statement).

// dialedKey is the context key under which connector.Connect hands dial the
// place to record the connection it dials.
type dialedKey struct{}

// dialed receives the network connection dialed for one Connect call.
type dialed struct{ conn net.Conn }

// dial is the lock pool's dial function: a [net.Dialer], as the driver uses
// when no dial function is registered for the network, that also records
// the connection for the Connect call whose ctx carries a *dialed.
func dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if h, ok := ctx.Value(dialedKey{}).(*dialed); ok {
		h.conn = c
	}
	return c, nil
}

// tracksNetConns reports whether Open dials cfg's connections itself (and
// installs dial): only for the networks the driver dials with a plain
// net.Dialer, when no dial function is set, and when the DSN sets no
// writeTimeout (the driver then sets write deadlines on the connection
// itself, which would override a caller's deadline).
func tracksNetConns(cfg *mysql.Config) bool {
	if cfg.DialFunc != nil || cfg.WriteTimeout > 0 {
		return false
	}
	switch cfg.Net {
	case "tcp", "tcp4", "tcp6", "unix":
		return true
	}
	return false
}

// connector wraps the driver's connector of a pool opened by Open: each
// connection it makes is registered with the network connection dial made
// for it. The driver connection itself is returned as is.
type connector struct {
	driver.Connector
}

// Connect makes a driver connection and registers its network connection.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	h := new(dialed)
	dc, err := c.Connector.Connect(context.WithValue(ctx, dialedKey{}, h))
	if err != nil {
		return nil, err
	}
	if h.conn != nil {
		track(dc, h.conn)
	}
	return dc, nil
}

// netConns maps driver connections (by address) to their network
// connections. An entry holds its driver connection weakly: it is removed
// by a cleanup once the driver connection is unreachable, and a lookup
// checks that the entry is the live connection's own (an address can be
// reused before the cleanup of its previous owner has run).
var netConns sync.Map // uintptr -> *netConnEntry

type netConnEntry struct {
	owner weak.Pointer[byte] // the driver connection
	conn  net.Conn
}

// addressOf returns the address of the object dc points to, or nil when dc
// is not a non-nil pointer.
func addressOf(dc any) *byte {
	v := reflect.ValueOf(dc)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	return (*byte)(v.UnsafePointer())
}

func track(dc driver.Conn, conn net.Conn) {
	p := addressOf(dc)
	if p == nil {
		return
	}
	key := uintptr(unsafe.Pointer(p))
	e := &netConnEntry{owner: weak.Make(p), conn: conn}
	netConns.Store(key, e)
	runtime.AddCleanup(p, func(e *netConnEntry) { netConns.CompareAndDelete(key, e) }, e)
}

// NetConn returns the network connection under driverConn, a driver
// connection of a pool opened by [Open] as [sql.Conn.Raw] passes it, or nil
// for any other (a pool from sql.Open, a DSN that sets writeTimeout, a
// network other than tcp or unix). With TLS, it is the TCP connection under
// the TLS session.
//
// It exists so that a caller can bound a statement by a deadline on the
// socket instead of a cancellable context: set the deadline
// ([net.Conn.SetDeadline]) while it has the connection to itself (pinned by
// [sql.Conn]), run the statement with a context that cannot be cancelled,
// and clear the deadline (the zero time) before the connection goes back to
// the pool. The driver sets no deadlines of its own on these connections
// (Open forces readTimeout=0, and NetConn is nil when writeTimeout is set).
// A deadline that passes mid-statement fails the statement, and the driver
// then closes the connection. Nothing else may be done with it: reading,
// writing or closing it would corrupt the driver's connection.
func NetConn(driverConn any) net.Conn {
	p := addressOf(driverConn)
	if p == nil {
		return nil
	}
	v, ok := netConns.Load(uintptr(unsafe.Pointer(p)))
	if !ok {
		return nil
	}
	e := v.(*netConnEntry)
	if e.owner.Value() != p {
		return nil
	}
	return e.conn
}
