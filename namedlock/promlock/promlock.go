package promlock

import (
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/namedlock/mysql/internal/lockmetrics"
	"github.com/namedlock/mysql/namedlock"
)

// DefaultBuckets are the histograms' bucket bounds, in seconds: from a
// handoff (well under a millisecond) to a scheduled job's hold (minutes).
var DefaultBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// ErrInvalidOption is returned by [New] for an option out of range.
var ErrInvalidOption = errors.New("promlock: invalid option")

// Option configures a [Collector].
type Option func(*config) error

type config struct {
	prefix  func(key string) string
	buckets []float64
}

// WithKeyPrefix adds a "prefix" label, prefix(key), to the histograms (an
// invalid UTF-8 sequence in it replaced by U+FFFD, since a label must be
// valid UTF-8 while a key need not be).
// prefix must return few distinct values, whatever the keys: never the key
// itself. [keyfmt.Prefix] is such a function for keys built with keyfmt.Key
// from a fixed set of prefixes.
func WithKeyPrefix(prefix func(key string) string) Option {
	return func(c *config) error {
		if prefix == nil {
			return fmt.Errorf("%w: WithKeyPrefix(nil)", ErrInvalidOption)
		}
		c.prefix = prefix
		return nil
	}
}

// WithBuckets sets the histograms' bucket bounds, in seconds, in increasing
// order (default [DefaultBuckets]).
func WithBuckets(bounds ...float64) Option {
	return func(c *config) error {
		if !increasing(bounds) {
			return fmt.Errorf("%w: WithBuckets(%v): want one or more bounds in increasing order", ErrInvalidOption, bounds)
		}
		c.buckets = slices.Clone(bounds)
		return nil
	}
}

// increasing reports whether bounds is not empty and strictly increasing.
func increasing(bounds []float64) bool {
	for i := 1; i < len(bounds); i++ {
		if !(bounds[i] > bounds[i-1]) {
			return false
		}
	}
	return len(bounds) > 0
}

// Collector is a [prometheus.Collector] of the metrics of the Lockers it
// watches (see the package documentation). It is safe for concurrent use
// and starts no goroutine.
type Collector struct {
	prefix func(key string) string

	watched lockmetrics.Watched

	held, waiting, queued                      *prometheus.Desc
	acquisitions, cancelled, lost              *prometheus.Desc
	fencedCommits, fenceTimeouts               *prometheus.Desc
	waitSeconds, holdSeconds, fenceWaitSeconds *prometheus.HistogramVec
}

// New returns a Collector that watches no Locker yet. It returns an error
// matching [ErrInvalidOption] when an option is out of range.
func New(opts ...Option) (*Collector, error) {
	cfg := config{buckets: DefaultBuckets}
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	labels := []string{"outcome"}
	if cfg.prefix != nil {
		labels = append(labels, "prefix")
	}
	hist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: cfg.buckets}, labels)
	}
	return &Collector{
		prefix:  cfg.prefix,
		held:    prometheus.NewDesc("namedlock_locks_held", "Named locks held now by callers of the Lockers.", nil, nil),
		waiting: prometheus.NewDesc("namedlock_waiters", "Callers waiting now for a named lock, queued locally or at the server.", nil, nil),
		queued:  prometheus.NewDesc("namedlock_waiters_queued", "Callers waiting now, queued locally behind another caller of the same key.", nil, nil),
		acquisitions: prometheus.NewDesc("namedlock_acquisitions_total",
			"Acquisitions of named locks, by outcome: server (granted by the server), handoff (handed over by a local holder), not_acquired.", []string{"outcome"}, nil),
		cancelled:     prometheus.NewDesc("namedlock_cancelled_waits_total", "Server waits ended because their ctx ended (their session was killed).", nil, nil),
		lost:          prometheus.NewDesc("namedlock_locks_lost_total", "Held named locks found lost (session ended, ownership check failed).", nil, nil),
		fencedCommits: prometheus.NewDesc("namedlock_fenced_commits_total", "Fenced DoTx transactions committed.", nil, nil),
		fenceTimeouts: prometheus.NewDesc("namedlock_fence_wait_timeouts_total", "Fenced DoTx that gave up waiting for the fence row held by an earlier holder's transaction.", nil, nil),
		waitSeconds:   hist("namedlock_wait_seconds", "Time spent acquiring a named lock, by outcome: server, handoff, not_acquired."),
		holdSeconds:   hist("namedlock_hold_seconds", "Time a named lock was held, by outcome: released, lost."),
		fenceWaitSeconds: hist("namedlock_fence_wait_seconds",
			"Time a fenced DoTx's first statement waited for the key's fence row, by outcome: committed, rolled_back, fence_timeout."),
	}, nil
}

// Watch adds l to the Lockers whose Stats the Collector reports, summed;
// watching l again does nothing. A Locker stays watched after it is closed,
// so that the counters never go back. Give l the Collector's observer when
// creating it: namedlock.WithObserver(c.Observe).
func (c *Collector) Watch(l *namedlock.Locker) {
	c.watched.Add(l)
}

// Observe records e in the histograms. It is the observer to give the
// Lockers ([namedlock.WithObserver]); to give them another one too, call
// both from one function.
func (c *Collector) Observe(e namedlock.Event) {
	var h *prometheus.HistogramVec
	var outcome string
	seconds := 0.0
	switch e.Outcome {
	case namedlock.Acquired:
		h, outcome, seconds = c.waitSeconds, "server", e.Wait.Seconds()
		if e.Handoff {
			outcome = "handoff"
		}
	case namedlock.NotAcquired:
		h, outcome, seconds = c.waitSeconds, "not_acquired", e.Wait.Seconds()
	case namedlock.Released, namedlock.Lost:
		h, outcome, seconds = c.holdSeconds, "released", e.Held.Seconds()
		if e.Outcome == namedlock.Lost || errors.Is(e.Err, namedlock.ErrLockLost) {
			outcome = "lost"
		}
	case namedlock.FencedTx:
		h, outcome, seconds = c.fenceWaitSeconds, lockmetrics.FenceOutcome(e.Err), e.FenceWait.Seconds()
	default:
		return
	}
	if c.prefix != nil {
		h.WithLabelValues(outcome, lockmetrics.Prefix(c.prefix, e.Key)).Observe(seconds)
		return
	}
	h.WithLabelValues(outcome).Observe(seconds)
}

// Describe sends the descriptors of every metric of the Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.held, c.waiting, c.queued, c.acquisitions, c.cancelled, c.lost, c.fencedCommits, c.fenceTimeouts} {
		ch <- d
	}
	c.waitSeconds.Describe(ch)
	c.holdSeconds.Describe(ch)
	c.fenceWaitSeconds.Describe(ch)
}

// Collect sends the current metrics: the watched Lockers' Stats, summed,
// and the histograms.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.watched.Stats()
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(c.held, st.Held)
	gauge(c.waiting, st.Waiting)
	gauge(c.queued, st.Queued)
	counter(c.acquisitions, st.ServerAcquisitions, "server")
	counter(c.acquisitions, st.Handoffs, "handoff")
	counter(c.acquisitions, st.NotAcquired, "not_acquired")
	counter(c.cancelled, st.CancelledWaits)
	counter(c.lost, st.Lost)
	counter(c.fencedCommits, st.FencedCommits)
	counter(c.fenceTimeouts, st.FenceWaitTimeouts)
	c.waitSeconds.Collect(ch)
	c.holdSeconds.Collect(ch)
	c.fenceWaitSeconds.Collect(ch)
}
