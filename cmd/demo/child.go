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
	p := &parentLink{enc: json.NewEncoder(out)}

	var spec childSpec
	if err := json.Unmarshal([]byte(rawSpec), &spec); err != nil {
		return p.fail(fmt.Errorf("child: bad %s: %w", childEnv, err))
	}
	f, err := openLocalFleet(ctx, spec.DSN, spec.First, spec.Count, spec.Config)
	if err != nil {
		return p.fail(err)
	}
	defer f.close()
	p.send(message{Ready: true})

	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var c command
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return p.fail(fmt.Errorf("child: bad command: %w", err))
		}
		if len(c.Orders) != len(f.instances) {
			return p.fail(fmt.Errorf("child: %d order counts for %d instances", len(c.Orders), len(f.instances)))
		}
		if err := p.round(ctx, f, c); err != nil {
			return p.fail(err)
		}
	}
	return 0
}

// parentLink is a child's stdout to the parent: one JSON message a line,
// sent from the round and its progress reports alike.
type parentLink struct {
	mu  sync.Mutex // one message at a time
	enc *json.Encoder
}

// send writes m as one line.
func (p *parentLink) send(m message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.enc.Encode(m)
}

// fail tells the parent that the child cannot go on and returns the exit
// status 1.
func (p *parentLink) fail(err error) int {
	p.send(message{Error: err.Error()})
	return 1
}

// round runs the round c on the fleet, reporting the orders placed every
// progressEvery while it runs, then their number and the round's tally.
func (p *parentLink) round(ctx context.Context, f *localFleet, c command) error {
	var done atomic.Int64
	stopProgress := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { p.reportProgress(&done, stopProgress) })
	t, err := f.run(ctx, c.Mode, c.Orders, &done)
	close(stopProgress)
	wg.Wait()
	if err != nil {
		return err
	}
	p.send(message{Done: done.Load()})
	p.send(message{Tally: &t})
	return nil
}

// reportProgress sends done every progressEvery, once it is above 0, until
// stop is closed.
func (p *parentLink) reportProgress(done *atomic.Int64, stop <-chan struct{}) {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if n := done.Load(); n > 0 {
				p.send(message{Done: n})
			}
		}
	}
}
