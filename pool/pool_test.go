package pool_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/lockconn"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/pool"
)

// TestMain finds the test server once (named in every test's output by
// testdb.Get) and stops whatever it had to start.
func TestMain(m *testing.M) {
	testdb.Main(m)
}

// open calls pool.Open and closes the pool at the end of the test.
func open(t *testing.T, dsn string, opts ...pool.Option) *sql.DB {
	t.Helper()
	db, err := pool.Open(dsn, opts...)
	if err != nil {
		t.Fatalf("pool.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// withParams returns dsn with params added through the driver's Config.
func withParams(t *testing.T, dsn string, params map[string]string, edit func(*mysql.Config)) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k, v := range params {
		cfg.Params[k] = v
	}
	if edit != nil {
		edit(cfg)
	}
	return cfg.FormatDSN()
}

// prepares returns the session's Com_stmt_prepare counter.
func prepares(t *testing.T, ctx context.Context, c *sql.Conn) int {
	t.Helper()
	var name string
	var n int
	if err := c.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").Scan(&name, &n); err != nil {
		t.Fatalf("Com_stmt_prepare: %v", err)
	}
	return n
}

// TestOpenInterpolatesParams: a query with arguments on the pool is sent as
// one text query (no server-side prepare), even when the DSN asks for
// interpolateParams=false. A plain sql.Open pool on the same DSN does
// prepare, which shows the check can fail.
func TestOpenInterpolatesParams(t *testing.T) {
	t.Parallel()
	if srv := testdb.Get(t); srv.Flavor == flavor.TiDB {
		t.Skipf("%s has no Com_stmt_prepare status variable to count server-side prepares (namedlock's TestPlainPool shows a pool without interpolateParams refused there)", srv.Name)
	}
	dsn := withParams(t, testdb.Get(t).DSN, nil, func(c *mysql.Config) { c.InterpolateParams = false })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	delta := func(db *sql.DB) int {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		before := prepares(t, ctx, c)
		var got int64
		if err := c.QueryRowContext(ctx, "SELECT ? + 1", 41).Scan(&got); err != nil || got != 42 {
			t.Fatalf("parameterized query: %v, %v", got, err)
		}
		return prepares(t, ctx, c) - before
	}
	if d := delta(open(t, dsn)); d != 0 {
		t.Errorf("pool.Open: Com_stmt_prepare grew by %d for one parameterized query, want 0 (interpolateParams)", d)
	}
	plain, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if d := delta(plain); d != 1 {
		t.Errorf("sql.Open control: Com_stmt_prepare grew by %d, want 1 (the check could not tell)", d)
	}
}

// TestOpenClearsReadTimeout: a readTimeout in the DSN would cut a GET_LOCK
// wait short; the pool ignores it. The control pool with the same DSN fails.
func TestOpenClearsReadTimeout(t *testing.T) {
	t.Parallel()
	dsn := withParams(t, testdb.Get(t).DSN, nil, func(c *mysql.Config) { c.ReadTimeout = 100 * time.Millisecond })
	if !strings.Contains(dsn, "readTimeout=100ms") {
		t.Fatalf("DSN %q lacks readTimeout", dsn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const query = "SELECT SLEEP(0.4)"
	var v int
	if err := open(t, dsn).QueryRowContext(ctx, query).Scan(&v); err != nil {
		t.Errorf("pool.Open with readTimeout=100ms: a 400ms statement failed: %v", err)
	}
	plain, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.QueryRowContext(ctx, query).Scan(&v); err == nil {
		t.Error("control: sql.Open with readTimeout=100ms ran a 400ms statement: the check cannot fail")
	}
}

// TestOpenLease: pool sessions have wait_timeout = the lease (whole seconds,
// rounded up), whatever the DSN says.
func TestOpenLease(t *testing.T) {
	t.Parallel()
	base := testdb.Get(t).DSN
	for _, tc := range []struct {
		name string
		dsn  string
		opts []pool.Option
		want int
	}{
		{"default", base, nil, int(pool.DefaultLease / time.Second)},
		{"5s", base, []pool.Option{pool.WithLease(5 * time.Second)}, 5},
		{"2.5s rounds up", base, []pool.Option{pool.WithLease(2500 * time.Millisecond)}, 3},
		{"DSN says 600", withParams(t, base, map[string]string{"wait_timeout": "600"}, nil), []pool.Option{pool.WithLease(7 * time.Second)}, 7},
	} {
		db := open(t, tc.dsn, tc.opts...)
		// Every connection of the pool, not just the first: take two at once.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c1, err1 := db.Conn(ctx)
		c2, err2 := db.Conn(ctx)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		for _, c := range []*sql.Conn{c1, c2} {
			var got int
			if err := c.QueryRowContext(ctx, "SELECT @@session.wait_timeout").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s: @@session.wait_timeout = %d, want %d", tc.name, got, tc.want)
			}
		}
		_ = c1.Close()
		_ = c2.Close()
		cancel()
	}
}

// TestOpenMaxConns: WithMaxConns bounds the pool's open connections; the
// connection after the last one waits and gives up with its ctx.
func TestOpenMaxConns(t *testing.T) {
	t.Parallel()
	db := open(t, testdb.Get(t).DSN, pool.WithMaxConns(2))
	if got := db.Stats().MaxOpenConnections; got != 2 {
		t.Errorf("MaxOpenConnections = %d, want 2", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var conns []*sql.Conn
	for range 2 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	short, cancelShort := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancelShort()
	if c, err := db.Conn(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("third connection on a pool of 2 = %v, want DeadlineExceeded", err)
		if c != nil {
			_ = c.Close()
		}
	}
	if got := db.Stats().OpenConnections; got != 2 {
		t.Errorf("OpenConnections = %d, want 2", got)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	// Kept idle for reuse, not closed.
	if st := db.Stats(); st.Idle != 2 || st.OpenConnections != 2 {
		t.Errorf("after returning both: Idle %d, Open %d; want 2 and 2", st.Idle, st.OpenConnections)
	}
	if got := open(t, testdb.Get(t).DSN).Stats().MaxOpenConnections; got != pool.DefaultMaxConns {
		t.Errorf("default MaxOpenConnections = %d, want %d", got, pool.DefaultMaxConns)
	}
}

// TestOpenInvalidOptions: options out of range are refused, naming the
// option, before any connection is made (the DSN points nowhere).
func TestOpenInvalidOptions(t *testing.T) {
	t.Parallel()
	// A listener nobody accepts from: a dial still completes (into its
	// backlog), so a connection attempt is seen there, whatever it took.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nowhere := "root@tcp(" + ln.Addr().String() + ")/test"
	for _, tc := range []struct {
		opt  pool.Option
		want string
	}{
		{pool.WithMaxConns(0), "WithMaxConns(0)"},
		{pool.WithMaxConns(-3), "WithMaxConns(-3)"},
		{pool.WithLease(time.Second), "WithLease(1s)"},
		{pool.WithLease(-time.Second), "WithLease(-1s)"},
		{pool.WithConnectTimeout(0), "WithConnectTimeout(0s)"},
	} {
		db, err := pool.Open(nowhere, tc.opt)
		if err == nil {
			_ = db.Close()
			t.Errorf("%s accepted", tc.want)
			continue
		}
		if !errors.Is(err, pool.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %q does not match ErrInvalidOption or does not name %s", err, tc.want)
		}
		if dialled(t, ln.(*net.TCPListener)) {
			t.Errorf("%s: Open connected: the option must be refused before connecting", tc.want)
		}
	}
}

// dialled reports whether a connection to ln is waiting to be accepted. A
// dial that returned has completed its handshake into ln's backlog, so a
// connection made before the call is found at once; the deadline only
// ends the look when there is none.
func dialled(t *testing.T, ln *net.TCPListener) bool {
	t.Helper()
	if err := ln.SetDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	return true
}

// TestOpenConnectTimeout: a server that accepts TCP but never answers the
// handshake is given up after the connect timeout.
func TestOpenConnectTimeout(t *testing.T) {
	t.Parallel()
	ln := listenSilently(t)
	start := time.Now()
	db, err := pool.Open("root:secretpw@tcp("+ln+")/test", pool.WithConnectTimeout(300*time.Millisecond))
	el := time.Since(start)
	if err == nil {
		_ = db.Close()
		t.Fatal("Open succeeded against a silent server")
	}
	if !errors.Is(err, pool.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), ln) {
		t.Errorf("error %q: want ErrUnreachable, DeadlineExceeded and the address %s", err, ln)
	}
	// contract: Open waits out its connect timeout (WithConnectTimeout)
	// against a server that never answers...
	if el < 250*time.Millisecond {
		t.Errorf("gave up after %v, want about 300ms", el)
	}
	// contract: ...and gives up then; 2 s (6× the timeout) only catches a
	// wait that does not end.
	if el > 2*time.Second {
		t.Errorf("gave up after %v, want about 300ms", el)
	}
}

// TestOpenSupportedServer: the test server passes the named-lock probe.
//
// ErrUnsupportedServer itself is testable here only by design: Open returns
// it when SHOW VARIABLES LIKE 'wsrep_on' answers ON (Galera / Percona XtraDB
// Cluster) or the GET_LOCK probe does not answer 1 and 1, and no such server
// runs on this machine (its MariaDB reports wsrep_on = OFF, which is checked
// below), so that refusal cannot be exercised against a real server here
// (TestCheckRefusesGalera exercises it against a fake driver).
func TestOpenSupportedServer(t *testing.T) {
	t.Parallel()
	srv := testdb.RequireReal(t)
	db := open(t, srv.DSN)
	var name, value string
	err := db.QueryRow("SHOW VARIABLES LIKE 'wsrep_on'").Scan(&name, &value)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	if strings.EqualFold(value, "ON") {
		t.Fatalf("wsrep_on = ON, yet pool.Open accepted the server")
	}
	t.Logf("wsrep_on = %q (%v)", value, err)
}

// TestConnector: pools from Open are opened on a lockconn.Connector, which
// lockconn.Of finds from the pool, with the pool's lease and a control
// connector that connects to the same server outside the pool; any other
// *sql.DB has none.
func TestConnector(t *testing.T) {
	t.Parallel()
	dsn := testdb.Get(t).DSN
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db := open(t, dsn, pool.WithLease(7*time.Second), pool.WithMaxConns(1))
	c := lockconn.Of(db)
	if c == nil {
		t.Fatal("lockconn.Of(pool.Open pool) = nil")
	}
	if got := c.Lease(); got != 7*time.Second {
		t.Errorf("Lease() = %v, want 7s", got)
	}
	// Outside the pool: a control connection while the pool's only
	// connection is taken.
	held, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ctrl := sql.OpenDB(c.Control())
	defer ctrl.Close()
	if err := ctrl.PingContext(ctx); err != nil {
		t.Errorf("control connection: %v", err)
	}
	plain, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if lockconn.Of(plain) != nil {
		t.Error("lockconn.Of(sql.Open pool) != nil")
	}
	if lockconn.Of(open(t, dsn)) == c {
		t.Error("two pools share one connector")
	}
}

// listenSilently accepts TCP connections on 127.0.0.1 and never writes: a
// server that hangs in the handshake. It returns the address.
func listenSilently(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestSockets: every connection of a pool from Open is a *lockconn.Conn
// that knows its own socket (its remote end is the DSN's address, and one
// connection's is not another's), on which a deadline bounds a statement
// run inside Raw and, cleared, leaves the connection working. The socket is
// unknown for a DSN that sets writeTimeout (the driver would override
// deadlines), and a pool from sql.Open has no *lockconn.Conn at all.
func TestSockets(t *testing.T) {
	t.Parallel()
	dsn := testdb.Get(t).DSN
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// raw runs f on c's driver connection, which must be a *lockconn.Conn.
	raw := func(t *testing.T, c *sql.Conn, f func(*lockconn.Conn) error) {
		t.Helper()
		if err := c.Raw(func(dc any) error {
			lc, ok := dc.(*lockconn.Conn)
			if !ok {
				return fmt.Errorf("driver connection %T, want *lockconn.Conn", dc)
			}
			return f(lc)
		}); err != nil {
			t.Fatal(err)
		}
	}
	socket := func(t *testing.T, c *sql.Conn) (s net.Conn) {
		t.Helper()
		raw(t, c, func(lc *lockconn.Conn) error { s = lc.Socket(); return nil })
		return s
	}
	pinned := func(t *testing.T, db *sql.DB) *sql.Conn {
		t.Helper()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	db := open(t, dsn)
	a, b := pinned(t, db), pinned(t, db)
	na, nb := socket(t, a), socket(t, b)
	if na == nil || nb == nil {
		t.Fatalf("sockets of pool.Open connections = %v, %v; want both known", na, nb)
	}
	if na == nb {
		t.Error("two connections share one socket")
	}
	if cfg.Net == "tcp" {
		want, err := net.ResolveTCPAddr("tcp", cfg.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := na.RemoteAddr().String(); got != want.String() {
			t.Errorf("Socket().RemoteAddr() = %s, want %s", got, want)
		}
	}
	// A deadline set on the socket, a statement run under it with a ctx
	// that cannot be cancelled, the deadline cleared: the connection keeps
	// working.
	raw(t, a, func(lc *lockconn.Conn) error {
		if err := lc.Socket().SetDeadline(time.Now().Add(time.Minute)); err != nil {
			return err
		}
		rows, err := lc.QueryContext(context.Background(), "SELECT 1", nil)
		if err == nil {
			err = rows.Close()
		}
		if err != nil {
			return fmt.Errorf("statement under a deadline on the socket: %w", err)
		}
		return lc.Socket().SetDeadline(time.Time{})
	})
	if err := a.PingContext(ctx); err != nil {
		t.Errorf("ping after the deadline was cleared: %v", err)
	}

	wt := open(t, withParams(t, dsn, nil, func(c *mysql.Config) { c.WriteTimeout = 30 * time.Second }))
	if nc := socket(t, pinned(t, wt)); nc != nil {
		t.Errorf("socket with writeTimeout = %v, want nil", nc)
	}
	plain, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	if err := pinned(t, plain).Raw(func(dc any) error {
		if _, ok := dc.(*lockconn.Conn); ok {
			t.Error("a sql.Open connection is a *lockconn.Conn")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
