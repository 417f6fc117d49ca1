package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// writeResults prints the one table of the demo: a row per round.
func writeResults(w io.Writer, results []Result) {
	header := []string{"round", "orders tried", "accepted", "final stock", "oversold", "lost updates", "lock wait p50", "p99", "time", ""}
	rows := [][]string{header}
	for _, r := range results {
		p50, p99 := "-", "-"
		if d, ok := r.Percentile(50); ok {
			p50 = fmtDuration(d)
		}
		if d, ok := r.Percentile(99); ok {
			p99 = fmtDuration(d)
		}
		rows = append(rows, []string{
			fmt.Sprintf("%d %s", int(r.Mode), r.Mode.Label()),
			strconv.Itoa(r.Tried), strconv.Itoa(r.Accepted), strconv.Itoa(r.Final),
			strconv.Itoa(r.Oversold()), strconv.Itoa(r.LostUpdates()),
			p50, p99, fmtDuration(r.Elapsed), verdict(r),
		})
	}
	writeTable(w, rows)
}

// verdict is the last column: what a reader should take from the row.
func verdict(r Result) string {
	var bad []string
	if r.Oversold() > 0 {
		bad = append(bad, "oversold")
	}
	if r.LostUpdates() != 0 {
		bad = append(bad, "lost updates")
	}
	if r.LostRows() != 0 {
		bad = append(bad, "rows lost")
	}
	if r.Failed > 0 {
		bad = append(bad, fmt.Sprintf("%d orders failed", r.Failed))
	}
	if len(bad) == 0 && r.Accepted != min(r.Tried, r.Initial) {
		bad = append(bad, "orders turned away with stock left")
	}
	if len(bad) == 0 {
		return "exact"
	}
	return "WRONG: " + strings.Join(bad, ", ")
}

// writeTable prints rows in columns: the first and last left-aligned, the
// numbers between right-aligned.
func writeTable(w io.Writer, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	last := len(widths) - 1
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-len([]rune(cell)))
			switch {
			case i == 0:
				b.WriteString(cell + pad)
			case i == last:
				b.WriteString("  " + cell)
			default:
				b.WriteString("  " + pad + cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// fmtDuration prints d with about three significant digits.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
