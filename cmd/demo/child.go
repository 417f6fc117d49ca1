package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// childEnv, when set, makes the binary a child process of a -procs run: it
// holds the childSpec as JSON. It is not a flag, so -h does not list it.
const childEnv = "NAMEDLOCK_DEMO_CHILD"

// childSpec tells a child which instances to run, and where.
type childSpec struct {
	DSN    string `json:"dsn"`
	First  int    `json:"first"` // number of its first instance
	Count  int    `json:"count"` // how many instances it runs
	Config Config `json:"config"`
}

// command is one line of the parent's stdin to a child: run a round.
type command struct {
	Mode   Mode  `json:"mode"`
	Orders []int `json:"orders"` // per instance of the child
}

// message is one line of a child's stdout to the parent.
type message struct {
	Ready bool   `json:"ready,omitempty"` // the instances are open
	Done  int64  `json:"done,omitempty"`  // orders placed so far in this round
	Tally *tally `json:"tally,omitempty"` // the round is over
	Error string `json:"error,omitempty"` // the child cannot go on
}

// progressEvery is how often a child reports the orders placed so far.
const progressEvery = 100 * time.Millisecond

// childMain runs a child process: it opens its instances, says it is ready,
// then runs the rounds the parent sends on in, one JSON line each, and
// answers on out, until in ends. It returns the exit status.
func childMain(rawSpec string, in io.Reader, out io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var mu sync.Mutex
	enc := json.NewEncoder(out)
	send := func(m message) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(m)
	}
	fail := func(err error) int {
		send(message{Error: err.Error()})
		return 1
	}

	var spec childSpec
	if err := json.Unmarshal([]byte(rawSpec), &spec); err != nil {
		return fail(fmt.Errorf("child: bad %s: %w", childEnv, err))
	}
	f, err := openLocalFleet(ctx, spec.DSN, spec.First, spec.Count, spec.Config)
	if err != nil {
		return fail(err)
	}
	defer f.close()
	send(message{Ready: true})

	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var c command
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return fail(fmt.Errorf("child: bad command: %w", err))
		}
		if len(c.Orders) != len(f.instances) {
			return fail(fmt.Errorf("child: %d order counts for %d instances", len(c.Orders), len(f.instances)))
		}
		var done atomic.Int64
		stopProgress := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			t := time.NewTicker(progressEvery)
			defer t.Stop()
			for {
				select {
				case <-stopProgress:
					return
				case <-t.C:
					if n := done.Load(); n > 0 {
						send(message{Done: n})
					}
				}
			}
		})
		t, err := f.run(ctx, c.Mode, c.Orders, &done)
		close(stopProgress)
		wg.Wait()
		if err != nil {
			return fail(err)
		}
		send(message{Done: done.Load()})
		send(message{Tally: &t})
	}
	return 0
}
