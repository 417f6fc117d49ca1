package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Mode is how a round protects the read-modify-write of the stock.
type Mode int

// The rounds, in the order the demo runs them.
const (
	NoLock   Mode = iota + 1 // nothing: lost updates and oversold units
	LockDo                   // namedlock.Do around the read-modify-write
	LockDoTx                 // namedlock.DoTx: the same in a transaction committed before release
	Sched                    // a scheduled job on several instances, without and with schedlock.Run
)

var modeNames = map[Mode]string{NoLock: "nolock", LockDo: "do", LockDoTx: "dotx", Sched: "sched"}

// String returns the round's name as the -rounds flag spells it.
func (m Mode) String() string {
	if s, ok := modeNames[m]; ok {
		return s
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Label is the round's name in the result table.
func (m Mode) Label() string {
	switch m {
	case NoLock:
		return "no lock"
	case LockDo:
		return "Do"
	case LockDoTx:
		return "DoTx"
	case Sched:
		return "scheduled job"
	}
	return m.String()
}

// Locked reports whether the round uses the lock, so must be exact.
func (m Mode) Locked() bool { return m == LockDo || m == LockDoTx }

// parseModes parses a comma-separated list of round names.
func parseModes(s string) ([]Mode, error) {
	var modes []Mode
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(strings.ToLower(name))
		found := false
		for m, n := range modeNames {
			if n == name {
				modes = append(modes, m)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("-rounds: unknown round %q (want nolock, do, dotx, sched)", name)
		}
	}
	slices.Sort(modes)
	return slices.Compact(modes), nil
}

// tally is what the instances report about their orders in one round; child
// processes send it to the parent as JSON.
type tally struct {
	Tried    int      `json:"tried"`
	Accepted int      `json:"accepted"`
	Rejected int      `json:"rejected"` // the stock read was 0
	Failed   int      `json:"failed"`
	WaitsUS  []int64  `json:"waits_us,omitempty"` // lock waits in microseconds
	Errors   []string `json:"errors,omitempty"`   // the first few distinct errors
}

const maxErrors = 3

func (t *tally) record(accepted bool, err error) {
	t.Tried++
	switch {
	case err != nil:
		t.Failed++
		t.addError(err.Error())
	case accepted:
		t.Accepted++
	default:
		t.Rejected++
	}
}

func (t *tally) addError(msg string) {
	if len(t.Errors) < maxErrors && !slices.Contains(t.Errors, msg) {
		t.Errors = append(t.Errors, msg)
	}
}

func (t *tally) add(o tally) {
	t.Tried += o.Tried
	t.Accepted += o.Accepted
	t.Rejected += o.Rejected
	t.Failed += o.Failed
	t.WaitsUS = append(t.WaitsUS, o.WaitsUS...)
	for _, e := range o.Errors {
		t.addError(e)
	}
}

// Result is one round: what the instances reported and what the database
// says afterwards.
type Result struct {
	Mode     Mode
	Tried    int             // orders placed
	Accepted int             // orders the instances confirmed (stock read > 0, both writes done)
	Rejected int             // orders turned down because the stock read was 0
	Failed   int             // orders that ended with an error
	Recorded int             // order rows in the database after the round
	Initial  int             // stock before the round
	Final    int             // stock after the round
	Waits    []time.Duration // lock waits (locked rounds), sorted
	Elapsed  time.Duration
	Errors   []string
}

// Sold is how many units the stock column says were sold.
func (r Result) Sold() int { return r.Initial - r.Final }

// Oversold is how many more units were promised than there were, by the
// accepted orders or by a negative stock.
func (r Result) Oversold() int { return max(r.Accepted-r.Initial, -r.Final, 0) }

// LostUpdates is how many accepted orders the stock column does not show:
// decrements that another order's write overwrote.
func (r Result) LostUpdates() int { return r.Accepted - r.Sold() }

// LostRows is how many order rows the instances inserted (and the server
// acknowledged) that are not in the table. A server that keeps what it
// acknowledges has none; see the report of the embedded server.
func (r Result) LostRows() int { return r.Accepted - r.Recorded }

// AddsUp reports whether every order tried was accepted, rejected or failed.
func (r Result) AddsUp() bool { return r.Tried == r.Accepted+r.Rejected+r.Failed }

// Exact reports whether the round sold exactly what it recorded, never more
// than the stock, and sold out or served every order.
func (r Result) Exact() bool {
	return r.AddsUp() && r.Failed == 0 && r.Oversold() == 0 && r.LostUpdates() == 0 &&
		r.LostRows() == 0 && r.Accepted == min(r.Tried, r.Initial)
}

// Percentile returns the p-th percentile (0 < p ≤ 100, nearest rank) of the
// lock waits, or false when there are none.
func (r Result) Percentile(p float64) (time.Duration, bool) {
	if len(r.Waits) == 0 {
		return 0, false
	}
	rank := int(math.Ceil(float64(len(r.Waits))*p/100)) - 1
	return r.Waits[min(max(rank, 0), len(r.Waits)-1)], true
}

func newResult(mode Mode, initial int, t tally) Result {
	r := Result{
		Mode: mode, Tried: t.Tried, Accepted: t.Accepted, Rejected: t.Rejected,
		Failed: t.Failed, Initial: initial, Errors: t.Errors,
	}
	for _, us := range t.WaitsUS {
		r.Waits = append(r.Waits, time.Duration(us)*time.Microsecond)
	}
	slices.Sort(r.Waits)
	return r
}
