// Package lockmetrics holds what the metric adapters (namedlock/promlock and
// namedlock/otellock) share: the set of Lockers they watch, whose Stats they
// report summed, and the outcome label of a fenced DoTx.
package lockmetrics

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/namedlock/mysql/namedlock"
)

// Watched is a set of Lockers, safe for concurrent use. The zero value is
// empty and ready.
type Watched struct {
	mu      sync.Mutex
	lockers []*namedlock.Locker
}

// Add adds l; adding it again does nothing. A Locker stays in the set after
// it is closed, so that summed counters never go back.
func (w *Watched) Add(l *namedlock.Locker) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.lockers, l) {
		w.lockers = append(w.lockers, l)
	}
}

// Stats sums the Stats of the Lockers in the set.
func (w *Watched) Stats() namedlock.Stats {
	w.mu.Lock()
	lockers := slices.Clone(w.lockers)
	w.mu.Unlock()
	var sum namedlock.Stats
	for _, l := range lockers {
		st := l.Stats()
		sum.Held += st.Held
		sum.Waiting += st.Waiting
		sum.Queued += st.Queued
		sum.Acquired += st.Acquired
		sum.NotAcquired += st.NotAcquired
		sum.Lost += st.Lost
		sum.Handoffs += st.Handoffs
		sum.ServerAcquisitions += st.ServerAcquisitions
		sum.CancelledWaits += st.CancelledWaits
		sum.WaitDuration += st.WaitDuration
		sum.FencedCommits += st.FencedCommits
		sum.FenceWaitTimeouts += st.FenceWaitTimeouts
		sum.FenceWaitDuration += st.FenceWaitDuration
		sum.ObserverPanics += st.ObserverPanics
	}
	return sum
}

// Prefix is the key-prefix label of key, prefix(key) (the adapters'
// WithKeyPrefix) with every invalid UTF-8 sequence replaced by U+FFFD: the
// Locker accepts any non-empty key, while a Prometheus label value that is
// not valid UTF-8 panics, and an OpenTelemetry exporter cannot encode one.
func Prefix(prefix func(key string) string, key string) string {
	return strings.ToValidUTF8(prefix(key), "\uFFFD")
}

// FenceOutcome is the outcome of a FencedTx event with error err:
// "committed", "fence_timeout" or "rolled_back".
func FenceOutcome(err error) string {
	switch {
	case err == nil:
		return "committed"
	case errors.Is(err, namedlock.ErrFenceWait):
		return "fence_timeout"
	}
	return "rolled_back"
}
