package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// benchRun is one raw output file of scripts/perf.sh: one server's run.
type benchRun struct {
	label  string            // LABEL of bench-LABEL.txt
	meta   map[string]string // the stamp: date, go, cores, load, command; and go test's cpu, goos, goarch
	server string            // the tests' "server: " line, up to " at "
	res    results
}

// metaKeys are the stamp lines read from the top of a raw file.
var metaKeys = []string{"date", "go", "cores", "load", "command", "cpu", "goos", "goarch"}

// readRun reads one raw output file.
func readRun(path string) (*benchRun, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(path)
	label, ok := strings.CutPrefix(strings.TrimSuffix(base, ".txt"), "bench-")
	if !ok || label == "" || !strings.HasSuffix(base, ".txt") {
		return nil, fmt.Errorf("%s: want a file named bench-LABEL.txt", path)
	}
	r := &benchRun{label: label, meta: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ": "); ok && slices.Contains(metaKeys, k) {
			if _, seen := r.meta[k]; !seen {
				r.meta[k] = strings.TrimSpace(v)
			}
		}
		if _, v, ok := strings.Cut(line, "server: "); ok && r.server == "" {
			r.server, _, _ = strings.Cut(v, " at ")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for _, k := range []string{"date", "go", "cores", "command"} {
		if r.meta[k] == "" {
			return nil, fmt.Errorf("%s: no %q line: make it with scripts/perf.sh run", path, k+": ")
		}
	}
	if r.server == "" {
		return nil, fmt.Errorf("%s: no \"server: \" line in the benchmark output", path)
	}
	r.res, _, err = parse(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(r.res) == 0 {
		return nil, fmt.Errorf("%s: no benchmark results", path)
	}
	return r, nil
}

// benchOrder is the order of the known benchmarks on the page; others
// follow in alphabetical order.
var benchOrder = []string{
	"UseCaseHotKey", "UseCaseFlashSale", "UseCaseUncontended", "UseCaseManyKeys",
	"Uncontended", "UncontendedDo", "UncontendedRaw", "HotKey", "DistinctKeys", "TwoInstances",
	"FencedUncontended", "FencedHotKey",
}

// benchAbout says what a known benchmark measures.
var benchAbout = map[string]string{
	"UseCaseHotKey": "One hot key, 16 callers in one process. Each section sells one unit: it reads a stock, " +
		"writes stock − 1 and inserts an order row on the application's pool, committed durably. " +
		"The contenders alternate in rounds; ratios are against `SELECT … FOR UPDATE` on the same server.",
	"UseCaseFlashSale": "One hot key, two instances (own pools and Lockers) of 128 callers each; " +
		"ratios against `SELECT … FOR UPDATE`, and each contender's smaller instance's share.",
	"UseCaseUncontended": "One caller, one product per contender; ratios against the raw `GET_LOCK` sequence " +
		"written by hand.",
	"UseCaseManyKeys":   "16 callers over 100 products per contender; ratios against the raw `GET_LOCK` sequence.",
	"Uncontended":       "An empty section, one caller: `Do` against the raw floor (`GET_LOCK`, `RELEASE_LOCK` on a pinned connection), alternating.",
	"UncontendedDo":     "Allocations of one uncontended `Do`.",
	"UncontendedRaw":    "Allocations of one raw section (database/sql and the driver).",
	"HotKey":            "An empty section on one key, 16 goroutines: the library's local queue against the raw server queue.",
	"DistinctKeys":      "An empty section on 16 keys, 16 goroutines, against the raw floor.",
	"TwoInstances":      "Two instances of 8 goroutines on one key: throughput and the smaller instance's share.",
	"FencedUncontended": "Fencing's cost, uncontended: fenced `Do` against `Do`, fenced `DoTx` against `DoTx`, alternating.",
	"FencedHotKey":      "Fencing's cost on one hot key: fenced `Do` throughput against `Do`.",
}

// contenderOrder is the order of the known contenders in a table; others
// follow in alphabetical order.
var contenderOrder = []string{
	"forupdate", "fenced-dotx", "serial-dotx", "dotx", "do", "ceiling", "dobatch", "merger", "forupdate-plus1", "raw",
	"fenced-dotx-b", "serial-dotx-b", "dobatch-b", "merger-b", "lib",
}

// contenderNames are the names the page gives the known contenders.
var contenderNames = map[string]string{
	"raw":             "raw `GET_LOCK` sequence",
	"do":              "`Do`",
	"dotx":            "`DoTx`",
	"fenced-dotx":     "fenced `DoTx`",
	"serial-dotx":     "`DoTx` at SERIALIZABLE, hand-off",
	"forupdate":       "`SELECT … FOR UPDATE`",
	"forupdate-plus1": "`FOR UPDATE` + 1 statement",
	"ceiling":         "one conditional `UPDATE`",
	"fenced-dotx-b":   "fenced `DoTx`, other handoff bounds",
	"serial-dotx-b":   "`DoTx` at SERIALIZABLE, other handoff bounds",
	"dobatch":         "`DoBatch`",
	"merger":          "`Merger`",
	"dobatch-b":       "`DoBatch`, other group bounds",
	"merger-b":        "`Merger`, other group bounds",
	"lib":             "library",
}

func contenderName(c string) string {
	if n, ok := contenderNames[c]; ok {
		return n
	}
	return "`" + c + "`"
}

// metric describes one reported unit: its row label, its kind (for the
// order of rows), the contender it is about (for the order within a kind)
// and its format.
func describe(unit string) (label string, kind int, who, format string) {
	switch {
	case strings.HasSuffix(unit, "-min-share-%"):
		c := strings.TrimSuffix(unit, "-min-share-%")
		return contenderName(c) + ": smaller instance's share, %", 3, c, "%.1f"
	case strings.HasSuffix(unit, "-sections/s"):
		c := strings.TrimSuffix(unit, "-sections/s")
		return contenderName(c) + ": sections/s", 2, c, "%.0f"
	case strings.HasSuffix(unit, "/s") || strings.HasSuffix(unit, "/op") || strings.HasSuffix(unit, "/lock"):
		return unit, 4, unit, "%.0f"
	case strings.Contains(unit, "/"):
		a, b, _ := strings.Cut(unit, "/")
		if b, ok := strings.CutSuffix(b, "-med"); ok {
			return contenderName(a) + " vs " + contenderName(b) + ", median of rounds", 0, a, "%.2f"
		}
		return contenderName(a) + " vs " + contenderName(b) + ", whole run", 1, a, "%.2f"
	case strings.HasSuffix(unit, "%"):
		return unit, 3, unit, "%.1f"
	}
	return unit, 4, unit, "%.2f"
}

func rank(list []string, s string) int {
	if i := slices.Index(list, s); i >= 0 {
		return i
	}
	return len(list)
}

// readRuns reads the raw output files, in the order of their names.
func readRuns(files []string) ([]*benchRun, error) {
	files = slices.Clone(files)
	slices.Sort(files)
	var runs []*benchRun
	for _, f := range files {
		r, err := readRun(f)
		if err != nil {
			return nil, err
		}
		for _, o := range runs {
			if o.label == r.label {
				return nil, fmt.Errorf("two files for label %q", r.label)
			}
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// Markers of the README's generated headline figures.
const (
	headlineBegin = "<!-- headline figures: generated by scripts/perf.sh from docs/perf/; do not edit -->"
	headlineEnd   = "<!-- end of headline figures -->"
)

// headline returns the README's headline figures, markers included: one
// hot key (BenchmarkUseCaseHotKey), each contender against SELECT … FOR
// UPDATE on each server, with the commands and dates of the runs.
func headline(runs []*benchRun) string {
	var w strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&w, format, a...) }
	p("%s\n\n", headlineBegin)
	const b = "UseCaseHotKey"
	var units []string
	for _, r := range runs {
		for unit := range r.res[b] {
			if strings.HasSuffix(unit, "/forupdate-med") && !slices.Contains(units, unit) {
				units = append(units, unit)
			}
		}
	}
	if len(units) == 0 {
		p("This run has no BenchmarkUseCaseHotKey: see docs/performance.md.\n\n%s\n", headlineEnd)
		return w.String()
	}
	slices.SortFunc(units, func(x, y string) int {
		x, y = strings.TrimSuffix(x, "/forupdate-med"), strings.TrimSuffix(y, "/forupdate-med")
		if d := rank(contenderOrder, x) - rank(contenderOrder, y); d != 0 {
			return d
		}
		return strings.Compare(x, y)
	})
	p("| one hot key, 16 callers |")
	for _, r := range runs {
		p(" %s |", r.server)
	}
	p("\n|---|")
	for range runs {
		p("---:|")
	}
	p("\n")
	cell := func(vs []float64, format string) string {
		if len(vs) == 0 {
			return "-"
		}
		return fmt.Sprintf(format, median(vs))
	}
	p("| `SELECT … FOR UPDATE`, sections/s |")
	for _, r := range runs {
		p(" %s |", cell(r.res[b]["forupdate-sections/s"], "%.0f"))
	}
	p("\n")
	for _, unit := range units {
		p("| %s, × `FOR UPDATE` |", contenderName(strings.TrimSuffix(unit, "/forupdate-med")))
		for _, r := range runs {
			p(" %s |", cell(r.res[b][unit], "%.2f"))
		}
		p("\n")
	}
	p("\nMedians of %d runs (`-count`)", len(runs[0].res[b]["forupdate-sections/s"]))
	for _, r := range runs {
		p("; %s: `%s` (%s, load %s)", r.server, r.meta["command"], r.meta["date"], strings.Fields(r.meta["load"] + " -")[0])
	}
	p(".\n\n%s\n", headlineEnd)
	return w.String()
}

// replaceHeadline returns readme with the text between the headline
// markers replaced by h.
func replaceHeadline(readme, h string) (string, error) {
	i := strings.Index(readme, headlineBegin)
	j := strings.Index(readme, headlineEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("README.md has no headline markers (%q … %q)", headlineBegin, headlineEnd)
	}
	return readme[:i] + h + strings.TrimPrefix(readme[j+len(headlineEnd):], "\n"), nil
}

// performanceDoc returns docs/performance.md for the runs.
func performanceDoc(runs []*benchRun) string {
	d := &docWriter{runs: runs}
	d.intro()
	d.runsTable()
	for _, b := range benchNames(runs) {
		d.benchSection(b)
	}
	d.targetTables()
	return strings.TrimRight(d.w.String(), "\n") + "\n"
}

// docWriter writes docs/performance.md: tables with a column per run.
type docWriter struct {
	w    strings.Builder
	runs []*benchRun
}

// p appends formatted text to the page.
func (d *docWriter) p(format string, a ...any) { fmt.Fprintf(&d.w, format, a...) }

// header writes a table's header: first names the row labels' column,
// then a column per run.
func (d *docWriter) header(first string) {
	d.p("| %s |", first)
	for _, r := range d.runs {
		d.p(" %s (%s) |", r.server, r.label)
	}
	d.p("\n|---|")
	for range d.runs {
		d.p("---|")
	}
	d.p("\n")
}

// row writes a table row: its label, then f's cell for each run.
func (d *docWriter) row(name string, f func(r *benchRun) string) {
	d.p("| %s |", name)
	for _, r := range d.runs {
		d.p(" %s |", f(r))
	}
	d.p("\n")
}

// intro writes the page's marker, title and how to read it.
func (d *docWriter) intro() {
	d.p("<!-- Generated by scripts/perf.sh (go run ./internal/benchtable -doc) from docs/perf/bench-*.txt. Do not edit: TestPerformanceDocIsGenerated fails. -->\n\n")
	d.p("# Performance\n\n")
	d.p("Measured by `./bench.sh`, one run per server, and written by `scripts/perf.sh` from the raw output in\n")
	d.p("[docs/perf/](perf/); never edited by hand. To measure again, see\n")
	d.p("[CONTRIBUTING.md](../CONTRIBUTING.md#benchmarks-and-docsperformancemd).\n\n")
	d.p("A ratio compares two contenders measured alternately in rounds of the same run, so a machine whose\n")
	d.p("speed drifts affects both alike; above 1 the first is faster. Each cell is the median over the runs\n")
	d.p("(`-count`), then the range. Absolute rates depend on the machine and its load: compare ratios.\n\n")
}

// runsTable writes "The runs": each run's command, date, machine, Go and load.
func (d *docWriter) runsTable() {
	d.p("## The runs\n\n")
	d.header("run")
	d.row("command", func(r *benchRun) string { return "`" + r.meta["command"] + "`" })
	d.row("date (UTC)", func(r *benchRun) string { return r.meta["date"] })
	d.row("machine", machine)
	d.row("Go", func(r *benchRun) string { return r.meta["go"] })
	d.row("load average when the run began", func(r *benchRun) string {
		if r.meta["load"] == "" {
			return "-"
		}
		return r.meta["load"]
	})
	d.p("\n")
}

// machine describes the run's machine: cpu, cores, goos/goarch.
func machine(r *benchRun) string {
	m := r.meta["cores"] + " cores"
	if c := r.meta["cpu"]; c != "" {
		m = c + ", " + m
	}
	if r.meta["goos"] != "" {
		m += ", " + r.meta["goos"] + "/" + r.meta["goarch"]
	}
	return m
}

// benchNames returns the benchmarks of all the runs, in the page's order.
func benchNames(runs []*benchRun) []string {
	var benches []string
	for _, r := range runs {
		for b := range r.res {
			if !slices.Contains(benches, b) {
				benches = append(benches, b)
			}
		}
	}
	slices.SortFunc(benches, func(a, b string) int {
		if d := rank(benchOrder, a) - rank(benchOrder, b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return benches
}

// benchRow is one measure of a benchmark's table, as describe describes it.
type benchRow struct {
	unit, label, who, format string
	kind                     int
}

// benchRows returns the measures of benchmark b in all the runs, in the
// table's order: by kind, then contender, then unit.
func benchRows(runs []*benchRun, b string) []benchRow {
	var rows []benchRow
	for _, r := range runs {
		for unit := range r.res[b] {
			if strings.HasPrefix(b, "UseCase") && (unit == "ns/op" || unit == "B/op" || unit == "allocs/op") {
				continue // over all the contenders together: meaningless per contender
			}
			if slices.ContainsFunc(rows, func(x benchRow) bool { return x.unit == unit }) {
				continue
			}
			label, kind, who, format := describe(unit)
			rows = append(rows, benchRow{unit, label, who, format, kind})
		}
	}
	slices.SortFunc(rows, func(x, y benchRow) int {
		if x.kind != y.kind {
			return x.kind - y.kind
		}
		if d := rank(contenderOrder, x.who) - rank(contenderOrder, y.who); d != 0 {
			return d
		}
		return strings.Compare(x.unit, y.unit)
	})
	return rows
}

// benchSection writes benchmark b's section: what it measures and a row
// per measure.
func (d *docWriter) benchSection(b string) {
	d.p("## Benchmark%s\n\n", b)
	if about := benchAbout[b]; about != "" {
		d.p("%s\n\n", about)
	}
	d.header("measure")
	for _, x := range benchRows(d.runs, b) {
		d.row(x.label, func(r *benchRun) string { return spread(r.res[b][x.unit], x.format) })
	}
	d.p("\n")
}

// spread formats a measure's values: the one value, or the median with the
// range and the number of runs; "-" when there is none.
func spread(vs []float64, format string) string {
	if len(vs) == 0 {
		return "-"
	}
	if len(vs) == 1 {
		return fmt.Sprintf(format, vs[0])
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+", %d runs)", median(vs), slices.Min(vs), slices.Max(vs), len(vs))
}

// targetTables writes "Against the targets": each run's table of the measures
// that have a target.
func (d *docWriter) targetTables() {
	d.p("## Against the targets\n\n")
	d.p("The targets the project set itself, where this run measured them (`./bench.sh` prints the same table).\n\n")
	for _, r := range d.runs {
		d.p("### %s (%s)\n\n", r.server, r.label)
		var t strings.Builder
		table(&t, r.res)
		if strings.Count(t.String(), "\n") <= 2 {
			d.p("No measure with a target in this run.\n\n")
			continue
		}
		d.p("%s\n", t.String())
	}
}
