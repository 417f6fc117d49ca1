package otellock

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/namedlock/mysql/namedlock"
)

// maker creates instruments on one meter and collects their errors, so
// that New reports every instrument that could not be created at once.
type maker struct {
	m       metric.Meter
	buckets []float64 // the histograms' bounds
	errs    []error
}

// hist creates a histogram of seconds.
func (mk *maker) hist(name, desc string) metric.Float64Histogram {
	h, err := mk.m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(mk.buckets...))
	mk.errs = append(mk.errs, err)
	return h
}

// gauge creates an observable up-down counter.
func (mk *maker) gauge(name, unit, desc string) metric.Int64ObservableUpDownCounter {
	g, err := mk.m.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	mk.errs = append(mk.errs, err)
	return g
}

// counter creates an observable counter.
func (mk *maker) counter(name, unit, desc string) metric.Int64ObservableCounter {
	c, err := mk.m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	mk.errs = append(mk.errs, err)
	return c
}

// statsInstruments are the observable instruments that report the watched
// Lockers' Stats at every collection.
type statsInstruments struct {
	held, waiting, queued                            metric.Int64ObservableUpDownCounter
	acquisitions, cancelled, lost, commits, timeouts metric.Int64ObservableCounter
}

// newStatsInstruments creates the Stats instruments with mk.
func newStatsInstruments(mk *maker) *statsInstruments {
	return &statsInstruments{
		held:         mk.gauge("namedlock.locks.held", "{lock}", "Named locks held now by callers of the Lockers."),
		waiting:      mk.gauge("namedlock.waiters", "{caller}", "Callers waiting now for a named lock, queued locally or at the server."),
		queued:       mk.gauge("namedlock.waiters.queued", "{caller}", "Callers waiting now, queued locally behind another caller of the same key."),
		acquisitions: mk.counter("namedlock.acquisitions", "{acquisition}", "Acquisitions of named locks, by outcome: server, handoff, not_acquired."),
		cancelled:    mk.counter("namedlock.waits.cancelled", "{wait}", "Server waits ended because their ctx ended (their session was killed)."),
		lost:         mk.counter("namedlock.locks.lost", "{lock}", "Held named locks found lost."),
		commits:      mk.counter("namedlock.fence.commits", "{transaction}", "Fenced DoTx transactions committed."),
		timeouts:     mk.counter("namedlock.fence.wait_timeouts", "{transaction}", "Fenced DoTx that gave up waiting for the fence row."),
	}
}

// all returns the instruments, for the callback's registration.
func (si *statsInstruments) all() []metric.Observable {
	return []metric.Observable{si.held, si.waiting, si.queued, si.acquisitions, si.cancelled, si.lost, si.commits, si.timeouts}
}

// The acquisitions counter's outcomes.
var (
	serverOutcome      = metric.WithAttributeSet(attribute.NewSet(OutcomeKey.String("server")))
	handoffOutcome     = metric.WithAttributeSet(attribute.NewSet(OutcomeKey.String("handoff")))
	notAcquiredOutcome = metric.WithAttributeSet(attribute.NewSet(OutcomeKey.String("not_acquired")))
)

// observe reports st on ob.
func (si *statsInstruments) observe(ob metric.Observer, st namedlock.Stats) {
	ob.ObserveInt64(si.held, int64(st.Held))
	ob.ObserveInt64(si.waiting, int64(st.Waiting))
	ob.ObserveInt64(si.queued, int64(st.Queued))
	ob.ObserveInt64(si.acquisitions, st.ServerAcquisitions, serverOutcome)
	ob.ObserveInt64(si.acquisitions, st.Handoffs, handoffOutcome)
	ob.ObserveInt64(si.acquisitions, st.NotAcquired, notAcquiredOutcome)
	ob.ObserveInt64(si.cancelled, st.CancelledWaits)
	ob.ObserveInt64(si.lost, st.Lost)
	ob.ObserveInt64(si.commits, st.FencedCommits)
	ob.ObserveInt64(si.timeouts, st.FenceWaitTimeouts)
}
