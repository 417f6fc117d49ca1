package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"time"
)

// Bounds on the parent's patience with its children.
const (
	childStartTimeout = 30 * time.Second
	childStopTimeout  = 15 * time.Second
)

// procFleet runs the instances in child processes of this binary, which
// reach the server through its TCP address like any other client.
type procFleet struct {
	children []*child
	progress atomic.Pointer[atomic.Int64] // the current round's counter
}

// child is one child process and the reader of its stdout.
type child struct {
	n     int // 1-based, for messages
	cmd   *exec.Cmd
	stdin io.WriteCloser
	msgs  chan message // everything but progress; closed when stdout ends
	count int          // instances it runs
}

// startProcFleet starts procs children of this binary, spreading
// cfg.Instances instances over them, and waits until each has opened its
// instances.
func startProcFleet(ctx context.Context, dsn string, procs int, cfg Config) (*procFleet, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("-procs: find this program's executable: %w", err)
	}
	f := &procFleet{}
	first := 1
	for i, count := range split(cfg.Instances, procs) {
		spec, err := json.Marshal(childSpec{DSN: dsn, First: first, Count: count, Config: cfg})
		if err != nil {
			return nil, errors.Join(err, f.close())
		}
		first += count
		c := &child{n: i + 1, count: count, msgs: make(chan message, 4)}
		c.cmd = exec.Command(exe)
		c.cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
		c.cmd.Stderr = os.Stderr
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			return nil, errors.Join(err, f.close())
		}
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			return nil, errors.Join(err, f.close())
		}
		if err := c.cmd.Start(); err != nil {
			return nil, errors.Join(fmt.Errorf("-procs: start child process: %w", err), f.close())
		}
		f.children = append(f.children, c)
		go f.read(c, stdout)
	}
	timer := time.NewTimer(childStartTimeout)
	defer timer.Stop()
	for _, c := range f.children {
		select {
		case m, ok := <-c.msgs:
			if !ok || !m.Ready {
				return nil, errors.Join(c.failure(m, ok), f.close())
			}
		case <-timer.C:
			return nil, errors.Join(fmt.Errorf("child process %d not ready after %v", c.n, childStartTimeout), f.close())
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), f.close())
		}
	}
	return f, nil
}

// read decodes c's stdout: progress goes to the current round's counter,
// everything else to c.msgs.
func (f *procFleet) read(c *child, stdout io.Reader) {
	defer close(c.msgs)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // a tally carries every lock wait
	var last int64
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			c.msgs <- message{Error: fmt.Sprintf("unreadable output %q: %v", sc.Text(), err)}
			continue
		}
		if m.Done > 0 {
			if p := f.progress.Load(); p != nil {
				p.Add(m.Done - last)
			}
			last = m.Done
			continue
		}
		if m.Tally != nil {
			last = 0
		}
		c.msgs <- m
	}
}

// failure explains why c did not answer as expected.
func (c *child) failure(m message, ok bool) error {
	switch {
	case !ok:
		return fmt.Errorf("child process %d ended unexpectedly", c.n)
	case m.Error != "":
		return fmt.Errorf("child process %d: %s", c.n, m.Error)
	}
	return fmt.Errorf("child process %d: unexpected message %+v", c.n, m)
}

func (f *procFleet) run(ctx context.Context, mode Mode, orders []int, done *atomic.Int64) (tally, error) {
	f.progress.Store(done)
	defer f.progress.Store(nil)
	// A child stops its round on SIGINT, as on a Ctrl-C at the terminal.
	defer context.AfterFunc(ctx, func() {
		for _, c := range f.children {
			_ = c.cmd.Process.Signal(os.Interrupt)
		}
	})()
	at := 0
	for _, c := range f.children {
		line, err := json.Marshal(command{Mode: mode, Orders: orders[at : at+c.count]})
		if err != nil {
			return tally{}, err
		}
		at += c.count
		if _, err := c.stdin.Write(append(line, '\n')); err != nil {
			return tally{}, fmt.Errorf("child process %d: send the round: %w", c.n, err)
		}
	}
	var t tally
	var errs []error
	for _, c := range f.children {
		m, ok := <-c.msgs
		if !ok || m.Tally == nil {
			errs = append(errs, c.failure(m, ok))
			continue
		}
		t.add(*m.Tally)
	}
	if err := errors.Join(errs...); err != nil {
		return tally{}, err
	}
	return t, ctx.Err()
}

// close ends every child (closing its stdin tells it to stop) and waits for
// it, killing one that does not stop in time.
func (f *procFleet) close() error {
	var errs []error
	for _, c := range f.children {
		_ = c.stdin.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), childStopTimeout)
	defer cancel()
	for _, c := range f.children {
		if !c.drain(ctx.Done()) {
			_ = c.cmd.Process.Kill()
			c.drain(nil)
			errs = append(errs, fmt.Errorf("child process %d did not stop within %v: killed", c.n, childStopTimeout))
		}
		// Wait only once stdout is read to its end, as os/exec requires.
		if err := c.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("child process %d: %w", c.n, err))
		}
	}
	f.children = nil
	return errors.Join(errs...)
}

// drain discards c's messages until its stdout ends (true) or timeout is
// closed (false).
func (c *child) drain(timeout <-chan struct{}) bool {
	for {
		select {
		case _, ok := <-c.msgs:
			if !ok {
				return true
			}
		case <-timeout:
			return false
		}
	}
}
