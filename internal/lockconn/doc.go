// Package lockconn wraps the driver connections of a lock pool so that what
// the library learns about a connection travels with it.
//
// pool.Open builds its *sql.DB on a [Connector] around go-sql-driver/mysql's
// connector. Every connection the Connector makes is a [*Conn]: the driver's
// connection, forwarded unchanged, plus the connection's socket (when the
// pool dials its connections itself through [Dial]) and the session id the
// library learned on it. namedlock reaches them inside [sql.Conn.Raw]:
//
//	err := conn.Raw(func(dc any) error {
//		c, ok := dc.(*lockconn.Conn)
//		...
//	})
//
// and reaches the Connector of a pool with [Of], for the pool's lease and
// for control connections outside the bounded pool ([Connector.Control]).
// Nothing is kept in package-level state: a Connector lives as long as its
// *sql.DB, a Conn as long as database/sql keeps its connection.
//
// A Conn behaves towards database/sql exactly as the connection it wraps:
// it implements every optional interface of database/sql/driver that
// go-sql-driver/mysql's connection implements (those database/sql looks
// for on a connection), and forwards each call. When a wrapped connection
// lacks one, a Conn does what database/sql does without it (see the
// methods). database/sql can tell the difference only for such a
// connection, never for go-sql-driver/mysql's, which has them all: without
// driver.SessionResetter or driver.Validator, it would close the
// connection after a transaction whose context ended during its rollback,
// and keeps a Conn; without driver.ExecerContext and driver.Execer (or the
// Queryer pair), it would prepare a statement before converting its
// arguments (for the statement), and with a Conn converts them first, with
// the connection's converter, then prepares.
//
// The socket exists to bound a statement by a deadline on it instead of by
// a cancellable context: go-sql-driver/mysql hands every statement whose
// context can be cancelled to the connection's watcher goroutine, two
// goroutine wake-ups per statement, which a deadline on the socket spares.
// See [Conn.Socket] for the only way it may be used.
package lockconn
