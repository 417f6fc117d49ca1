package testdb

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/namedlock/mysql/internal/embedded"
	"github.com/namedlock/mysql/internal/flavor"
)

// Where and how Get looks for a server.
const (
	// EnvDSN names the environment variable whose DSN, when set, is the only
	// server Get uses.
	EnvDSN = "MYSQL_TEST_DSN"
	// EnvCI names the environment variable that, when non-empty, forbids the
	// embedded fallback.
	EnvCI = "CI"
	// LocalDSN is the server Get probes when EnvDSN is unset.
	LocalDSN = "root@tcp(127.0.0.1:3306)/test"
	// ProbeTimeout bounds each connection attempt of the search.
	ProbeTimeout = 3 * time.Second
)

var (
	once    sync.Once
	found   *Server
	findErr error
	stopMu  sync.Mutex
	stopFn  func() error // stops what resolve started; nil if nothing
)

// Get returns the server tests run against, found once per test binary, and
// logs its Name ("server: ...") to tb on tb's first call, so that every test's output says which
// server it ran on. It tries, in order:
//
//  1. the DSN in $MYSQL_TEST_DSN, if set (and nothing else: if it does not
//     answer, Get fails);
//  2. a server answering on 127.0.0.1:3306 as LocalDSN;
//  3. a mysql:8.4 container, when a Docker engine answers;
//  4. the embedded go-mysql-server (package internal/embedded), unless $CI is
//     non-empty, in which case Get fails with the reasons the others failed.
//
// A container or embedded server that Get starts lives until the test binary
// ends: packages call Main from TestMain to stop it.
func Get(tb testing.TB) *Server {
	tb.Helper()
	once.Do(func() {
		var stop func() error
		found, stop, findErr = defaultResolver().resolve()
		stopMu.Lock()
		stopFn = stop
		stopMu.Unlock()
	})
	if findErr != nil {
		tb.Fatalf("testdb: %v", findErr)
	}
	if _, seen := logged.LoadOrStore(tb, true); !seen {
		tb.Logf("server: %s", found.Name)
	}
	return found
}

// logged holds the tests (and benchmarks) whose output already names the
// server, so that each names it once however often it calls Get.
var logged sync.Map // testing.TB -> bool

// RequireReal is Get, then skips the test (tb.Skip) when the server is the
// embedded go-mysql-server, saying why no real server was found.
func RequireReal(tb testing.TB) *Server {
	tb.Helper()
	s := Get(tb)
	if !s.Real() {
		tb.Skipf("needs a real MySQL/MariaDB: %s", s.why)
	}
	return s
}

// Main runs the tests, stops whatever Get started (Stop), runs the after
// functions (e.g. mariadbtest.RemoveTemplate), then checks that no goroutine
// outlives the tests (goleak.Find), and exits with the tests' code; a
// failure in any of those steps fails the binary. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
func Main(m *testing.M, after ...func() error) {
	code := m.Run()
	if err := Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: %v\n", err)
		code = max(code, 1)
	}
	for _, f := range after {
		if err := f(); err != nil {
			fmt.Fprintf(os.Stderr, "testdb: after the tests: %v\n", err)
			code = max(code, 1)
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Stop stops the container or embedded server that Get started, if any, and
// waits for it. Later calls do nothing. Main calls it; a TestMain that must
// run more checks after the tests (goleak.Find, say) calls it itself before
// them. Get must not be called after Stop.
func Stop() error {
	stopMu.Lock()
	stop := stopFn
	stopFn = nil
	stopMu.Unlock()
	if stop == nil {
		return nil
	}
	return stop()
}

// resolver finds a server; its fields are the outside world, replaced in
// tests.
type resolver struct {
	getenv   func(string) string
	localDSN string
	docker   func() (*Server, func() error, error)
	embedded func() (*embedded.Server, error)
}

func defaultResolver() resolver {
	return resolver{getenv: os.Getenv, localDSN: LocalDSN, docker: startDocker, embedded: embedded.Start}
}

// resolve returns the server, a function that stops it if resolve started
// it, or an error saying what was tried.
func (r resolver) resolve() (*Server, func() error, error) {
	if dsn := r.getenv(EnvDSN); dsn != "" {
		v, err := probe(dsn, ProbeTimeout)
		if err != nil {
			return nil, nil, fmt.Errorf("$%s does not answer: %w", EnvDSN, err)
		}
		return describe(&Server{DSN: dsn}, v, "from $"+EnvDSN), nil, nil
	}

	var tried []string
	v, err := probe(r.localDSN, ProbeTimeout)
	if err == nil {
		return describe(&Server{DSN: r.localDSN}, v, "from "+addrOf(r.localDSN)+" probe"), nil, nil
	}
	tried = append(tried, fmt.Sprintf("%s: %v", addrOf(r.localDSN), err))

	s, stop, err := r.docker()
	if err == nil {
		return s, stop, nil
	}
	tried = append(tried, "docker: "+err.Error())

	why := fmt.Sprintf("$%s unset; %s", EnvDSN, strings.Join(tried, "; "))
	if r.getenv(EnvCI) != "" {
		return nil, nil, fmt.Errorf("no real MySQL/MariaDB server, and $%s forbids the embedded fallback (%s)", EnvCI, why)
	}
	e, err := r.embedded()
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("no real server (%s), and the embedded one failed", why), err)
	}
	v, err = probe(e.DSN(), ProbeTimeout)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("embedded server does not answer: %w", err), e.Close())
	}
	s = describe(&Server{DSN: e.DSN(), Flavor: flavor.Embedded, why: why}, v, "embedded fallback")
	return s, e.Close, nil
}

// addrOf is dsn's address, or dsn itself if it does not parse.
func addrOf(dsn string) string {
	if cfg, err := mysql.ParseDSN(dsn); err == nil {
		return cfg.Addr
	}
	return dsn
}
