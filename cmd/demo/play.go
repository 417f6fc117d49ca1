package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// play runs the rounds of o on t, shows their progress and prints the table
// and what it means. It returns the exit status, and an error when the demo
// could not run to the end.
func play(ctx context.Context, t *target, o options, out io.Writer, tty bool) (int, error) {
	c := o.cfg
	where := "in this process"
	if o.procs > 0 {
		where = fmt.Sprintf("in %d child processes", o.procs)
	}
	fmt.Fprintf(out, "server: %s at %s\n", t.version, t.addr)
	fmt.Fprintf(out, "story: 1 product, %d in stock; %d instances %s, %d workers each, place %d orders;\n"+
		"       an order reads the stock, thinks %v, writes stock-1 if it read more than 0\n",
		c.Stock, c.Instances, where, c.Workers, c.Orders, c.Think)

	d, err := newDemo(ctx, t.dsn, c, o.procs)
	if err != nil {
		return exitServer, err
	}
	var results []Result
	for _, mode := range o.rounds {
		p := startProgress(out, tty, fmt.Sprintf("round %d (%s)", int(mode), mode.Label()), c.Orders)
		r, err := d.round(ctx, mode, &p.Done)
		p.finish()
		if err != nil {
			return exitServer, errors.Join(fmt.Errorf("round %d (%s): %w", int(mode), mode.Label(), err), d.close())
		}
		results = append(results, r)
	}
	if err := d.close(); err != nil {
		fmt.Fprintf(out, "warning: cleaning up: %v\n", t.redact(err))
	}

	fmt.Fprintln(out)
	writeResults(out, results)
	fmt.Fprintln(out)
	return conclude(out, t, results), nil
}

// conclude explains the table in a sentence or two and returns the exit
// status: exitWrong when a locked round was not exact.
func conclude(out io.Writer, t *target, results []Result) int {
	status := exitOK
	for _, r := range results {
		name := fmt.Sprintf("round %d (%s)", int(r.Mode), r.Mode.Label())
		for _, e := range r.Errors {
			fmt.Fprintf(out, "%s error: %s\n", name, t.redactString(e))
		}
		if !r.AddsUp() {
			fmt.Fprintf(out, "%s: the counters do not add up: %d tried, %d accepted, %d rejected, %d failed\n",
				name, r.Tried, r.Accepted, r.Rejected, r.Failed)
		}
		if n := r.LostRows(); n != 0 {
			fmt.Fprintf(out, "%s: the orders table has %d rows, but the instances inserted %d and the server acknowledged each insert.\n",
				name, r.Recorded, r.Accepted)
			if t.embedded != nil && r.Mode == NoLock {
				fmt.Fprintln(out, "  That is the embedded server: go-mysql-server's in-memory tables keep only the last of concurrent\n"+
					"  commits to a table. MySQL and MariaDB do not lose acknowledged writes; see -dsn.")
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
