package namedlock_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/lockconn"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
)

// driverLogChild is set in the environment of the test binary that
// TestNoDriverLogOnLostLock runs as a child process.
const driverLogChild = "NAMEDLOCK_TEST_DRIVER_LOG_CHILD"

// TestNoDriverLogOnLostLock: a holder whose session is KILLed from another
// connection — found by the keep-alive, by Release, and under Do — is told
// ErrLockLost, and the driver writes nothing to the process's stderr
// (before, each loss printed "[mysql] … packets.go:58 unexpected EOF"
// there): pool.Open gives its driver a log of its own. The scenario runs in
// a child process (this test binary again), whose stderr is read whole; the
// child also checks that the driver did log the broken connections, to the
// pool's log, so that the silence is not for want of a broken connection.
func TestNoDriverLogOnLostLock(t *testing.T) {
	if os.Getenv(driverLogChild) == "1" {
		lostLocksQuietly(t)
		return
	}
	testdb.RequireReal(t)
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoDriverLogOnLostLock$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), driverLogChild+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("child's output:\n%s", stdout.String())
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "[mysql]") || strings.Contains(line, "packets.go") {
			t.Errorf("the driver wrote to stderr: %s", line)
		}
	}
	if err != nil || !strings.Contains(stdout.String(), "--- PASS: TestNoDriverLogOnLostLock") {
		t.Errorf("child process: %v; stderr:\n%s", err, stderr.String())
	}
}

// lostLocksQuietly is the child's part of TestNoDriverLogOnLostLock.
func lostLocksQuietly(t *testing.T) {
	srv := testdb.RequireReal(t)
	adm := faultAdmin(t, srv.DSN)
	in := newInstance(t, srv.DSN, namedlock.WithKeepAlive(200*time.Millisecond), namedlock.WithCheckTimeout(time.Second))
	slow := newInstance(t, srv.DSN, namedlock.WithKeepAlive(20*time.Second))
	ctx := testCtx(t, time.Minute)
	kill := func(key string) { faultMustKill(t, adm, holderOf(t, adm, keyfmt.Portable(key))) }

	// Found by the keep-alive.
	key := uniqueKey(t, "keepalive")
	k := faultAcquire(t, in.locker, key, 5*time.Second)
	kill(key)
	if _, ok := faultClosedWithin(k.Done(), time.Now(), 10*time.Second); !ok {
		t.Fatal("the keep-alive did not find the KILLed session within 10 s")
	}
	if err := k.Release(ctx); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Release after the keep-alive found the loss = %v, want ErrLockLost", err)
	}

	// Found by Release.
	key = uniqueKey(t, "release")
	k = faultAcquire(t, slow.locker, key, 5*time.Second)
	kill(key)
	if err := k.Release(ctx); !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Release after the KILL = %v, want ErrLockLost", err)
	}

	// Under Do.
	key = uniqueKey(t, "do")
	err := in.locker.Do(ctx, key, func(fctx context.Context) error {
		kill(key)
		<-fctx.Done()
		return fctx.Err()
	})
	if !errors.Is(err, namedlock.ErrLockLost) {
		t.Errorf("Do = %v, want ErrLockLost", err)
	}

	for _, db := range []*instance{in, slow} {
		n, lines := lockconn.Of(db.db).DriverLog().Lines()
		t.Logf("the pool's driver log: %d lines: %q", n, lines)
	}
	nIn, _ := lockconn.Of(in.db).DriverLog().Lines()
	nSlow, _ := lockconn.Of(slow.db).DriverLog().Lines()
	if nIn == 0 || nSlow == 0 {
		t.Errorf("the driver logged %d and %d lines to the pools' logs, want some in each: were the sessions broken?", nIn, nSlow)
	}
}
