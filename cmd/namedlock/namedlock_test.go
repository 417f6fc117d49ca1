package main

import (
	"bytes"
	"context"
	"database/sql"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/namedlock/mysql/internal/mariadbtest"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
)

func leakCheck(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// runCmd runs the command with args and returns its status and output.
func runCmd(t *testing.T, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	status = run(ctx, args, &out, &errOut)
	t.Logf("namedlock %s: status %d\n%s%s", strings.Join(args, " "), status, out.String(), errOut.String())
	return status, out.String(), errOut.String()
}

// holdLock takes the lock named name on a connection of its own pool, as
// another program would, and returns that connection's id.
func holdLock(t *testing.T, dsn, name string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := testdb.OpenDB(t, dsn).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	var got sql.NullInt64
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 5), CONNECTION_ID()", name).Scan(&got, &id); err != nil || got.Int64 != 1 {
		t.Fatalf("GET_LOCK(%q) = %v, %v", name, got, err)
	}
	return id
}

// row returns the table row of stdout that begins with first, split into
// columns.
func row(stdout, first string) []string {
	for line := range strings.Lines(stdout) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return f
		}
	}
	return nil
}

func holderOf(t *testing.T, dsn, name string) int64 {
	t.Helper()
	var id sql.NullInt64
	if err := testdb.OpenDB(t, dsn).QueryRow("SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id.Int64
}

// TestHolders: while another program holds a key, holders prints its
// connection id (as IS_USED_LOCK answers) and session; a key that is not
// portable shows under the name the Locker uses; a free key is not held.
func TestHolders(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	held := keyfmt.Key(testdb.UniqueName(t), "held")
	mapped := "Nightly-Report:" + testdb.UniqueName(t)
	free := keyfmt.Key(testdb.UniqueName(t), "free")
	id := holdLock(t, srv.DSN, keyfmt.Portable(held))
	mappedID := holdLock(t, srv.DSN, keyfmt.Portable(mapped))

	status, stdout, _ := runCmd(t, "holders", "-dsn", srv.DSN, held, mapped, free)
	if status != exitOK {
		t.Fatalf("status %d, want 0", status)
	}
	if !srv.Flavor.NamesHolder() {
		// TiDB: held, by a connection nothing on the server names.
		for _, k := range []string{held, strings.Fields(mapped)[0]} {
			if r := row(stdout, k); len(r) < 4 || r[2] != "yes" || r[3] != "unknown" {
				t.Errorf("%s: row of %s: %q; want held by an unknown connection", srv.Name, k, r)
			}
		}
		if r := row(stdout, free); len(r) < 4 || r[2] != "no" || r[3] != "-" {
			t.Errorf("row of %s: %q; want not held", free, r)
		}
		return
	}
	if r := row(stdout, held); len(r) < 8 || r[1] != held || r[2] != "yes" || r[3] != strconv.FormatInt(id, 10) || r[4] != "root" || r[6] != "Sleep" {
		t.Errorf("row of %s: %q; want held by connection %d, root, Sleep", held, r, id)
	}
	if r := row(stdout, strings.Fields(mapped)[0]); len(r) < 4 || r[1] != keyfmt.Portable(mapped) || r[3] != strconv.FormatInt(mappedID, 10) {
		t.Errorf("row of %s: %q; want its server name %s held by %d", mapped, r, keyfmt.Portable(mapped), mappedID)
	}
	if r := row(stdout, free); len(r) < 4 || r[2] != "no" || r[3] != "-" {
		t.Errorf("row of %s: %q; want not held", free, r)
	}
}

// TestHoldersServerName: holders takes a server name as it is, as list and
// the process list show it: the mapped name of a key that is not portable
// looks up that same lock, not a name mapped again.
func TestHoldersServerName(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	key := "Nightly Report:" + testdb.UniqueName(t)
	name := keyfmt.Portable(key)
	if name == key {
		t.Fatalf("%q is portable; the test needs a key that maps", key)
	}
	id := holdLock(t, srv.DSN, name)
	status, stdout, _ := runCmd(t, "holders", "-dsn", srv.DSN, name)
	if status != exitOK {
		t.Fatalf("status %d, want 0", status)
	}
	r := row(stdout, name)
	if len(r) < 4 || r[1] != name || r[2] != "yes" {
		t.Fatalf("row of %s: %q; want that name, held", name, r)
	}
	if srv.Flavor.NamesHolder() && r[3] != strconv.FormatInt(id, 10) {
		t.Errorf("row of %s: %q; want held by connection %d", name, r, id)
	}
}

// TestHoldersKill: -kill alone shows what it would kill and kills nothing;
// -kill -yes ends the holder's session, which frees the lock.
func TestHoldersKill(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	key := keyfmt.Key(testdb.UniqueName(t), "stuck")
	id := holdLock(t, srv.DSN, key)

	status, stdout, _ := runCmd(t, "holders", "-dsn", srv.DSN, "-kill", key)
	if !srv.Flavor.NamesHolder() {
		// TiDB: nobody to name, so nothing to kill; the holder keeps it.
		if status != exitNotDone || !strings.Contains(stdout, "nothing to kill") {
			t.Errorf("%s: -kill: status %d, output %q; want 1, nothing to kill", srv.Name, status, stdout)
		}
		if got := holderOf(t, srv.DSN, key); got == 0 {
			t.Errorf("after -kill on %s the lock is free, want still held", srv.Name)
		}
		t.Skipf("%s names no holder (IS_USED_LOCK answers 1 to other sessions): -kill -yes cannot be tried", srv.Name)
	}
	if status != exitNotDone || !strings.Contains(stdout, "would kill connection "+strconv.FormatInt(id, 10)) || !strings.Contains(stdout, "-kill -yes") {
		t.Errorf("-kill without -yes: status %d, output %q; want 1, naming connection %d and -kill -yes", status, stdout, id)
	}
	if got := holderOf(t, srv.DSN, key); got != id {
		t.Fatalf("after -kill without -yes the lock is held by %d, want still %d", got, id)
	}
	if status, _, _ := runCmd(t, "holders", "-dsn", srv.DSN, "-yes", key); status != exitUsage {
		t.Errorf("-yes without -kill: status %d, want 2", status)
	}
	if got := holderOf(t, srv.DSN, key); got != id {
		t.Fatalf("after -yes alone the lock is held by %d, want still %d", got, id)
	}

	status, stdout, _ = runCmd(t, "holders", "-dsn", srv.DSN, "-kill", "-yes", key)
	if status != exitOK || !strings.Contains(stdout, "killed connection "+strconv.FormatInt(id, 10)) {
		t.Errorf("-kill -yes: status %d, output %q; want 0, killed connection %d", status, stdout, id)
	}
	deadline := time.Now().Add(5 * time.Second)
	for holderOf(t, srv.DSN, key) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := holderOf(t, srv.DSN, key); got != 0 {
		t.Errorf("after -kill -yes the lock is held by %d", got)
	}
	if status, stdout, _ := runCmd(t, "holders", "-dsn", srv.DSN, "-kill", "-yes", key); status != exitNotDone || !strings.Contains(stdout, "nothing to kill") {
		t.Errorf("-kill -yes of a free key: status %d, %q; want 1, nothing to kill", status, stdout)
	}
}

// TestNeverPrintsPassword: a DSN's password (and the DSN) appear in no
// output, whether the DSN does not parse or the server refuses it; the
// DSN can come from $NAMEDLOCK_DSN.
func TestNeverPrintsPassword(t *testing.T) {
	leakCheck(t)
	const secret = "hunter2-secret"
	for _, c := range []struct {
		dsn    string
		status int
	}{
		{"root:" + secret + "@tcp(127.0.0.1:1)/test", exitServer},  // nothing listens on port 1
		{"root:" + secret + "@tcp(127.0.0.1:3306/test", exitUsage}, // does not parse
		{"root:" + secret + "@/test?badparam=%zz", exitUsage},
	} {
		status, stdout, stderr := runCmd(t, "holders", "-dsn", c.dsn, "k")
		if status != c.status || strings.Contains(stdout+stderr, secret) || stderr == "" {
			t.Errorf("DSN %q: status %d, output %q; want status %d, an error without the password", c.dsn, status, stdout+stderr, c.status)
		}
		t.Setenv(dsnEnv, c.dsn)
		status, stdout, stderr = runCmd(t, "list")
		if status != c.status || strings.Contains(stdout+stderr, secret) {
			t.Errorf("$%s %q: status %d, output %q; want status %d, an error without the password", dsnEnv, c.dsn, status, stdout+stderr, c.status)
		}
	}
}

// TestNeverPrintsPartOfPassword: a password with a '/' in a DSN without
// /dbname (which the driver splits at its last '/', taking the first piece
// of the password for the network) shows no piece of itself, nor does a
// DSN that the driver refuses elsewhere: the command parses the DSN as
// pool.Open does.
func TestNeverPrintsPartOfPassword(t *testing.T) {
	leakCheck(t)
	pieces := []string{"Zx9qA1", "wR7tB2", "Kq3mC4"}
	secret := strings.Join(pieces, "/")
	for _, dsn := range []string{
		"app:" + secret + "@tcp(127.0.0.1:1)",
		"app:" + secret + "@tcp(127.0.0.1:1)?timeout=1s",
		"app:" + secret + "@tcp(127.0.0.1:1",
		"app:" + secret + "@unix(/tmp/nowhere.sock)",
	} {
		status, stdout, stderr := runCmd(t, "holders", "-dsn", dsn, "k")
		out := stdout + stderr
		for _, p := range pieces {
			if strings.Contains(out, p) {
				t.Errorf("DSN with a '/' in the password: status %d, output %q shows the piece %q of the password", status, out, p)
			}
		}
		if status != exitUsage && status != exitServer || stderr == "" {
			t.Errorf("status %d, stderr %q; want an error", status, stderr)
		}
		t.Logf("status %d: %s", status, strings.TrimSpace(stderr))
	}
}

// TestUsage: bad command lines exit 2 and say how to use the command.
func TestUsage(t *testing.T) {
	t.Setenv(dsnEnv, "")
	for _, args := range [][]string{{}, {"lock"}, {"holders", "-dsn", "root@/test"}, {"list", "-dsn", "root@/test", "extra"},
		{"holders", "k"}, {"holders", "-nosuchflag", "k"}} {
		if status, _, stderr := runCmd(t, args...); status != exitUsage || !strings.Contains(stderr, "usage") && !strings.Contains(stderr, "no server") {
			t.Errorf("namedlock %q: status %d, stderr %q; want 2 and a usage", args, status, stderr)
		}
	}
	if status, stdout, _ := runCmd(t, "help"); status != exitOK || !strings.Contains(stdout, "namedlock holders") {
		t.Errorf("help: %d %q", status, stdout)
	}
}

// TestListSharedServer: on the shared server, list either lists a lock
// held there or says exactly which plugin to load.
func TestListSharedServer(t *testing.T) {
	leakCheck(t)
	srv := testdb.RequireReal(t)
	name := keyfmt.Key(testdb.UniqueName(t), "held")
	id := holdLock(t, srv.DSN, name)
	status, stdout, stderr := runCmd(t, "list", "-dsn", srv.DSN, "-prefix", name)
	switch status {
	case exitOK:
		if r := row(stdout, name); len(r) < 3 || r[2] != strconv.FormatInt(id, 10) {
			t.Errorf("list: %q; want %s held by %d", stdout, name, id)
		}
	case exitNotDone:
		if srv.Flavor.String() == "MariaDB" && !strings.Contains(stderr, "INSTALL SONAME 'metadata_lock_info'") {
			t.Errorf("list on MariaDB without the plugin: %q; want how to load it", stderr)
		}
	default:
		t.Errorf("list: status %d", status)
	}
}

// TestListWithPlugin: on a private MariaDB with the metadata_lock_info
// plugin, list shows every user-level lock and its holder; -prefix filters.
func TestListWithPlugin(t *testing.T) {
	leakCheck(t)
	s := mariadbtest.Start(t, mariadbtest.WithArgs("--plugin-load-add=metadata_lock_info"))
	report := holdLock(t, s.DSN(), "report:nightly")
	product := holdLock(t, s.DSN(), "product:42")

	status, stdout, _ := runCmd(t, "list", "-dsn", s.DSN())
	if status != exitOK {
		t.Fatalf("list: status %d", status)
	}
	for name, id := range map[string]int64{"report:nightly": report, "product:42": product} {
		if r := row(stdout, name); len(r) < 4 || r[1] != "yes" || r[2] != strconv.FormatInt(id, 10) || r[3] != "root" {
			t.Errorf("row of %s: %q; want held by %d (root)", name, r, id)
		}
	}
	if !regexp.MustCompile(`(?m)^NAME +HELD +CONNECTION`).MatchString(stdout) {
		t.Errorf("list: no header in %q", stdout)
	}
	status, stdout, _ = runCmd(t, "list", "-dsn", s.DSN(), "-prefix", "report:")
	if status != exitOK || row(stdout, "report:nightly") == nil || row(stdout, "product:42") != nil {
		t.Errorf("list -prefix report: %d %q; want report:nightly alone", status, stdout)
	}
	status, stdout, _ = runCmd(t, "list", "-dsn", s.DSN(), "-prefix", "order:")
	if status != exitOK || !strings.Contains(stdout, `no user-level lock held whose name begins with "order:"`) {
		t.Errorf("list -prefix order: %d %q", status, stdout)
	}
}
