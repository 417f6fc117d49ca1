package lockconn

import "database/sql/driver"

// Driver is the [driver.Driver] of a [Connector]: what [sql.DB.Driver]
// returns for a pool opened on a Connector. It links back to the Connector
// (see [Of]).
type Driver struct {
	inner     driver.Driver
	connector *Connector
}

// Open opens a connection with the inner connector's driver and returns it
// as that driver makes it, not wrapped in a *Conn: database/sql never calls
// it for a pool opened with sql.OpenDB.
func (d *Driver) Open(name string) (driver.Conn, error) { return d.inner.Open(name) }
