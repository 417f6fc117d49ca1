package lockconn

import (
	"database/sql/driver"
	"net"
)

// Conn is a connection of a lock pool: the driver's connection, with what
// the library knows about it. database/sql hands it to the callback of
// [sql.Conn.Raw] (as a driver.Conn: assert dc.(*Conn)).
//
// Its driver methods forward to the wrapped connection (see the package
// documentation). Its own fields are plain, not synchronized: database/sql
// lets one user at a time have a connection, and [Conn.Socket],
// [Conn.SessionID] and [Conn.SetSessionID] may be called only inside
// sql.Conn.Raw, by whoever has the connection pinned.
type Conn struct {
	inner     driver.Conn
	socket    net.Conn // set by Connect, never changed
	sessionID int64
}

// Socket returns the connection's socket, or nil if it is unknown (the
// Connector was not made with dial, or the driver did not dial through
// [Dial]). With TLS, it is the TCP connection under the TLS session.
//
// It may be used only inside [sql.Conn.Raw], while the caller has the
// connection to itself, and only this way: set a deadline on it
// ([net.Conn.SetDeadline]), run one statement on the Conn with a context
// that cannot be cancelled (context.Background()), and clear the deadline
// (the zero [time.Time]) before Raw returns. While the statement runs, the
// deadline may be moved, also from another goroutine (to the past, to end
// the statement early), as long as that is over before it is cleared.
// A deadline that passes makes the statement fail, and the driver then
// closes the connection (clearing the deadline then fails, harmlessly),
// which database/sql discards when Raw returns. The driver sets no
// deadlines of its own on it when the DSN sets neither readTimeout nor
// writeTimeout (pool.Open forces the former to 0 and dials itself only
// without the latter). Never read, write or close it: that would corrupt
// the driver's connection.
func (c *Conn) Socket() net.Conn { return c.socket }

// SessionID returns the server session id (CONNECTION_ID()) the library
// recorded with [Conn.SetSessionID], or 0 until then. A connection is one
// server session for its whole life, so a recorded id never goes stale.
// Only inside [sql.Conn.Raw] (see [Conn]).
func (c *Conn) SessionID() int64 { return c.sessionID }

// SetSessionID records id as the connection's CONNECTION_ID(). Only inside
// [sql.Conn.Raw] (see [Conn]).
func (c *Conn) SetSessionID(id int64) { c.sessionID = id }

// Unwrap returns the driver's connection. Using it outside [sql.Conn.Raw]
// is as wrong as using c there.
func (c *Conn) Unwrap() driver.Conn { return c.inner }

// Prepare forwards to the driver's connection ([driver.Conn]).
func (c *Conn) Prepare(query string) (driver.Stmt, error) { return c.inner.Prepare(query) }

// Close forwards to the driver's connection ([driver.Conn]).
func (c *Conn) Close() error { return c.inner.Close() }

// Begin forwards to the driver's connection ([driver.Conn]). database/sql
// calls [Conn.BeginTx] instead.
//
// Deprecated: as [driver.Conn.Begin]; use BeginTx.
func (c *Conn) Begin() (driver.Tx, error) {
	return c.inner.Begin() //nolint:staticcheck // forwarded: the interface requires it
}
