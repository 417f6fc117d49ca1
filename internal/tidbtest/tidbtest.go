package tidbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// EnvCache names the environment variable that overrides the cache
// directory where scripts/tidb.sh keeps tidb-server.
const EnvCache = "NAMEDLOCK_TIDB_CACHE"

// ReadyTimeout bounds how long Start waits for the server to answer.
const ReadyTimeout = 60 * time.Second

// Binary returns the path of the cached tidb-server, or an error saying
// that it is missing and how to build it.
func Binary() (string, error) {
	dir := os.Getenv(EnvCache)
	if dir == "" {
		if os.Geteuid() == 0 {
			dir = "/root/.cache/namedlock-tidb"
		} else if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".cache", "namedlock-tidb")
		}
	}
	bin := filepath.Join(dir, "tidb-server")
	if fi, err := os.Stat(bin); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("no tidb-server at %s: build it once with scripts/tidb.sh build (about 21 min on 2 cores)", bin)
	}
	return bin, nil
}

// Server is a private tidb-server.
type Server struct {
	port int
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
}

// DSN returns a go-sql-driver DSN for the server: root, database test.
func (s *Server) DSN() string { return "root@tcp(" + s.Addr() + ")/test" }

// Addr returns the server's address, 127.0.0.1:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start starts a private TiDB with the TOML configuration config (e.g.
// "[performance]\nmax-txn-ttl = 5000"; "" for the defaults), waits until
// it answers, and stops it at the end of the test. Without the cached
// binary it skips the test, saying why.
func Start(tb testing.TB, config string) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		tb.Skipf("tidbtest: %v", err)
	}
	dir := tb.TempDir()
	cfgPath := filepath.Join(dir, "tidb.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	status, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	logPath := filepath.Join(dir, "tidb.log")
	out, err := os.Create(filepath.Join(dir, "tidb.out"))
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close() // the child has its own descriptor
	// -path "": unistore in memory (the default path is a directory in /tmp).
	cmd := exec.Command(bin, "-store", "unistore", "-path", "", "-host", "127.0.0.1",
		"-P", strconv.Itoa(port), "-status", strconv.Itoa(status), "-status-host", "127.0.0.1",
		"-config", cfgPath, "--log-file", logPath)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = dir // where it writes tidb-slow.log
	// The kernel kills the server if the test binary dies first.
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("tidbtest: start %s: %v", bin, err)
	}
	s := &Server{port: port, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	tb.Cleanup(s.stop)
	if err := s.waitReady(); err != nil {
		tb.Fatalf("tidbtest: %v (log %s)", err, logPath)
	}
	return s
}

// stop ends the server: SIGTERM, then SIGKILL after 10 s.
func (s *Server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-s.done:
		return
	case <-t.C:
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// waitReady polls the server until it answers a query, exits, or
// ReadyTimeout passes.
func (s *Server) waitReady() error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", s.Addr()
	cfg.Timeout = time.Second
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	deadline := time.Now().Add(ReadyTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS test")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering on %s after %v: %w", s.Addr(), ReadyTimeout, err)
		}
		select {
		case <-s.done:
			return errors.New("tidb-server exited before answering")
		case <-tick.C:
		}
	}
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
