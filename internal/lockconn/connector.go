package lockconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"
)

// Connector wraps the driver's connector of a lock pool: each connection it
// makes is a *Conn. Open the pool with sql.OpenDB(c); [Of] then finds c
// again from the *sql.DB.
type Connector struct {
	inner   driver.Connector // inner as given, for Control
	session driver.Connector // inner, running the session statement
	lease   time.Duration
	dial    bool
	log     *DriverLog
	drv     *Driver
}

// NewConnector returns a Connector making its connections with inner.
// lease is the session wait_timeout the caller gave every connection of the
// pool (pool.Open sets it with session); it is only reported, by
// [Connector.Lease].
//
// session, unless empty, is a statement that every new connection runs
// once inner has made it, after what the driver itself sends (the DSN's
// parameters, as one SET of their text): what it sets holds whatever the
// DSN says, in whatever spelling or parameter value (pool.Open sets the
// lease and switches the statement time limit off this way). A connection
// whose statement fails is closed, and Connect returns the error. The
// control connections ([Connector.Control]) run it too.
//
// dial says that inner dials its connections with [Dial] (pool.Open sets
// the driver's Config.DialFunc to Dial when it can): each Conn then knows
// its socket. Otherwise [Conn.Socket] is nil for every connection.
//
// log is the [DriverLog] that inner's driver logs to (pool.Open sets it as
// the driver's Config.Logger), reported by [Connector.DriverLog]; nil when
// the driver logs elsewhere.
func NewConnector(inner driver.Connector, lease time.Duration, dial bool, log *DriverLog, session string) *Connector {
	c := &Connector{inner: inner, session: inner, lease: lease, dial: dial, log: log}
	if session != "" {
		c.session = &sessionConnector{inner: inner, stmt: session}
	}
	c.drv = &Driver{inner: inner.Driver(), connector: c}
	return c
}

// sessionConnector is a driver connector that runs stmt on every
// connection inner makes, before it returns it.
type sessionConnector struct {
	inner driver.Connector
	stmt  string
}

// Connect implements [driver.Connector].
func (s *sessionConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := s.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := execOn(ctx, dc, s.stmt); err != nil {
		_ = dc.Close()
		return nil, err
	}
	return dc, nil
}

// Driver implements [driver.Connector].
func (s *sessionConnector) Driver() driver.Driver { return s.inner.Driver() }

// execOn runs stmt, which has no arguments, on the new connection dc.
func execOn(ctx context.Context, dc driver.Conn, stmt string) error {
	if e, ok := dc.(driver.ExecerContext); ok {
		_, err := e.ExecContext(ctx, stmt, nil)
		if err != driver.ErrSkip {
			return err
		}
	}
	st, err := dc.Prepare(stmt)
	if err != nil {
		return err
	}
	defer st.Close()
	if e, ok := st.(driver.StmtExecContext); ok {
		_, err = e.ExecContext(ctx, nil)
		return err
	}
	//lint:ignore SA1019 the fallback of a driver with neither ExecerContext nor StmtExecContext
	_, err = st.Exec(nil)
	return err
}

// Connect makes a connection with the inner connector and returns it as a
// *Conn (implementing [driver.Connector]). When the Connector was made with
// dial, the socket that [Dial] dials for this call becomes the Conn's
// [Conn.Socket].
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	if !c.dial {
		dc, err := c.session.Connect(ctx)
		if err != nil {
			return nil, err
		}
		return &Conn{inner: dc}, nil
	}
	d := new(dialed)
	dc, err := c.session.Connect(context.WithValue(ctx, dialedKey{}, d))
	if err != nil {
		return nil, err
	}
	return &Conn{inner: dc, socket: d.conn}, nil
}

// Driver returns the *Driver of c (implementing [driver.Connector]), always
// the same one. [sql.DB.Driver] of a pool opened with sql.OpenDB(c) returns
// it, which is how [Of] finds c.
func (c *Connector) Driver() driver.Driver { return c.drv }

// Lease returns the session wait_timeout of the pool's connections, as
// given to [NewConnector] (pool.Open passes its WithLease duration; the
// server's wait_timeout is that rounded up to whole seconds).
func (c *Connector) Lease() time.Duration { return c.lease }

// IdleTimeout is how long a connection may stay idle in a pool of c before
// the pool should close it (sql.DB.SetConnMaxIdleTime): a third of the
// lease, so that database/sql's cleaner, which runs at that period, closes
// it before the server's wait_timeout (the lease) ends its session and the
// driver logs the broken connection at its next use.
func (c *Connector) IdleTimeout() time.Duration { return c.lease / 3 }

// DriverLog returns the log the driver writes to for the pool's
// connections (and the control connections of [Connector.Control]), as
// given to [NewConnector], or nil.
func (c *Connector) DriverLog() *DriverLog { return c.log }

// Control returns the inner connector (running the session statement), for
// connections outside the bounded lock pool: namedlock opens a control pool
// on it to KILL the server-side wait of a cancelled GET_LOCK, which must
// never wait for, or exhaust, the lock pool itself. Its connections are the
// driver's own, not *Conn.
func (c *Connector) Control() driver.Connector { return c.session }

// Of returns the Connector of a pool opened with sql.OpenDB on one (found
// through [sql.DB.Driver]), or nil for any other *sql.DB and for nil. (A
// Connector's *Driver registered with sql.Register would make pools from
// sql.Open lead to it too, though their connections are not its: nothing
// registers it.)
func Of(db *sql.DB) *Connector {
	if db == nil {
		return nil
	}
	if d, ok := db.Driver().(*Driver); ok {
		return d.connector
	}
	return nil
}
