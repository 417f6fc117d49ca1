// Command benchtable reads the output of `go test -bench` for package
// namedlock and writes tables of the measured ratios.
//
// With no arguments it reads standard input and prints a markdown table of
// the ratios against their targets: the median over the -count runs, with
// the range. bench.sh at the repository root runs it that way:
//
//	go test -run '^$' -bench . -count 5 -benchmem ./namedlock/ | go run ./internal/benchtable
//
// With -doc it writes docs/performance.md from raw output files made by
// scripts/perf.sh (docs/perf/bench-LABEL.txt, one per server), each stamped
// with the run's date, Go version, cores, load and command:
//
//	go run ./internal/benchtable -doc -o docs/performance.md docs/perf/bench-*.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// target is one row of the table: a metric of a benchmark and, when the
// metric has a target, the bound it must meet.
type target struct {
	bench  string  // benchmark name without "Benchmark" and the -P suffix
	metric string  // the unit reported by the benchmark
	what   string  // what the row says
	op     string  // "<=", ">=", or "" for a row without a target
	bound  float64 // the target
	format string  // fmt verb for values
}

// targets lists the table's rows, in order.
var targets = []target{
	{"Uncontended", "lib/raw", "uncontended Do, time vs raw floor (alternating)", "<=", 1.10, "%.3f"},
	{"Uncontended", "lib/raw-med", "uncontended Do, median of the pairs' ratios", "", 0, "%.3f"},
	{"Uncontended", "raw-ns/op", "uncontended raw floor, ns per section", "", 0, "%.0f"},
	{"Uncontended", "lib-ns/op", "uncontended Do, ns per section", "", 0, "%.0f"},
	{"HotKey", "lib/raw", "1 key, 16 goroutines, throughput vs raw server queue", ">=", 20, "%.2f"},
	{"HotKey", "lib/raw-med", "1 key, median of the rounds' ratios", "", 0, "%.2f"},
	{"HotKey", "raw-sections/s", "1 key, raw floor, sections/s", "", 0, "%.0f"},
	{"HotKey", "lib-sections/s", "1 key, library, sections/s", "", 0, "%.0f"},
	{"HotKey", "handoffs/server-lock", "1 key, handoffs per server acquisition", "", 0, "%.1f"},
	{"DistinctKeys", "lib/raw", "16 keys, 16 goroutines, throughput vs raw", ">=", 0.95, "%.3f"},
	{"DistinctKeys", "lib/raw-med", "16 keys, median of the rounds' ratios", "", 0, "%.3f"},
	{"TwoInstances", "min-share-%", "2 instances × 8 goroutines, 1 key: smaller share, %", ">=", 35, "%.1f"},
	{"TwoInstances", "lib/raw", "2 instances × 8 goroutines, 1 key: throughput vs raw", "", 0, "%.2f"},
	{"FencedUncontended", "fenced/do", "uncontended fenced Do, time vs Do (alternating)", "", 0, "%.3f"},
	{"FencedUncontended", "fenced/do-med", "uncontended fenced Do vs Do, median of the ratios", "", 0, "%.3f"},
	{"FencedUncontended", "fenced/dotx", "uncontended fenced DoTx, time vs DoTx (alternating)", "", 0, "%.3f"},
	{"FencedUncontended", "fenced/dotx-med", "uncontended fenced DoTx vs DoTx, median of the ratios", "", 0, "%.3f"},
	{"FencedHotKey", "fenced/plain", "1 key, 16 goroutines: fenced Do throughput vs Do", "", 0, "%.2f"},
	{"UncontendedDo", "allocs/op", "allocations per uncontended Do", "", 0, "%.0f"},
	{"UncontendedDo", "B/op", "bytes allocated per uncontended Do", "", 0, "%.0f"},
	{"UncontendedRaw", "allocs/op", "allocations per raw section (database/sql + driver)", "", 0, "%.0f"},
	// The use case: a section that sells one unit (read the stock, write
	// stock − 1, durable commit) on the primary pool; targets on the median
	// of the rounds' ratios.
	{"UseCaseUncontended", "do/raw-med", "sell 1, uncontended: Do vs raw GET_LOCK sequence, median of rounds", ">=", 0.95, "%.3f"},
	{"UseCaseUncontended", "do/raw", "sell 1, uncontended: Do vs raw, whole run", "", 0, "%.3f"},
	{"UseCaseUncontended", "dotx/raw-med", "sell 1, uncontended: DoTx vs raw, median of rounds", "", 0, "%.3f"},
	{"UseCaseUncontended", "fenced-dotx/raw-med", "sell 1, uncontended: fenced DoTx vs raw, median of rounds", "", 0, "%.3f"},
	{"UseCaseUncontended", "serial-dotx/raw-med", "sell 1, uncontended: DoTx at SERIALIZABLE vs raw, median of rounds", "", 0, "%.3f"},
	{"UseCaseUncontended", "forupdate/raw-med", "sell 1, uncontended: SELECT … FOR UPDATE vs raw, median of rounds", "", 0, "%.3f"},
	{"UseCaseUncontended", "ceiling/raw-med", "sell 1, uncontended: one conditional UPDATE vs raw, median of rounds", "", 0, "%.3f"},
	{"UseCaseUncontended", "raw-sections/s", "sell 1, uncontended: raw, sections/s", "", 0, "%.0f"},
	{"UseCaseHotKey", "fenced-dotx/forupdate-med", "sell 1, 1 key, 16 callers: fenced DoTx vs FOR UPDATE, median of rounds", ">=", 0.9, "%.3f"},
	{"UseCaseHotKey", "fenced-dotx/forupdate", "sell 1, 1 key, 16 callers: fenced DoTx vs FOR UPDATE, whole run", "", 0, "%.3f"},
	{"UseCaseHotKey", "serial-dotx/forupdate-med", "sell 1, 1 key, 16 callers: DoTx at SERIALIZABLE vs FOR UPDATE, median of rounds", "", 0, "%.3f"},
	{"UseCaseHotKey", "serial-dotx/forupdate", "sell 1, 1 key, 16 callers: DoTx at SERIALIZABLE vs FOR UPDATE, whole run", "", 0, "%.3f"},
	{"UseCaseHotKey", "dotx/forupdate-med", "sell 1, 1 key, 16 callers: DoTx vs FOR UPDATE, median of rounds", "", 0, "%.3f"},
	{"UseCaseHotKey", "do/forupdate-med", "sell 1, 1 key, 16 callers: Do vs FOR UPDATE, median of rounds", "", 0, "%.3f"},
	{"UseCaseHotKey", "ceiling/forupdate-med", "sell 1, 1 key, 16 callers: conditional UPDATE vs FOR UPDATE, median of rounds", "", 0, "%.3f"},
	{"UseCaseHotKey", "forupdate-plus1/forupdate-med", "sell 1, 1 key, 16 callers: FOR UPDATE + 1 statement vs FOR UPDATE, median of rounds (the cost of one more statement on the serial path)", "", 0, "%.3f"},
	{"UseCaseHotKey", "fenced-dotx/forupdate-plus1-med", "sell 1, 1 key, 16 callers: fenced DoTx vs FOR UPDATE + 1 statement (same statements on the serial path), median of rounds", "", 0, "%.3f"},
	{"UseCaseHotKey", "forupdate-sections/s", "sell 1, 1 key, 16 callers: FOR UPDATE, sections/s", "", 0, "%.0f"},
	{"UseCaseFlashSale", "fenced-dotx/forupdate-med", "sell 1, flash sale 2 × 128 callers: fenced DoTx vs FOR UPDATE, median of rounds", ">=", 1.0, "%.3f"},
	{"UseCaseFlashSale", "fenced-dotx-min-share-%", "sell 1, flash sale: fenced DoTx, smaller instance's share, %", ">=", 40, "%.1f"},
	{"UseCaseFlashSale", "fenced-dotx/forupdate", "sell 1, flash sale: fenced DoTx vs FOR UPDATE, whole run", "", 0, "%.3f"},
	{"UseCaseFlashSale", "serial-dotx/forupdate-med", "sell 1, flash sale: DoTx at SERIALIZABLE vs FOR UPDATE, median of rounds", "", 0, "%.3f"},
	{"UseCaseFlashSale", "serial-dotx-min-share-%", "sell 1, flash sale: DoTx at SERIALIZABLE, smaller instance's share, %", "", 0, "%.1f"},
	{"UseCaseFlashSale", "dotx/forupdate-med", "sell 1, flash sale: DoTx vs FOR UPDATE, median of rounds", "", 0, "%.3f"},
	{"UseCaseFlashSale", "do/forupdate-med", "sell 1, flash sale: Do vs FOR UPDATE, median of rounds", "", 0, "%.3f"},
	{"UseCaseFlashSale", "ceiling/forupdate-med", "sell 1, flash sale: conditional UPDATE vs FOR UPDATE, median of rounds", "", 0, "%.3f"},
	{"UseCaseFlashSale", "forupdate-plus1/forupdate-med", "sell 1, flash sale: FOR UPDATE + 1 statement vs FOR UPDATE, median of rounds", "", 0, "%.3f"},
	{"UseCaseFlashSale", "fenced-dotx/forupdate-plus1-med", "sell 1, flash sale: fenced DoTx vs FOR UPDATE + 1 statement, median of rounds", "", 0, "%.3f"},
	{"UseCaseFlashSale", "do-min-share-%", "sell 1, flash sale: Do, smaller instance's share, %", "", 0, "%.1f"},
	{"UseCaseFlashSale", "forupdate-sections/s", "sell 1, flash sale: FOR UPDATE, sections/s", "", 0, "%.0f"},
	{"UseCaseFlashSale", "sections/round/caller", "sell 1, flash sale: sections per caller per round (< 1: the callers never all wait)", "", 0, "%.2f"},
	{"UseCaseManyKeys", "do/raw-med", "sell 1, 100 keys, 16 callers: Do vs raw, median of rounds", ">=", 0.95, "%.3f"},
	{"UseCaseManyKeys", "do/raw", "sell 1, 100 keys, 16 callers: Do vs raw, whole run", "", 0, "%.3f"},
	{"UseCaseManyKeys", "dotx/raw-med", "sell 1, 100 keys, 16 callers: DoTx vs raw, median of rounds", "", 0, "%.3f"},
	{"UseCaseManyKeys", "fenced-dotx/raw-med", "sell 1, 100 keys, 16 callers: fenced DoTx vs raw, median of rounds", "", 0, "%.3f"},
	{"UseCaseManyKeys", "serial-dotx/raw-med", "sell 1, 100 keys, 16 callers: DoTx at SERIALIZABLE vs raw, median of rounds", "", 0, "%.3f"},
	{"UseCaseManyKeys", "forupdate/raw-med", "sell 1, 100 keys, 16 callers: FOR UPDATE vs raw, median of rounds", "", 0, "%.3f"},
	{"UseCaseManyKeys", "ceiling/raw-med", "sell 1, 100 keys, 16 callers: conditional UPDATE vs raw, median of rounds", "", 0, "%.3f"},
}

// results maps benchmark name, then metric unit, to the values of each run.
type results map[string]map[string][]float64

var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse reads `go test -bench` output. It returns the results and the
// header lines worth repeating (cpu, server).
func parse(r io.Reader) (results, []string, error) {
	res := results{}
	var header []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "cpu:") || strings.Contains(line, "server: ") {
			h := line
			if i := strings.Index(line, "server: "); i >= 0 {
				h = line[i:]
			}
			if !seen[h] {
				seen[h] = true
				header = append(header, h)
			}
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fields := strings.Fields(m[2])
		if res[m[1]] == nil {
			res[m[1]] = map[string][]float64{}
		}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%q: value %q: %v", line, fields[i], err)
			}
			res[m[1]][fields[i+1]] = append(res[m[1]][fields[i+1]], v)
		}
	}
	return res, header, sc.Err()
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// table writes the markdown table of res to w, and reports whether every
// target that was measured is met by the median.
func table(w io.Writer, res results) bool {
	fmt.Fprintln(w, "| measure | target | median | range | runs | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	ok := true
	for _, t := range targets {
		vs := res[t.bench][t.metric]
		if len(vs) == 0 {
			continue
		}
		med := median(vs)
		goal, met := "", ""
		if t.op != "" {
			goal = t.op + " " + strconv.FormatFloat(t.bound, 'f', -1, 64)
			good := med <= t.bound
			if t.op == ">=" {
				good = med >= t.bound
			}
			met = "yes"
			if !good {
				met, ok = "**no**", false
			}
		}
		rng := fmt.Sprintf(t.format+" – "+t.format, slices.Min(vs), slices.Max(vs))
		fmt.Fprintf(w, "| %s | %s | "+t.format+" | %s | %d | %s |\n", t.what, goal, med, rng, len(vs), met)
	}
	return ok
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// writeDoc writes docs/performance.md for runs to out (stdout when empty),
// and the headline figures into readme when it is not empty.
func writeDoc(runs []*benchRun, out, readme string, stdout io.Writer) error {
	page := performanceDoc(runs)
	var err error
	if out == "" {
		_, err = io.WriteString(stdout, page)
	} else {
		err = os.WriteFile(out, []byte(page), 0o644)
	}
	if err != nil || readme == "" {
		return err
	}
	b, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	text, err := replaceHeadline(string(b), headline(runs))
	if err != nil {
		return fmt.Errorf("%s: %v", readme, err)
	}
	return os.WriteFile(readme, []byte(text), 0o644)
}

// run is the command: it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchtable", flag.ContinueOnError)
	fs.SetOutput(stderr)
	doc := fs.Bool("doc", false, "write docs/performance.md from the raw output files given as arguments")
	out := fs.String("o", "", "with -doc: the file to write (default: standard output)")
	readme := fs.String("readme", "", "with -doc: also rewrite the headline figures of this README")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *doc {
		if fs.NArg() == 0 {
			fmt.Fprintln(stderr, "benchtable: -doc needs the raw output files (docs/perf/bench-*.txt)")
			return 2
		}
		runs, err := readRuns(fs.Args())
		if err == nil {
			err = writeDoc(runs, *out, *readme, stdout)
		}
		if err != nil {
			fmt.Fprintln(stderr, "benchtable:", err)
			return 1
		}
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "benchtable: arguments are read only with -doc")
		return 2
	}
	res, header, err := parse(stdin)
	if err != nil {
		fmt.Fprintln(stderr, "benchtable:", err)
		return 2
	}
	if len(res) == 0 {
		fmt.Fprintln(stderr, "benchtable: no benchmark results on standard input")
		return 2
	}
	for _, h := range header {
		fmt.Fprintln(stdout, h+"  ")
	}
	if len(header) > 0 {
		fmt.Fprintln(stdout)
	}
	table(stdout, res)
	return 0
}
