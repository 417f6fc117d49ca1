package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Bounds on waiting for a server.
const (
	// ReadyTimeout bounds how long Start and Restart wait for the server to
	// accept a connection.
	ReadyTimeout = 20 * time.Second
	// StopTimeout bounds how long Stop waits for a clean shutdown before it
	// kills the server.
	StopTimeout = 30 * time.Second
)

// logFileSizeArg shrinks the redo log from 96 MiB: a datadir then takes
// about 26 MB instead of 115 MB.
const logFileSizeArg = "--innodb-log-file-size=8M"

// maxSocketPath keeps the server's unix socket path within the kernel's
// limit (108 bytes with the terminating NUL).
const maxSocketPath = 100

// Option configures Start.
type Option func(*options)

type options struct {
	args []string
}

// WithArgs adds arguments to mariadbd's command line, after the defaults so
// that they override them, e.g. WithArgs("--wait-timeout=2").
func WithArgs(args ...string) Option {
	return func(o *options) { o.args = append(o.args, args...) }
}

// Server is a private, throw-away mariadbd: its own datadir under the test's
// TempDir, its own port on 127.0.0.1, root without a password, database
// "test". Its methods are meant for the test goroutine that started it.
type Server struct {
	bin     string
	datadir string
	socket  string
	errLog  string // the server's stdout and stderr, appended across restarts
	port    int
	args    []string

	mu   sync.Mutex
	proc *process // nil while not running
}

// DSN returns "root@tcp(127.0.0.1:PORT)/test".
func (s *Server) DSN() string { return "root@tcp(" + s.Addr() + ")/test" }

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's TCP port, the same across restarts.
func (s *Server) Port() int { return s.port }

// Start installs a datadir under tb.TempDir() (a copy of one installed once
// per test binary), starts mariadbd on a free port of 127.0.0.1 with the
// socket in the datadir, binary logging off and a 16 MiB buffer pool, waits
// until it accepts connections (at most ReadyTimeout), and creates database
// "test". The server is killed in tb.Cleanup; its process also dies with the
// test binary. When the binaries are missing Start skips the test, or fails
// it when $CI is non-empty.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	serverBin, installBin, err := binaries()
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("mariadbtest: %v (CI is set, so this is not skipped)", err)
		}
		tb.Skipf("mariadbtest: %v", err)
	}

	dir := tb.TempDir()
	s := &Server{
		bin:     serverBin,
		datadir: filepath.Join(dir, "data"),
		errLog:  filepath.Join(dir, "data", "mariadbd.err"),
		args:    o.args,
	}
	s.socket = filepath.Join(s.datadir, "mariadbd.sock")
	if len(s.socket) > maxSocketPath {
		short, err := os.MkdirTemp("", "mdb")
		if err != nil {
			tb.Fatalf("mariadbtest: %v", err)
		}
		tb.Cleanup(func() { _ = os.RemoveAll(short) })
		s.socket = filepath.Join(short, "sock")
	}

	tmplDir, err := template(installBin)
	if err != nil {
		tb.Fatalf("mariadbtest: install a datadir: %v", err)
	}
	if err := copyDir(tmplDir, s.datadir); err != nil {
		tb.Fatalf("mariadbtest: copy the datadir: %v", err)
	}
	tb.Cleanup(func() { s.kill() })

	// A free port can be taken by someone else before mariadbd binds it:
	// then try another.
	for attempt := 1; ; attempt++ {
		if s.port, err = freePort(); err != nil {
			tb.Fatalf("mariadbtest: %v", err)
		}
		err = s.launch()
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(s.logTail(20), "Address already in use") {
			tb.Fatalf("mariadbtest: start: %v\n%s", err, s.logTail(30))
		}
	}
	if err := s.exec("CREATE DATABASE IF NOT EXISTS test"); err != nil {
		tb.Fatalf("mariadbtest: create database test: %v\n%s", err, s.logTail(30))
	}
	return s
}

// Kill9 kills the server with SIGKILL, as a crash would, and waits until it
// is gone. Its sessions vanish without closing their sockets' server side
// cleanly; their locks are gone with it.
func (s *Server) Kill9(tb testing.TB) {
	tb.Helper()
	p := s.take(tb)
	if err := p.kill(); err != nil {
		tb.Fatalf("mariadbtest: kill: %v\n%s", err, s.logTail(30))
	}
}

// Stop shuts the server down cleanly (SIGTERM) and waits until it is gone,
// killing it after StopTimeout.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	p := s.take(tb)
	if err := p.stop(StopTimeout); err != nil {
		tb.Fatalf("mariadbtest: stop: %v\n%s", err, s.logTail(30))
	}
}

// Restart starts the server again on the same port and datadir (after a
// clean Stop if it is still running) and waits until it accepts connections.
// After Kill9 that includes InnoDB's crash recovery.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	running := s.proc != nil
	s.mu.Unlock()
	if running {
		s.Stop(tb)
	}
	if err := s.launch(); err != nil {
		tb.Fatalf("mariadbtest: restart on %s: %v\n%s", s.Addr(), err, s.logTail(30))
	}
}

// take returns the running process and forgets it; the test fails if the
// server is not running.
func (s *Server) take(tb testing.TB) *process {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		tb.Fatalf("mariadbtest: server on %s is not running", s.Addr())
	}
	s.proc = nil
	return p
}

// kill kills the server, if running, and waits for it: the cleanup.
func (s *Server) kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		_ = p.kill()
	}
}

// launch starts mariadbd and waits until it accepts a connection; on failure
// the process is gone.
func (s *Server) launch() error {
	p, err := spawn(s.bin, s.serverArgs(), s.errLog)
	if err != nil {
		return err
	}
	if err := waitReady(p, s.Addr(), ReadyTimeout); err != nil {
		_ = p.kill()
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

func (s *Server) serverArgs() []string {
	args := []string{
		"--no-defaults",
		"--datadir=" + s.datadir,
		"--port=" + strconv.Itoa(s.port),
		"--bind-address=127.0.0.1",
		"--socket=" + s.socket,
		"--pid-file=" + filepath.Join(s.datadir, "mariadbd.pid"),
		"--skip-log-bin",
		"--innodb-buffer-pool-size=16M",
		logFileSizeArg,
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	return append(args, s.args...)
}

// exec runs one statement on a fresh connection.
func (s *Server) exec(query string) error {
	db, err := sql.Open("mysql", "root@tcp("+s.Addr()+")/")
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, query)
	return err
}

// logTail returns the last n lines the server wrote, for failure messages.
func (s *Server) logTail(n int) string {
	b, err := os.ReadFile(s.errLog)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	return "mariadbd log (" + s.errLog + "), last lines:\n" + tail(string(b), n)
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls addr with a real connection until it is accepted, p exits
// or timeout passes.
func waitReady(p *process, addr string, timeout time.Duration) error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", addr
	cfg.Timeout = time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := connector.Connect(ctx)
		cancel()
		if err == nil {
			return c.Close()
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("not accepting connections on %s after %v: %w", addr, timeout, last)
		}
		select {
		case <-p.done:
			return errors.Join(fmt.Errorf("mariadbd exited before accepting connections on %s", addr), p.err)
		case <-tick.C:
		}
	}
}
