package lockconn

import (
	"context"
	"net"
)

// dialedKey is the context key under which Connector.Connect hands Dial the
// place to record the socket it dials.
type dialedKey struct{}

// dialed receives the socket dialed for one Connect call.
type dialed struct{ conn net.Conn }

// Dial is the dial function pool.Open installs as the driver's
// Config.DialFunc for a [Connector] made with dial: it dials with a
// [net.Dialer], as go-sql-driver/mysql does when no dial function is
// registered for the network, and records the socket for the
// [Connector.Connect] call in progress (found through ctx), which makes it
// the new Conn's [Conn.Socket]. Outside such a call it only dials.
func Dial(ctx context.Context, network, addr string) (net.Conn, error) {
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
