package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress pacing: a live line on a terminal, an occasional plain line in a
// log or a pipe.
const (
	ttyEvery   = 100 * time.Millisecond
	plainEvery = 2 * time.Second
	barWidth   = 30
)

// isTerminal reports whether f is a character device (a terminal), without
// any dependency beyond os.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress shows how far a round has got while it runs.
type progress struct {
	out   io.Writer
	tty   bool
	label string
	unit  string // what is counted, plural: "orders"
	total int64
	Done  atomic.Int64 // orders placed so far; the round adds to it

	start time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
}

// startProgress starts showing the progress of a round of total orders.
func startProgress(out io.Writer, tty bool, label string, total int, unit string) *progress {
	p := &progress{out: out, tty: tty, label: label, unit: unit, total: int64(total), start: time.Now(), stop: make(chan struct{})}
	if !tty {
		fmt.Fprintf(out, "%s: %d %s...\n", label, total, unit)
	}
	p.wg.Go(p.loop)
	return p
}

func (p *progress) loop() {
	every := plainEvery
	if p.tty {
		every = ttyEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.show()
		}
	}
}

func (p *progress) show() {
	n, elapsed := p.Done.Load(), time.Since(p.start)
	if !p.tty {
		fmt.Fprintf(p.out, "%s: %d/%d %s, %s\n", p.label, n, p.total, p.unit, fmtDuration(elapsed))
		return
	}
	filled := 0
	if p.total > 0 {
		filled = int(min(n, p.total) * barWidth / p.total)
	}
	bar := strings.Repeat("#", filled) + strings.Repeat(".", barWidth-filled)
	fmt.Fprintf(p.out, "\r%s [%s] %d/%d %s %s\x1b[K", p.label, bar, n, p.total, p.unit, fmtDuration(elapsed))
}

// finish stops the display: on a terminal it clears the live line, otherwise
// it prints a last line.
func (p *progress) finish() {
	close(p.stop)
	p.wg.Wait()
	if p.tty {
		fmt.Fprint(p.out, "\r\x1b[K")
		return
	}
	p.show()
}
