package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// play runs the rounds of o on t, shows their progress and prints the tables
// and what they mean. It returns the exit status, and an error when the demo
// could not run to the end.
func play(ctx context.Context, t *target, o options, out io.Writer, tty bool) (int, error) {
	c := o.cfg
	sched := slices.Contains(o.rounds, Sched)
	schedSkipped := sched && t.embedded != nil && !o.roundsSet
	sched = sched && !schedSkipped
	modes := slices.DeleteFunc(slices.Clone(o.rounds), func(m Mode) bool { return m == Sched })
	fmt.Fprintf(out, "server: %s at %s\n", t.version, t.addr)
	if len(modes) > 0 {
		fmt.Fprintf(out, "story: 1 product, %d in stock; %s, %d workers each, place %d orders;\n"+
			"       an order reads the stock, thinks %v, writes stock-1 if it read more than 0\n",
			c.Stock, placement(c.Instances, o.procs), c.Workers, c.Orders, c.Think)
	}

	procs := o.procs
	if len(modes) == 0 {
		c.Instances, procs = 1, 0 // the scheduled-job round has instances of its own
	}
	d, err := newDemo(ctx, t.dsn, c, procs)
	if err != nil {
		return exitServer, err
	}
	var results []Result
	for _, mode := range modes {
		p := startProgress(out, tty, fmt.Sprintf("round %d (%s)", int(mode), mode.Label()), c.Orders, "orders")
		r, err := d.round(ctx, mode, &p.Done)
		p.finish()
		if err != nil {
			return exitServer, errors.Join(fmt.Errorf("round %d (%s): %w", int(mode), mode.Label(), err), d.close())
		}
		results = append(results, r)
	}
	var schedResults []SchedResult
	if sched {
		if schedResults, err = playSched(ctx, d, t.dsn, out, tty); err != nil {
			return exitServer, errors.Join(err, d.close())
		}
	}
	if err := d.close(); err != nil {
		fmt.Fprintf(out, "warning: cleaning up: %v\n", err)
	}

	if len(results) > 0 {
		fmt.Fprintln(out)
		writeResults(out, results)
	}
	if len(schedResults) > 0 {
		fmt.Fprintln(out)
		writeSchedResults(out, schedResults)
	}
	fmt.Fprintln(out)
	status := conclude(out, t, results)
	if s := concludeSched(out, t, schedResults); s != exitOK {
		status = s
	}
	if schedSkipped {
		fmt.Fprintln(out, "Round 4 (a scheduled job, schedlock's lease table) needs a real server: run with -dsn, or -rounds sched to see it fail here.")
	}
	return status, nil
}

// placement says where the instances run: "4 instances in this process",
// "3 instances, one per child process", "5 instances in 3 child processes
// (2+2+1)".
func placement(instances, procs int) string {
	switch {
	case procs == 0:
		return fmt.Sprintf("%d instances in this process", instances)
	case procs == instances:
		return fmt.Sprintf("%d instances, one per child process", instances)
	}
	parts := split(instances, procs)
	counts := make([]string, len(parts))
	for i, n := range parts {
		counts[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("%d instances in %d child processes (%s)", instances, procs, strings.Join(counts, "+"))
}

// concludeSched explains the scheduled-job table and returns exitWrong when
// the job did not run exactly once per tick with the lock.
func concludeSched(out io.Writer, t *target, results []SchedResult) int {
	status := exitOK
	for _, r := range results {
		for _, e := range r.Errors {
			fmt.Fprintf(out, "scheduled job (%s) error: %s\n", schedLabel(r.Locked), e)
		}
		switch {
		case !r.Locked:
			fmt.Fprintf(out, "Without the lock the job ran %d times in %d ticks: once per instance per tick.\n", r.Total(), len(r.Runs))
		case r.Exact():
			fmt.Fprintf(out, "With schedlock.Run: once per tick, whichever instance fired first; the others skipped.\n")
		case r.Failed == 0 && !r.InSlack():
			// Not the lock's failure: the round's premise did not hold.
			fmt.Fprintf(out, "With schedlock.Run the job did not run once per tick, but a firing returned %v after its tick\n"+
				"  began, more than the %v the lease can absorb (lockAtLeastFor %v, period %v): the machine was too\n"+
				"  busy for the round. A lease gives one run per tick only while every instance fires and runs within that.\n",
				fmtDuration(r.Slowest), schedSlack, schedAtLeast, schedPeriod)
		default:
			status = exitWrong
			fmt.Fprintln(out, "FAIL: with the lock the scheduled job did not run exactly once per tick (exit status 1).")
			if t.embedded != nil {
				fmt.Fprintln(out, "  That is the embedded server: two instances' statements on the lease row ran at once, and its\n"+
					"  in-memory tables let both commits succeed. MySQL and MariaDB lock the row: try -dsn.")
			}
		}
	}
	return status
}

// conclude explains the table in a sentence or two and returns the exit
// status: exitWrong when a locked round was not exact.
func conclude(out io.Writer, t *target, results []Result) int {
	status := exitOK
	for _, r := range results {
		name := fmt.Sprintf("round %d (%s)", int(r.Mode), r.Mode.Label())
		for _, e := range r.Errors {
			fmt.Fprintf(out, "%s error: %s\n", name, e)
		}
		if !r.AddsUp() {
			fmt.Fprintf(out, "%s: the counters do not add up: %d tried, %d accepted, %d rejected, %d failed\n",
				name, r.Tried, r.Accepted, r.Rejected, r.Failed)
		}
		if n := r.LostRows(); n != 0 {
			fmt.Fprintf(out, "%s: the orders table has %d rows, but the instances inserted %d and the server acknowledged each insert.\n",
				name, r.Recorded, r.Accepted)
			if t.embedded != nil && r.Mode == NoLock {
				fmt.Fprintln(out, "  That is the embedded server: go-mysql-server's in-memory database does not support concurrent\n"+
					"  writers (a commit writes back its own copy of each table it touched, undoing commits made\n"+
					"  meanwhile). MySQL and MariaDB keep every acknowledged write: try -dsn.")
			}
		}
		switch {
		case r.Mode == NoLock && r.Exact():
			fmt.Fprintln(out, "Without the lock the result happened to be right this time: try more -orders, -workers or a longer -think.")
		case r.Mode == NoLock:
			fmt.Fprintf(out, "Without the lock, %d orders were accepted for %d units: %d oversold, %d decrements overwritten.\n",
				r.Accepted, r.Initial, r.Oversold(), r.LostUpdates())
		case !r.Exact():
			status = exitWrong
		}
	}
	var locked []string
	for _, r := range results {
		if r.Mode.Locked() {
			locked = append(locked, r.Mode.Label())
		}
	}
	switch {
	case len(locked) == 0:
	case status == exitOK:
		fmt.Fprintf(out, "With the lock (%s): exact, every unit sold once and never more than the stock.\n", strings.Join(locked, ", "))
	default:
		fmt.Fprintln(out, "FAIL: a locked round was not exact (exit status 1).")
	}
	return status
}
