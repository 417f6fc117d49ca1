package main

import (
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
