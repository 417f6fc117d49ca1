package lockconn_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/lockconn"
	"github.com/namedlock/mysql/internal/testdb"
)

// TestOf: a pool opened on a Connector leads back to it through
// db.Driver(); any other pool, and nil, to nothing. The Connector reports
// its lease and its inner connector, whose connections are the driver's.
func TestOf(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	cfg := config(t)
	db, c := openDB(t, cfg, true)
	if got := lockconn.Of(db); got != c {
		t.Fatalf("Of(pool on c) = %p, want %p", got, c)
	}
	if _, ok := db.Driver().(*lockconn.Driver); !ok {
		t.Errorf("db.Driver() = %T, want *lockconn.Driver", db.Driver())
	}
	if c.Driver() != c.Driver() {
		t.Error("Driver() returns a new *Driver on each call")
	}
	other, c2 := openDB(t, config(t), true)
	if lockconn.Of(other) != c2 || c2 == c {
		t.Error("two pools share one Connector")
	}
	if got := lockconn.Of(testdb.OpenDB(t, testdb.Get(t).DSN)); got != nil {
		t.Errorf("Of(a plain pool) = %p, want nil", got)
	}
	if got := lockconn.Of(nil); got != nil {
		t.Errorf("Of(nil) = %p, want nil", got)
	}
	if got := c.Lease(); got != testLease {
		t.Errorf("Lease() = %v, want %v", got, testLease)
	}

	// Control: the inner connector, making the driver's own connections
	// outside the pool.
	ctrl := c.Control()
	if _, ok := ctrl.(*lockconn.Connector); ok || ctrl == nil {
		t.Fatalf("Control() = %T, want the driver's connector", ctrl)
	}
	dc, err := ctrl.Connect(ctx)
	if err != nil {
		t.Fatalf("Control().Connect: %v", err)
	}
	if _, ok := dc.(*lockconn.Conn); ok {
		t.Error("Control().Connect made a *lockconn.Conn")
	}
	if err := dc.(driver.Pinger).Ping(ctx); err != nil {
		t.Errorf("control connection: %v", err)
	}
	_ = dc.Close()

	// Driver.Open: the inner driver's, unwrapped.
	dc, err = c.Driver().Open(testdb.Get(t).DSN)
	if err != nil {
		t.Fatalf("Driver().Open: %v", err)
	}
	if _, ok := dc.(*lockconn.Conn); ok {
		t.Error("Driver().Open made a *lockconn.Conn")
	}
	_ = dc.Close()
}

// TestSocket: with dial, every connection knows its own socket: its remote
// end is the server, and its local end is where the server sees the session
// come from. Without dial, or when the driver does not dial through Dial,
// the socket is unknown.
func TestSocket(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	srv := testdb.Get(t)
	cfg := config(t)
	db, _ := openDB(t, cfg, true)
	a, b := pin(t, ctx, db), pin(t, ctx, db)
	socket := func(c interface{ Raw(func(any) error) error }) net.Conn {
		t.Helper()
		var s net.Conn
		if err := c.Raw(func(dc any) error {
			lc, ok := dc.(*lockconn.Conn)
			if !ok {
				return errors.New("not a *lockconn.Conn")
			}
			s = lc.Socket()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	sa, sb := socket(a), socket(b)
	if sa == nil || sb == nil {
		t.Fatalf("sockets = %v, %v; want both known", sa, sb)
	}
	if sa == sb {
		t.Fatal("two connections share one socket")
	}
	if cfg.Net == "tcp" {
		want, err := net.ResolveTCPAddr("tcp", cfg.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := sa.RemoteAddr().String(); got != want.String() {
			t.Errorf("Socket().RemoteAddr() = %s, want %s", got, want)
		}
		if srv.Real() {
			checkSessionHost(t, ctx, a, sa.LocalAddr())
		}
	}

	plain, _ := openDB(t, config(t), false)
	if s := socket(pin(t, ctx, plain)); s != nil {
		t.Errorf("Socket() without dial = %v, want nil", s)
	}
	// dial set, but the driver dials by itself.
	mc, err := mysql.NewConnector(config(t))
	if err != nil {
		t.Fatal(err)
	}
	c := lockconn.NewConnector(mc, testLease, true, nil, "")
	dc, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if s := dc.(*lockconn.Conn).Socket(); s != nil {
		t.Errorf("Socket() of a connection the driver dialed itself = %v, want nil", s)
	}
}

// TestDialOutsideConnect: Dial called outside a Connect only dials.
func TestDialOutsideConnect(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	c, err := lockconn.Dial(timeout(t), cfg.Net, cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if _, err := lockconn.Dial(context.Background(), "tcp", "127.0.0.1:1"); err == nil {
		t.Error("Dial to a closed port succeeded")
	}
}

// TestSessionID: a connection's session id is 0 until set, and stays with
// the connection (not the sql.Conn) from one use to the next.
func TestSessionID(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	db, _ := openDB(t, config(t), true)
	db.SetMaxOpenConns(1)
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := sessionID(t, ctx, c)
	if err := raw(c, func(lc *lockconn.Conn) error {
		if got := lc.SessionID(); got != 0 {
			t.Errorf("SessionID() of a new connection = %d, want 0", got)
		}
		lc.SetSessionID(id)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	c = pin(t, ctx, db) // the same connection: the pool has one
	if err := raw(c, func(lc *lockconn.Conn) error {
		if got := lc.SessionID(); got != id {
			t.Errorf("SessionID() on reuse = %d, want %d", got, id)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := sessionID(t, ctx, c); got != id {
		t.Fatalf("the pool of one made a second connection (%d, then %d)", id, got)
	}
}

// checkSessionHost checks that the server lists the session of c as coming
// from local, its socket's local end. The port is always local's. The host
// part depends on the server's skip_name_resolve: ON (MariaDB as Debian
// configures it, the machine's shared server) shows the client's address,
// 127.0.0.1; OFF (MySQL's default, and so on a MySQL started with its own
// defaults) shows the name the server resolved that address to, localhost.
// The library never matches sessions by host (it uses session ids), so
// either is right; what is checked is that the host part is the address or
// a name of it.
func checkSessionHost(t *testing.T, ctx context.Context, c *sql.Conn, local net.Addr) {
	t.Helper()
	var host string
	var skip sql.NullString
	if err := c.QueryRowContext(ctx, "SELECT HOST FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()").Scan(&host); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRowContext(ctx, "SELECT @@skip_name_resolve").Scan(&skip); err != nil {
		t.Logf("@@skip_name_resolve: %v (taken as ON)", err)
		skip = sql.NullString{String: "1", Valid: true}
	}
	resolves := skip.String == "0" || strings.EqualFold(skip.String, "OFF")
	t.Logf("skip_name_resolve=%s: the server lists the session as from %s; its socket is %s", skip.String, host, local)
	gotHost, gotPort, err := net.SplitHostPort(host)
	if err != nil {
		t.Fatalf("HOST %q is not host:port: %v", host, err)
	}
	wantHost, wantPort, err := net.SplitHostPort(local.String())
	if err != nil {
		t.Fatal(err)
	}
	if gotPort != wantPort {
		t.Errorf("the server sees the session from port %s, its socket is %s", gotPort, local)
	}
	if gotHost == wantHost {
		return
	}
	if !resolves {
		t.Errorf("skip_name_resolve is on, yet the server shows host %q, not the socket's address %s", gotHost, wantHost)
		return
	}
	addrs, err := net.DefaultResolver.LookupHost(ctx, gotHost)
	if err != nil || !slices.Contains(addrs, wantHost) {
		t.Errorf("the server resolved the session's address to %q, which resolves to %v (%v), not to %s", gotHost, addrs, err, wantHost)
	}
}
