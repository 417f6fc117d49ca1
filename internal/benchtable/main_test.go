package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `goos: linux
cpu: Intel(R) Xeon(R) Processor
BenchmarkHotKey-2           	   15326	     80625 ns/op	        31.47 handoffs/server-lock	     87956 lib-sections/s	         6.091 lib/raw	     14440 raw-sections/s	    1573 B/op	      34 allocs/op
--- BENCH: BenchmarkHotKey-2
    bench_hotkey_test.go:20: server: MariaDB 10.11.19 at 127.0.0.1:3306 (from 127.0.0.1:3306 probe)
BenchmarkHotKey-2           	   15326	     80625 ns/op	        31.47 handoffs/server-lock	     87956 lib-sections/s	         30.5 lib/raw	     14440 raw-sections/s	    1573 B/op	      34 allocs/op
BenchmarkHotKey-2           	   15326	     80625 ns/op	        31.47 handoffs/server-lock	     87956 lib-sections/s	         25 lib/raw	     14440 raw-sections/s	    1573 B/op	      34 allocs/op
BenchmarkUncontended-2      	    9205	    143274 ns/op	     86504 lib-ns/op	         1.05 lib/raw	     56698 raw-ns/op
BenchmarkDistinctKeys-2     	    9799	    130106 ns/op	     12586 lib-sections/s	         0.6374 lib/raw	     19745 raw-sections/s
BenchmarkUncontendedDo      	    9213	    195249 ns/op	    2802 B/op	      56 allocs/op
PASS
`

func TestParseAndTable(t *testing.T) {
	res, header, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if got := res["HotKey"]["lib/raw"]; len(got) != 3 || got[1] != 30.5 {
		t.Errorf("HotKey lib/raw = %v", got)
	}
	if got := res["UncontendedDo"]["allocs/op"]; len(got) != 1 || got[0] != 56 {
		t.Errorf("UncontendedDo allocs/op = %v", got)
	}
	if len(header) != 2 || !strings.HasPrefix(header[1], "server: MariaDB") {
		t.Errorf("header = %q", header)
	}
	var b strings.Builder
	if table(&b, res) {
		t.Errorf("table reports every target met, but DistinctKeys is not")
	}
	out := b.String()
	for _, want := range []string{
		"| 1 key, 16 goroutines, throughput vs raw server queue | >= 20 | 25.00 | 6.09 – 30.50 | 3 | yes |",
		"| uncontended Do, time vs raw floor (alternating) | <= 1.1 | 1.050 | 1.050 – 1.050 | 1 | yes |",
		"| allocations per uncontended Do |  | 56 | 56 – 56 | 1 |  |",
		"| 16 keys, 16 goroutines, throughput vs raw | >= 0.95 | 0.637 | 0.637 – 0.637 | 1 | **no** |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 2, 3}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// rawRun is a raw output file as scripts/perf.sh writes it.
const rawRun = `date: 2026-01-02T03:04:05Z
go: go1.26.0 linux/amd64
cores: 2
load: 0.50 0.40 0.30 (1, 5, 15 min, when the run began)
command: MYSQL_TEST_DSN='root@tcp(127.0.0.1:3306)/test' BENCH=UseCaseHotKey ./bench.sh
goos: linux
goarch: amd64
pkg: github.com/namedlock/mysql/namedlock
cpu: Some CPU
BenchmarkUseCaseHotKey-2   	     141	  23845204 ns/op	      1697 ceiling-sections/s	         2.949 ceiling/forupdate-med	       875.3 forupdate-sections/s	         0.70 fenced-dotx/forupdate-med	         1.25 batch/forupdate-med	   24766 B/op	     565 allocs/op
--- BENCH: BenchmarkUseCaseHotKey-2
    bench_usecase_test.go:98: server: MariaDB 10.11.19 at 127.0.0.1:3306 (from $MYSQL_TEST_DSN)
BenchmarkUseCaseHotKey-2   	     141	  23845204 ns/op	      1797 ceiling-sections/s	         3.049 ceiling/forupdate-med	       975.3 forupdate-sections/s	         0.80 fenced-dotx/forupdate-med	         1.35 batch/forupdate-med	   24766 B/op	     565 allocs/op
BenchmarkUseCaseHotKey-2   	     141	  23845204 ns/op	      1897 ceiling-sections/s	         3.149 ceiling/forupdate-med	       775.3 forupdate-sections/s	         0.75 fenced-dotx/forupdate-med	         1.30 batch/forupdate-med	   24766 B/op	     565 allocs/op
PASS
`

func writeRaw(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// docFor reads files and returns their page.
func docFor(files []string) (string, error) {
	runs, err := readRuns(files)
	if err != nil {
		return "", err
	}
	return performanceDoc(runs), nil
}

func TestPerformanceDoc(t *testing.T) {
	dir := t.TempDir()
	a := writeRaw(t, dir, "bench-mariadb.txt", rawRun)
	b := writeRaw(t, dir, "bench-mysql.txt", strings.ReplaceAll(strings.ReplaceAll(rawRun, "MariaDB 10.11.19", "MySQL 9.7.4"), "0.70 fenced", "0.60 fenced"))
	page, err := docFor([]string{b, a}) // any order: the page is sorted by label
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Do not edit",
		"| run | MariaDB 10.11.19 (mariadb) | MySQL 9.7.4 (mysql) |",
		"| command | `MYSQL_TEST_DSN='root@tcp(127.0.0.1:3306)/test' BENCH=UseCaseHotKey ./bench.sh` |",
		"| date (UTC) | 2026-01-02T03:04:05Z | 2026-01-02T03:04:05Z |",
		"| machine | Some CPU, 2 cores, linux/amd64 |",
		"| Go | go1.26.0 linux/amd64 |",
		"| load average when the run began | 0.50 0.40 0.30 (1, 5, 15 min, when the run began) |",
		"## BenchmarkUseCaseHotKey",
		"| fenced `DoTx` vs `SELECT … FOR UPDATE`, median of rounds | 0.75 (0.70–0.80, 3 runs) | 0.75 (0.60–0.80, 3 runs) |",
		// A contender the generator does not know still gets its row.
		"| `batch` vs `SELECT … FOR UPDATE`, median of rounds | 1.30 (1.25–1.35, 3 runs) |",
		"| `SELECT … FOR UPDATE`: sections/s | 875 (775–975, 3 runs) |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "allocs/op") {
		t.Errorf("page shows allocs/op of a use-case benchmark (all contenders together):\n%s", page)
	}
	// Known contenders come before unknown ones: fenced DoTx's row before batch's.
	if i, j := strings.Index(page, "| fenced `DoTx` vs"), strings.Index(page, "| `batch` vs"); i < 0 || j < 0 || i > j {
		t.Errorf("rows out of order (fenced DoTx at %d, batch at %d)", i, j)
	}
	again, err := docFor([]string{a, b})
	if err != nil || again != page {
		t.Errorf("the page depends on the order of its inputs (err %v)", err)
	}
}

func TestPerformanceDocRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"bench-nostamp.txt":  strings.SplitN(rawRun, "goos:", 2)[1], // no date/go/cores/command lines
		"bench-noserver.txt": strings.ReplaceAll(rawRun, "server: ", "srv "),
		"bench-empty.txt":    strings.Split(rawRun, "Benchmark")[0],
		"other.txt":          rawRun,
	} {
		p := writeRaw(t, dir, name, content)
		if _, err := docFor([]string{p}); err == nil {
			t.Errorf("%s: performanceDoc accepted it", name)
		}
	}
}

// TestPerformanceDocIsGenerated fails when docs/performance.md is not
// exactly what the generator makes of docs/perf/bench-*.txt: when it was
// edited by hand, when the raw output changed without it, or when the
// generator no longer runs. It runs the command as scripts/perf.sh does.
func TestPerformanceDocIsGenerated(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "perf", "bench-*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no docs/perf/bench-*.txt: docs/performance.md must be generated from committed raw output (scripts/perf.sh run)")
	}
	out := filepath.Join(t.TempDir(), "performance.md")
	var stderr strings.Builder
	if status := run(append([]string{"-doc", "-o", out}, files...), strings.NewReader(""), io.Discard, &stderr); status != 0 {
		t.Fatalf("the generator failed (status %d): %s", status, stderr.String())
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "docs", "performance.md"))
	if err != nil {
		t.Fatalf("docs/performance.md: %v (generate it: scripts/perf.sh)", err)
	}
	if string(got) != string(want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
			line++
		}
		at := func(ls []string) string {
			if line < len(ls) {
				return ls[line]
			}
			return "(end of file)"
		}
		t.Errorf("docs/performance.md is not what the generator makes of docs/perf/ (it is never edited by hand): run scripts/perf.sh and commit the result.\nfirst difference at line %d:\n\tcommitted: %s\n\tgenerated: %s", line+1, at(gl), at(wl))
	}
}

func TestHeadline(t *testing.T) {
	dir := t.TempDir()
	a := writeRaw(t, dir, "bench-mariadb.txt", rawRun)
	b := writeRaw(t, dir, "bench-mysql.txt", strings.ReplaceAll(rawRun, "MariaDB 10.11.19", "MySQL 9.7.4"))
	runs, err := readRuns([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	h := headline(runs)
	for _, want := range []string{
		"| one hot key, 16 callers | MariaDB 10.11.19 | MySQL 9.7.4 |",
		"| `SELECT … FOR UPDATE`, sections/s | 875 | 875 |",
		"| fenced `DoTx`, × `FOR UPDATE` | 0.75 | 0.75 |",
		"| `batch`, × `FOR UPDATE` | 1.30 | 1.30 |",
		"Medians of 3 runs (`-count`); MariaDB 10.11.19: `MYSQL_TEST_DSN='root@tcp(127.0.0.1:3306)/test' BENCH=UseCaseHotKey ./bench.sh` (2026-01-02T03:04:05Z, load 0.50)",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("headline lacks %q:\n%s", want, h)
		}
	}
	readme := "# x\n\nbefore\n\n" + headlineBegin + "\nold\n" + headlineEnd + "\n\nafter\n"
	got, err := replaceHeadline(readme, h)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# x\n\nbefore\n\n" + h + "\nafter\n"; got != want {
		t.Errorf("replaceHeadline = %q, want %q", got, want)
	}
	if again, _ := replaceHeadline(got, h); again != got {
		t.Errorf("replaceHeadline is not idempotent")
	}
	if _, err := replaceHeadline("no markers", h); err == nil {
		t.Errorf("replaceHeadline accepted a README without markers")
	}
}

// TestREADMEHeadlineIsGenerated fails when the README's headline figures
// are not what the generator makes of docs/perf/ (scripts/perf.sh writes
// them with docs/performance.md).
func TestREADMEHeadlineIsGenerated(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "perf", "bench-*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/perf/bench-*.txt (%v)", err)
	}
	runs, err := readRuns(files)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := replaceHeadline(string(readme), headline(runs))
	if err != nil {
		t.Fatal(err)
	}
	if string(readme) != want {
		t.Errorf("README.md's headline figures are not what the generator makes of docs/perf/ (never edit them by hand): run scripts/perf.sh and commit the result; they should read:\n%s", headline(runs))
	}
}

func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{{"-doc"}, {"extra"}, {"-nosuchflag"}} {
		if status := run(args, strings.NewReader(""), io.Discard, io.Discard); status != 2 {
			t.Errorf("run(%q) = %d, want 2", args, status)
		}
	}
	var out strings.Builder
	if status := run(nil, strings.NewReader(sample), &out, io.Discard); status != 0 || !strings.Contains(out.String(), "| measure | target |") {
		t.Errorf("run on standard input: status %d, output %q", status, out.String())
	}
}
