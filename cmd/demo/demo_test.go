package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/embedded"
	"github.com/namedlock/mysql/internal/testdb"
)

// TestMain doubles as the child process of -procs tests: os.Executable is
// the test binary there, started with childEnv set.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childMain(spec, os.Stdin, os.Stdout))
	}
	testdb.Main(m)
}

// smallConfig is a story small enough for -race, with tables and a lock key
// of its own so that tests never collide with each other or a real run.
func smallConfig(t *testing.T) Config {
	prefix := strings.ReplaceAll(testdb.UniqueName(t), "-", "_")
	if len(prefix) > 38 {
		prefix = "t" + prefix[len(prefix)-37:] // keep the counter and pid
	}
	return Config{
		Instances: 3,
		Workers:   4,
		Orders:    60,
		Stock:     20,
		Think:     2 * time.Millisecond,
		Prefix:    prefix + "_",
	}
}

// playRounds runs every round of cfg on dsn and checks each result.
func playRounds(t *testing.T, dsn string, real bool, cfg Config, procs int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := newDemo(ctx, dsn, cfg, procs)
	if err != nil {
		t.Fatalf("newDemo: %v", err)
	}
	defer func() {
		if err := d.close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	for _, mode := range []Mode{NoLock, LockDo, LockDoTx} {
		var done atomic.Int64
		r, err := d.round(ctx, mode, &done)
		if err != nil {
			t.Fatalf("round %v: %v", mode, err)
		}
		t.Logf("%-6v tried %d accepted %d rejected %d failed %d recorded %d final %d oversold %d lost updates %d lost rows %d waits %d in %v",
			mode, r.Tried, r.Accepted, r.Rejected, r.Failed, r.Recorded, r.Final, r.Oversold(), r.LostUpdates(), r.LostRows(), len(r.Waits), r.Elapsed)
		checkResult(t, r, cfg, real)
		if got := done.Load(); got != int64(cfg.Orders) {
			t.Errorf("%v: progress counted %d orders, want %d", mode, got, cfg.Orders)
		}
	}
}

// checkResult checks what holds for every round, and exactness for the
// locked ones. The no-lock round is only checked for honest accounting: with
// small numbers it may by chance be right.
func checkResult(t *testing.T, r Result, cfg Config, real bool) {
	t.Helper()
	if r.Tried != cfg.Orders || r.Initial != cfg.Stock {
		t.Errorf("%v: tried %d of %d orders, initial stock %d of %d", r.Mode, r.Tried, cfg.Orders, r.Initial, cfg.Stock)
	}
	if !r.AddsUp() || r.Failed != 0 {
		t.Errorf("%v: %d tried != %d accepted + %d rejected + %d failed, errors %q", r.Mode, r.Tried, r.Accepted, r.Rejected, r.Failed, r.Errors)
	}
	if r.LostUpdates() != r.Accepted-(r.Initial-r.Final) || r.Oversold() != max(r.Accepted-r.Initial, 0) {
		t.Errorf("%v: lost updates %d / oversold %d do not follow from accepted %d, initial %d, final %d",
			r.Mode, r.LostUpdates(), r.Oversold(), r.Accepted, r.Initial, r.Final)
	}
	if r.Final < 0 || r.Final > r.Initial {
		t.Errorf("%v: final stock %d outside 0..%d: every write is a positive stock read minus one", r.Mode, r.Final, r.Initial)
	}
	switch {
	case real && r.Recorded != r.Accepted:
		t.Errorf("%v: %d order rows recorded, %d accepted", r.Mode, r.Recorded, r.Accepted)
	case r.Recorded > r.Accepted:
		t.Errorf("%v: %d order rows recorded, more than the %d accepted", r.Mode, r.Recorded, r.Accepted)
	}
	if !r.Mode.Locked() {
		if r.Accepted < min(cfg.Orders, cfg.Stock) {
			t.Errorf("%v: only %d accepted: without a lock at least the stock sells", r.Mode, r.Accepted)
		}
		if len(r.Waits) != 0 {
			t.Errorf("%v: %d lock waits in the no-lock round", r.Mode, len(r.Waits))
		}
		return
	}
	if !r.Exact() || r.Accepted != cfg.Stock || r.Final != 0 || r.Recorded != cfg.Stock {
		t.Errorf("%v: not exact: accepted %d, recorded %d, final %d, oversold %d, lost updates %d (stock %d)",
			r.Mode, r.Accepted, r.Recorded, r.Final, r.Oversold(), r.LostUpdates(), cfg.Stock)
	}
	if len(r.Waits) != cfg.Orders {
		t.Errorf("%v: %d lock waits observed for %d orders", r.Mode, len(r.Waits), cfg.Orders)
	}
	if _, ok := r.Percentile(99); !ok {
		t.Errorf("%v: no p99", r.Mode)
	}
}

func TestRoundsOnTestServer(t *testing.T) {
	s := testdb.Get(t)
	playRounds(t, s.DSN, s.Real(), smallConfig(t), 0)
}

func TestRoundsOnTestServerInChildProcesses(t *testing.T) {
	s := testdb.Get(t)
	playRounds(t, s.DSN, s.Real(), smallConfig(t), 2)
}

// startEmbedded starts a server of the test's own, stopped at its end.
func startEmbedded(t *testing.T) *embedded.Server {
	t.Helper()
	s, err := embedded.Start()
	if err != nil {
		t.Fatalf("embedded.Start: %v", err)
	}
	t.Cleanup(func() {
		time.Sleep(closeGrace)
		if err := s.Close(); err != nil {
			t.Errorf("embedded Close: %v", err)
		}
	})
	return s
}

func TestRoundsOnEmbeddedServer(t *testing.T) {
	s := startEmbedded(t)
	playRounds(t, s.DSN(), false, smallConfig(t), 0)
}

func TestRoundsOnEmbeddedServerInChildProcesses(t *testing.T) {
	s := startEmbedded(t)
	playRounds(t, s.DSN(), false, smallConfig(t), 2)
}

// TestRunWithoutDSN runs the command as a newcomer would, with the embedded
// server, and reads its output.
func TestRunWithoutDSN(t *testing.T) {
	t.Setenv("MYSQL_DSN", "")
	cfg := smallConfig(t)
	var out, errOut bytes.Buffer
	code := run([]string{"-orders", "40", "-stock", "10", "-think", "1ms", "-instances", "2", "-workers", "3",
		"-table-prefix", cfg.Prefix}, &out, &errOut)
	t.Logf("stdout:\n%s\nstderr:\n%s", &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit status %d, want %d", code, exitOK)
	}
	for _, want := range []string{
		"no -dsn given: started an embedded MySQL-compatible server (go-mysql-server) on 127.0.0.1:",
		"orders tried", "lock wait p50", "1 no lock", "2 Do", "3 DoTx", "exact",
		"Round 4 (a scheduled job, schedlock's lease table) needs a real server",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestSchedRound runs the scheduled-job round: without the lock the job runs
// on every instance at every tick; with schedlock.Run once per tick. The
// latter needs a real server (the embedded one loses concurrent writes to
// the lease row), so on the embedded server it is only logged.
func TestSchedRound(t *testing.T) {
	s := testdb.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := smallConfig(t)
	cfg.Instances = 1
	d, err := newDemo(ctx, s.DSN, cfg, 0)
	if err != nil {
		t.Fatalf("newDemo: %v", err)
	}
	defer func() {
		if err := d.close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	for _, locked := range []bool{false, true} {
		var firings atomic.Int64
		r, err := d.schedRound(ctx, s.DSN, locked, &firings)
		if err != nil {
			t.Fatalf("schedRound(locked=%v): %v", locked, err)
		}
		t.Logf("locked=%v: runs per tick %v, %d failed %q, %v; slowest firing returned %v after its tick's start (slack %v)",
			locked, r.Runs, r.Failed, r.Errors, r.Elapsed, r.Slowest, schedSlack)
		if firings.Load() != schedInstances*schedTicks || len(r.Runs) != schedTicks {
			t.Errorf("locked=%v: %d firings, %d ticks", locked, firings.Load(), len(r.Runs))
		}
		switch {
		case !locked:
			for tick, n := range r.Runs {
				if n != schedInstances {
					t.Errorf("no lock: tick %d ran %d times, want %d", tick, n, schedInstances)
				}
			}
		case s.Real() && !r.Exact() && r.Failed == 0 && !r.InSlack():
			// Outside the premise: the lease cannot give one run per
			// tick to a firing this slow (see schedSlack).
			t.Logf("schedlock.Run: runs per tick %v: a firing returned %v after its tick's start, past the slack %v; not the lock's failure",
				r.Runs, r.Slowest, schedSlack)
		case s.Real() && !r.Exact():
			t.Errorf("schedlock.Run: runs per tick %v, %d failed %q, every firing within the slack (slowest %v of %v); want once per tick",
				r.Runs, r.Failed, r.Errors, r.Slowest, schedSlack)
		case !r.Exact():
			t.Logf("schedlock.Run on the embedded server was not exact, as expected there")
		}
	}
}

func TestRunUnreachableServerHidesPassword(t *testing.T) {
	for _, tc := range []struct{ dsn, pw, want string }{
		{"root:secret@tcp(127.0.0.1:1)/test", "secret", `demo: pool: tcp 127.0.0.1:1 as "root": cannot reach the server: connect: connection refused` + "\n"},
		{"root:secret@tcp(127.0.0.1:1/test", "secret", "demo: pool: invalid DSN: the address has no closing ')'"},
		{"mysql://root:secret@127.0.0.1:1/test", "secret", "demo: pool: invalid DSN: a URL (scheme://…) is not accepted; expected the go-sql-driver format"},
		// A one-letter password: the message is whole, not scrubbed.
		{"root:t@tcp(127.0.0.1:1)/test", "t", `demo: pool: tcp 127.0.0.1:1 as "root": cannot reach the server: connect: connection refused` + "\n"},
	} {
		var out, errOut bytes.Buffer
		code := run([]string{"-dsn", tc.dsn}, &out, &errOut)
		all := out.String() + errOut.String()
		t.Logf("%q: exit %d: %s", tc.dsn, code, all)
		if code != exitServer {
			t.Errorf("%q: exit status %d, want %d", tc.dsn, code, exitServer)
		}
		if len(tc.pw) > 1 && strings.Contains(all, tc.pw) {
			t.Errorf("%q: output shows the password: %s", tc.dsn, all)
		}
		if !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%q: stderr %q lacks %q", tc.dsn, &errOut, tc.want)
		}
	}
}

func TestHelpDoesNotShowTheEnvironmentDSN(t *testing.T) {
	t.Setenv("MYSQL_DSN", "root:secret@tcp(127.0.0.1:3306)/test")
	var out, errOut bytes.Buffer
	if code := run([]string{"-h"}, &out, &errOut); code != exitOK {
		t.Errorf("-h: exit status %d", code)
	}
	help := errOut.String()
	if strings.Contains(help, "secret") {
		t.Errorf("-h shows the password:\n%s", help)
	}
	for _, flag := range []string{"-dsn", "-instances", "-workers", "-orders", "-stock", "-think", "-procs", "-rounds", "-table-prefix", "Exit status",
		"The first \"go run ./cmd/demo\" compiles for", "-tags noembedded"} {
		if !strings.Contains(help, flag) {
			t.Errorf("-h does not document %s", flag)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-orders", "0"}, {"-instances", "0"}, {"-stock", "-1"}, {"-procs", "-1"},
		{"-rounds", "fast"}, {"-table-prefix", "x;drop"}, {"extra"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != exitUsage {
			t.Errorf("%q: exit status %d, want %d (%s)", args, code, exitUsage, &errOut)
		}
	}
	for _, tc := range []struct {
		args      []string
		instances int
		story     string
	}{
		{nil, 4, "4 instances in this process"},
		{[]string{"-procs", "3"}, 3, "3 instances, one per child process"},
		{[]string{"-procs", "6"}, 6, "6 instances, one per child process"},
		{[]string{"-procs", "3", "-instances", "5"}, 5, "5 instances in 3 child processes (2+2+1)"},
		{[]string{"-procs", "3", "-instances", "2"}, 3, "3 instances, one per child process"}, // said on stderr
	} {
		o, err := parseFlags(tc.args, &bytes.Buffer{})
		if err != nil || o.cfg.Instances != tc.instances {
			t.Errorf("%q: %v, %d instances; want %d", tc.args, err, o.cfg.Instances, tc.instances)
		}
		if got := placement(o.cfg.Instances, o.procs); got != tc.story {
			t.Errorf("%q: story says %q, want %q", tc.args, got, tc.story)
		}
	}
}

func TestResultArithmetic(t *testing.T) {
	r := Result{Mode: NoLock, Tried: 30, Accepted: 25, Rejected: 5, Recorded: 25, Initial: 10, Final: 4}
	if r.Oversold() != 15 || r.LostUpdates() != 19 || r.LostRows() != 0 || !r.AddsUp() || r.Exact() {
		t.Errorf("oversold %d, lost updates %d, lost rows %d, adds up %v, exact %v", r.Oversold(), r.LostUpdates(), r.LostRows(), r.AddsUp(), r.Exact())
	}
	r = Result{Mode: LockDo, Tried: 30, Accepted: 10, Rejected: 20, Recorded: 10, Initial: 10, Final: 0}
	if !r.Exact() || verdict(r) != "exact" {
		t.Errorf("exact round: Exact %v, verdict %q", r.Exact(), verdict(r))
	}
	r.Final = -2
	if r.Oversold() != 2 || r.Exact() {
		t.Errorf("negative stock: oversold %d, exact %v", r.Oversold(), r.Exact())
	}
	r = Result{Mode: LockDo, Tried: 30, Accepted: 9, Rejected: 21, Recorded: 9, Initial: 10, Final: 1}
	if r.Exact() {
		t.Error("a round that turned orders away with stock left is exact")
	}

	r = newResult(LockDo, 0, tally{WaitsUS: []int64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}})
	if p, _ := r.Percentile(50); p != 5*time.Microsecond {
		t.Errorf("p50 = %v", p)
	}
	if p, _ := r.Percentile(99); p != 10*time.Microsecond {
		t.Errorf("p99 = %v", p)
	}
	if _, ok := (Result{}).Percentile(50); ok {
		t.Error("percentile of no waits")
	}
}

func TestConcludeFailsAnInexactLockedRound(t *testing.T) {
	tgt := &target{}
	good := Result{Mode: LockDo, Tried: 3, Accepted: 2, Rejected: 1, Recorded: 2, Initial: 2}
	bad := Result{Mode: LockDoTx, Tried: 3, Accepted: 3, Recorded: 3, Initial: 2, Final: 0, Errors: nil}
	noLock := bad
	noLock.Mode = NoLock
	var out bytes.Buffer
	if got := conclude(&out, tgt, []Result{noLock, good}); got != exitOK {
		t.Errorf("wrong no-lock round, exact locked round: status %d, want 0\n%s", got, &out)
	}
	if got := conclude(&out, tgt, []Result{noLock, good, bad}); got != exitWrong {
		t.Errorf("oversold locked round: status %d, want %d\n%s", got, exitWrong, &out)
	}
	// A failed order's error is shown as it is: errors of the library and
	// the driver never quote the DSN (no scrubbing that a short password
	// would garble: "t" once turned "tcp" into "xxxxxcp").
	const e = "namedlock: lock lost: tcp 127.0.0.1:3306"
	failed := Result{Mode: LockDo, Tried: 3, Accepted: 2, Failed: 1, Recorded: 2, Initial: 2, Errors: []string{e}}
	out.Reset()
	if got := conclude(&out, tgt, []Result{failed}); got != exitWrong || !strings.Contains(out.String(), "round 2 (Do) error: "+e+"\n") {
		t.Errorf("failed order: status %d, output %s", got, &out)
	}
}

func TestSplit(t *testing.T) {
	got := split(10, 3)
	if len(got) != 3 || got[0] != 4 || got[1] != 3 || got[2] != 3 {
		t.Errorf("split(10, 3) = %v", got)
	}
}

func TestTableLayout(t *testing.T) {
	var b bytes.Buffer
	writeResults(&b, []Result{
		{Mode: NoLock, Tried: 600, Accepted: 600, Recorded: 600, Initial: 200, Final: 180, Elapsed: 300 * time.Millisecond},
		{Mode: LockDo, Tried: 600, Accepted: 200, Rejected: 400, Recorded: 200, Initial: 200, Waits: []time.Duration{time.Millisecond}, Elapsed: 3 * time.Second},
	})
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), &b)
	}
	for _, want := range []string{"WRONG: oversold, lost updates", "exact", "1.00ms", "3.00s", "580"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, &b)
		}
	}
}

// TestSchedVerdicts: a locked round that is not once per tick is the lock's
// failure (exit status 1, "WRONG") when every firing returned within
// schedSlack, and the machine's (said so, exit status 0) when one did not.
func TestSchedVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		r      SchedResult
		status int
		table  string
	}{
		{"exact", SchedResult{Locked: true, Runs: []int{1, 1, 1}, Slowest: schedSlack}, exitOK, "exact: once per tick"},
		{"skipped tick within the slack", SchedResult{Locked: true, Runs: []int{1, 1, 0}, Slowest: schedSlack}, exitWrong, "WRONG: not once per tick"},
		{"run twice within the slack", SchedResult{Locked: true, Runs: []int{2, 1, 1}, Slowest: 10 * time.Millisecond}, exitWrong, "WRONG: not once per tick"},
		{"skipped tick past the slack", SchedResult{Locked: true, Runs: []int{1, 1, 0}, Slowest: schedSlack + time.Millisecond}, exitOK, "machine too busy"},
		{"a failed run past the slack", SchedResult{Locked: true, Runs: []int{1, 1, 0}, Failed: 1, Errors: []string{"boom"}, Slowest: time.Second}, exitWrong, "WRONG: not once per tick, 1 failed"},
	} {
		var out, table bytes.Buffer
		status := concludeSched(&out, &target{}, []SchedResult{tc.r})
		writeSchedResults(&table, []SchedResult{tc.r})
		t.Logf("%s: exit %d\n%s%s", tc.name, status, &table, &out)
		if status != tc.status {
			t.Errorf("%s: exit status %d, want %d", tc.name, status, tc.status)
		}
		if !strings.Contains(table.String(), tc.table) {
			t.Errorf("%s: the table says %q, want %q in it", tc.name, &table, tc.table)
		}
	}
}
