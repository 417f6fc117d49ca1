package testdb

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/embedded"
	"github.com/namedlock/mysql/internal/flavor"
)

func TestGet(t *testing.T) {
	s := Get(t)
	if s != Get(t) {
		t.Fatal("Get returned two different servers")
	}
	if s.Name == "" || !strings.Contains(s.Name, s.Flavor.String()) {
		t.Fatalf("Name = %q, Flavor = %v", s.Name, s.Flavor)
	}
	var v string
	if err := OpenDB(t, s.DSN).QueryRow("SELECT VERSION()").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != s.Version {
		t.Fatalf("VERSION() = %q, Server.Version = %q", v, s.Version)
	}
	if s.Real() != (s.Flavor == flavor.MySQL || s.Flavor == flavor.MariaDB || s.Flavor == flavor.TiDB) {
		t.Fatalf("Real() = %v for %v", s.Real(), s.Flavor)
	}
}

func TestRequireReal(t *testing.T) {
	s := RequireReal(t) // skips on the embedded server
	if !s.Real() {
		t.Fatal("RequireReal returned the embedded server")
	}
}

func TestOpenDBInterpolatesParams(t *testing.T) {
	s := RequireReal(t) // the embedded server has no Com_stmt_prepare
	if s.Flavor == flavor.TiDB {
		t.Skipf("%s has no Com_stmt_prepare status variable to count server-side prepares", s.Name)
	}
	c, err := OpenDB(t, s.DSN).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prepares := func() string {
		var name, n string
		if err := c.QueryRowContext(context.Background(), "SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := prepares()
	var got string
	if err := c.QueryRowContext(context.Background(), "SELECT ?", "x").Scan(&got); err != nil || got != "x" {
		t.Fatalf("SELECT ? = %q, %v", got, err)
	}
	if after := prepares(); after != before {
		t.Fatalf("a query with an argument was prepared on the server (Com_stmt_prepare %s -> %s)", before, after)
	}
}

var nameRE = regexp.MustCompile(`^t-[a-z0-9]+(-[a-z0-9]+)*$`)

func TestUniqueName(t *testing.T) {
	n := UniqueName(t)
	if !strings.HasPrefix(n, "t-testuniquename-") || !nameRE.MatchString(n) {
		t.Fatalf("UniqueName = %q", n)
	}

	const goroutines, each = 8, 200
	var mu sync.Mutex
	seen := make(map[string]bool)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				n := UniqueName(t)
				mu.Lock()
				if seen[n] {
					t.Errorf("duplicate %q", n)
				}
				seen[n] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	long := "Ünïcode  and/SPACES__" + strings.Repeat("very long subtest name ", 10)
	t.Run(long, func(t *testing.T) {
		for range 3 {
			n := UniqueName(t)
			if len(n) > MaxNameLen || !nameRE.MatchString(n) {
				t.Fatalf("UniqueName = %q (%d chars)", n, len(n))
			}
			if !strings.HasPrefix(n, "t-testuniquename-n-code-and-spaces-very-long") {
				t.Fatalf("UniqueName = %q", n)
			}
		}
	})
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"TestX":            "testx",
		"TestX/sub_case#1": "testx-sub-case-1",
		"--A--b--":         "a-b",
		"///":              "",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShortVersion(t *testing.T) {
	for version, short := range map[string]string{
		"10.11.19-MariaDB-0+deb12u1": "10.11.19",
		"11.4.2-MariaDB-log":         "11.4.2",
		"8.4.3":                      "8.4.3",
		"8.0.36-28":                  "8.0.36",
		"8.0.11-TiDB-v7.5.0":         "8.0.11",
		"8.0.31":                     "8.0.31",
		"v1":                         "v1",
	} {
		if s := shortVersion(version); s != short {
			t.Errorf("shortVersion(%q) = %q, want %q", version, s, short)
		}
	}
}

// closedDSN is a DSN on a port of 127.0.0.1 where nothing listens.
func closedDSN(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "root@tcp(" + addr + ")/test"
}

func fakeEnv(kv ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}

var errNoDocker = errors.New("no engine (fake)")

func noDocker() (*Server, func() error, error) { return nil, nil, errNoDocker }

func mustNotRun[T any](t *testing.T, what string) func() (T, error) {
	return func() (T, error) {
		t.Errorf("%s was tried", what)
		var zero T
		return zero, errors.New("must not run")
	}
}

func TestResolveOrder(t *testing.T) {
	rs := RequireReal(t)

	t.Run("env DSN wins", func(t *testing.T) {
		r := resolver{
			getenv:   fakeEnv(EnvDSN, rs.DSN),
			localDSN: closedDSN(t),
			docker:   func() (*Server, func() error, error) { t.Error("docker tried"); return noDocker() },
			embedded: mustNotRun[*embedded.Server](t, "embedded"),
		}
		s, stop, err := r.resolve()
		if err != nil || stop != nil || s.DSN != rs.DSN || !strings.HasSuffix(s.Name, "(from $MYSQL_TEST_DSN)") {
			t.Fatalf("resolve = %+v, stop %v, %v", s, stop != nil, err)
		}
	})
	t.Run("env DSN down is an error", func(t *testing.T) {
		r := resolver{getenv: fakeEnv(EnvDSN, closedDSN(t)), localDSN: rs.DSN, docker: noDocker,
			embedded: mustNotRun[*embedded.Server](t, "embedded")}
		if _, _, err := r.resolve(); err == nil || !strings.Contains(err.Error(), EnvDSN) {
			t.Fatalf("resolve error = %v", err)
		}
	})
	t.Run("local probe", func(t *testing.T) {
		r := resolver{getenv: fakeEnv(), localDSN: rs.DSN,
			docker:   func() (*Server, func() error, error) { t.Error("docker tried"); return noDocker() },
			embedded: mustNotRun[*embedded.Server](t, "embedded")}
		s, stop, err := r.resolve()
		if err != nil || stop != nil || !s.Real() || !strings.HasSuffix(s.Name, " probe)") {
			t.Fatalf("resolve = %+v, %v", s, err)
		}
		t.Log(s.Name)
	})
}

func TestResolveDocker(t *testing.T) {
	stopped := false
	want := &Server{DSN: "root@tcp(127.0.0.1:1)/test", Name: "fake", Flavor: flavor.MySQL}
	r := resolver{getenv: fakeEnv(EnvCI, "true"), localDSN: closedDSN(t),
		docker:   func() (*Server, func() error, error) { return want, func() error { stopped = true; return nil }, nil },
		embedded: mustNotRun[*embedded.Server](t, "embedded")}
	s, stop, err := r.resolve()
	if err != nil || s != want || stop == nil {
		t.Fatalf("resolve = %+v, %v", s, err)
	}
	if err := stop(); err != nil || !stopped {
		t.Fatalf("stop: %v", err)
	}
}

func TestResolveEmbeddedFallback(t *testing.T) {
	local := closedDSN(t)
	r := resolver{getenv: fakeEnv(), localDSN: local, docker: noDocker, embedded: embedded.Start}
	s, stop, err := r.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if s.Real() || s.Flavor != flavor.Embedded || !strings.HasPrefix(s.Name, "go-mysql-server ") ||
		!strings.HasSuffix(s.Name, "(embedded fallback)") {
		t.Fatalf("resolve = %+v", s)
	}
	for _, reason := range []string{addrOf(local), errNoDocker.Error()} {
		if !strings.Contains(s.why, reason) {
			t.Errorf("why = %q, lacks %q", s.why, reason)
		}
	}
	t.Log(s.Name, "--", s.why)
	var got int
	if err := OpenDB(t, s.DSN).QueryRow("SELECT GET_LOCK(?, 0)", UniqueName(t)).Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK = %d, %v", got, err)
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("stopped in %v", time.Since(start))
}

func TestResolveCIForbidsEmbedded(t *testing.T) {
	local := closedDSN(t)
	r := resolver{getenv: fakeEnv(EnvCI, "true"), localDSN: local, docker: noDocker,
		embedded: mustNotRun[*embedded.Server](t, "embedded")}
	_, _, err := r.resolve()
	if err == nil {
		t.Fatal("resolve found a server")
	}
	for _, want := range []string{"$CI forbids the embedded fallback", addrOf(local), errNoDocker.Error()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	t.Log(err)
}

// On a machine without a Docker engine the Docker step must fail fast.
func TestStartDockerWithoutEngine(t *testing.T) {
	start := time.Now()
	s, stop, err := startDocker()
	if err == nil {
		// An engine answered: clean up and say so; the path is not under test.
		t.Logf("docker engine present: %s", s.Name)
		if err := stop(); err != nil {
			t.Fatalf("purge: %v", err)
		}
		return
	}
	t.Logf("startDocker: %v after %v", err, time.Since(start))
	// contract: without an engine the Docker step fails fast: within its
	// probe's timeout (ProbeTimeout), doubled for slack.
	if d := time.Since(start); d > 2*ProbeTimeout {
		t.Fatalf("startDocker took %v to fail", d)
	}
}

// A DSN that points at a go-mysql-server someone else runs is classified as
// Embedded (RequireReal skips on it), and testdb does not stop it.
func TestResolveEnvDSNToGoMySQLServer(t *testing.T) {
	e, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := resolver{getenv: fakeEnv(EnvDSN, e.DSN()), localDSN: closedDSN(t), docker: noDocker,
		embedded: mustNotRun[*embedded.Server](t, "embedded")}
	s, stop, err := r.resolve()
	if err != nil || stop != nil {
		t.Fatalf("resolve: %v, stop %v", err, stop != nil)
	}
	if s.Real() || s.Flavor != flavor.Embedded || s.why == "" {
		t.Fatalf("resolve = %+v", s)
	}
	t.Log(s.Name, "--", s.why)
}
