package pool_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/pool"
)

// openConfig calls pool.OpenConfig and closes the pool at the end of the
// test.
func openConfig(t *testing.T, cfg *mysql.Config, opts ...pool.Option) *sql.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := pool.OpenConfig(ctx, cfg, opts...)
	if err != nil {
		t.Fatalf("pool.OpenConfig: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// testConfig is the test server's DSN as a *mysql.Config.
func testConfig(t *testing.T) *mysql.Config {
	t.Helper()
	cfg, err := mysql.ParseDSN(testdb.RequireReal(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestOpenConfigEnforcesLikeOpen: a Config that sets a short wait_timeout
// and statement time limit, a read timeout shorter than a lock wait, and
// interpolateParams off gets the pool's settings on every connection, as a
// DSN does: the lease as wait_timeout, no limit, a GET_LOCK wait that
// outlasts the read timeout, and no server-side prepare. The caller's
// Config is left as it was.
func TestOpenConfigEnforcesLikeOpen(t *testing.T) {
	t.Parallel()
	srv := testdb.RequireReal(t)
	limitVar := srv.Flavor.StatementTimeVar()
	cfg := testConfig(t)
	cfg.Params = map[string]string{"wait_timeout": "1"}
	if limitVar != "" {
		limit := "1" // max_statement_time: seconds
		if limitVar == "max_execution_time" {
			limit = "1000" // milliseconds
		}
		cfg.Params["@@session."+limitVar] = limit
	}
	const readTimeout = 300 * time.Millisecond
	cfg.ReadTimeout = readTimeout
	cfg.InterpolateParams = false
	before := cfg.Clone()

	const lease, conns = 30 * time.Second, 4
	db := openConfig(t, cfg, pool.WithLease(lease), pool.WithMaxConns(conns))
	if cfg.ReadTimeout != before.ReadTimeout || cfg.InterpolateParams != before.InterpolateParams ||
		cfg.Logger != before.Logger || cfg.DialFunc != nil || len(cfg.Params) != len(before.Params) ||
		cfg.Params["wait_timeout"] != "1" || cfg.Net != before.Net || cfg.Addr != before.Addr {
		t.Errorf("OpenConfig changed the caller's Config: %+v, was %+v", cfg, before)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pinned []*sql.Conn
	defer func() {
		for _, c := range pinned {
			_ = c.Close()
		}
	}()
	for i := range conns {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pinned = append(pinned, c)
		var wait int
		if err := c.QueryRowContext(ctx, "SELECT @@session.wait_timeout").Scan(&wait); err != nil {
			t.Fatal(err)
		}
		if wait != int(lease/time.Second) {
			t.Errorf("%s: connection %d: wait_timeout = %d, want the lease %d (the Config says 1)", srv.Name, i+1, wait, int(lease/time.Second))
		}
		if limitVar != "" {
			var lim float64
			if err := c.QueryRowContext(ctx, "SELECT @@session."+limitVar).Scan(&lim); err != nil {
				t.Fatal(err)
			}
			if lim != 0 {
				t.Errorf("%s: connection %d: %s = %v, want 0", srv.Name, i+1, limitVar, lim)
			}
		}
	}

	// A wait of 1 s on a key held elsewhere outlasts the Config's read
	// timeout: it answers 0 (not granted) instead of a broken connection.
	name := testdb.UniqueName(t)
	holder, err := testdb.OpenDB(t, srv.DSN).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var got sql.NullInt64
	if err := holder.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("holder's GET_LOCK = %v, %v", got, err)
	}
	start := time.Now()
	if err := pinned[0].QueryRowContext(ctx, "SELECT GET_LOCK(?, 1)", name).Scan(&got); err != nil {
		t.Errorf("a wait longer than the Config's read timeout (%v) failed after %v: %v", readTimeout, time.Since(start), err)
	} else if got.Valid && got.Int64 != 0 {
		t.Errorf("GET_LOCK of a held name = %v, want 0", got)
	}

	if srv.Flavor != flavor.TiDB { // TiDB has no Com_stmt_prepare
		n := prepares(t, ctx, pinned[1])
		var one int
		if err := pinned[1].QueryRowContext(ctx, "SELECT ?", 1).Scan(&one); err != nil {
			t.Fatal(err)
		}
		if d := prepares(t, ctx, pinned[1]) - n; d != 0 {
			t.Errorf("a query with an argument prepared %d statements at the server, want 0 (interpolateParams)", d)
		}
	}
}

// TestOpenConfigDialAndBeforeConnect: the Config's dial function makes the
// pool's connections, and its BeforeConnect callback runs before each one
// is made and supplies the password (as an IAM token provider would): the
// Config's own password is wrong, so without the callback no login works.
func TestOpenConfigDialAndBeforeConnect(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	password := cfg.Passwd
	cfg.Passwd = "not-the-password-" + testdb.UniqueName(t)
	var dials, tokens atomic.Int32
	var d net.Dialer
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	if err := cfg.Apply(mysql.BeforeConnect(func(_ context.Context, c *mysql.Config) error {
		tokens.Add(1)
		c.Passwd = password
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	db := openConfig(t, cfg, pool.WithMaxConns(2))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c1, err1 := db.Conn(ctx)
	c2, err2 := db.Conn(ctx)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	_ = c1.Close()
	_ = c2.Close()
	if dials.Load() < 2 || tokens.Load() < 2 {
		t.Errorf("%d dials and %d BeforeConnect calls for two connections and the probes, want at least 2 each", dials.Load(), tokens.Load())
	}
	t.Logf("%d dials, %d BeforeConnect calls", dials.Load(), tokens.Load())
}

// TestOpenConfigErrors: OpenConfig fails as Open does, with the same
// sentinels, and never quotes the password: a nil Config, an option out of
// range, an unsafe collation, an unreachable address, a wrong password, and
// a BeforeConnect that fails.
func TestOpenConfigErrors(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-Pw/with:odd@chars"
	base := func() *mysql.Config {
		cfg := testConfig(t)
		cfg.Passwd = secret
		return cfg
	}
	errToken := errors.New("token service down")
	for _, tc := range []struct {
		name string
		cfg  func() *mysql.Config
		opts []pool.Option
		is   []error
	}{
		{"nil Config", func() *mysql.Config { return nil }, nil, []error{pool.ErrInvalidDSN}},
		{"option out of range", base, []pool.Option{pool.WithMaxConns(0)}, []error{pool.ErrInvalidOption}},
		{"unsafe collation", func() *mysql.Config {
			cfg := base()
			cfg.Collation = "big5_chinese_ci"
			return cfg
		}, nil, []error{pool.ErrInvalidDSN}},
		{"unreachable", func() *mysql.Config {
			cfg := base()
			cfg.Addr = "127.0.0.1:1"
			return cfg
		}, nil, []error{pool.ErrUnreachable}},
		{"wrong password", base, nil, []error{pool.ErrRefused}},
		{"BeforeConnect fails", func() *mysql.Config {
			cfg := base()
			_ = cfg.Apply(mysql.BeforeConnect(func(context.Context, *mysql.Config) error { return errToken }))
			return cfg
		}, nil, []error{errToken}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			db, err := pool.OpenConfig(ctx, tc.cfg(), tc.opts...)
			if err == nil {
				_ = db.Close()
				t.Fatal("OpenConfig succeeded")
			}
			if db != nil {
				t.Errorf("OpenConfig returned a pool with its error")
			}
			t.Logf("%v", err)
			for _, target := range tc.is {
				if !errors.Is(err, target) {
					t.Errorf("%v does not match %v", err, target)
				}
			}
			for _, text := range chainTexts(err) {
				if strings.Contains(text, secret) || strings.Contains(text, "s3cret") {
					t.Errorf("an error of the chain quotes the password: %q", text)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("message not one line: %q", err)
			}
		})
	}
}
