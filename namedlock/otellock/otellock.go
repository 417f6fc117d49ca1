package otellock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/namedlock/mysql/internal/lockmetrics"
	"github.com/namedlock/mysql/namedlock"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/namedlock/mysql/namedlock/otellock"

// DefaultBuckets are the histograms' bucket bounds, in seconds: from a
// handoff (well under a millisecond) to a scheduled job's hold (minutes).
var DefaultBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// ErrInvalidOption is returned by [New] for an option out of range.
var ErrInvalidOption = errors.New("otellock: invalid option")

// Attribute keys of the metrics and spans.
const (
	OutcomeKey = attribute.Key("namedlock.outcome")    // what happened; see the package documentation
	PrefixKey  = attribute.Key("namedlock.key.prefix") // WithKeyPrefix's value for the key
	HandoffKey = attribute.Key("namedlock.handoff")    // spans: the lock was handed over by a local holder
	WaitKey    = attribute.Key("namedlock.wait")       // spans' "acquired" event: the wait, in seconds
)

// The span of an acquisition and its events.
const (
	spanName     = "namedlock.lock"
	acquiredName = "acquired"
	lostName     = "lost"
)

// Option configures an [Observer].
type Option func(*config) error

type config struct {
	mp      metric.MeterProvider
	tp      trace.TracerProvider
	prefix  func(key string) string
	buckets []float64
}

// WithMeterProvider records the metrics with mp instead of the global
// MeterProvider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: WithMeterProvider(nil)", ErrInvalidOption)
		}
		c.mp = mp
		return nil
	}
}

// WithTracerProvider records the spans with tp instead of the global
// TracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return fmt.Errorf("%w: WithTracerProvider(nil)", ErrInvalidOption)
		}
		c.tp = tp
		return nil
	}
}

// WithKeyPrefix adds the attribute namedlock.key.prefix, prefix(key), to
// the histograms and the spans (an invalid UTF-8 sequence in it replaced by
// U+FFFD: OTLP's strings are UTF-8, a key need not be). prefix must return few distinct values,
// whatever the keys: never the key itself. [keyfmt.Prefix] is such a
// function for keys built with keyfmt.Key from a fixed set of prefixes.
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
		for i := range bounds {
			if i > 0 && !(bounds[i] > bounds[i-1]) {
				return fmt.Errorf("%w: WithBuckets(%v): want bounds in increasing order", ErrInvalidOption, bounds)
			}
		}
		if len(bounds) == 0 {
			return fmt.Errorf("%w: WithBuckets(): no bounds", ErrInvalidOption)
		}
		c.buckets = slices.Clone(bounds)
		return nil
	}
}

// Observer records the metrics and spans of the Lockers it watches (see the
// package documentation). It is safe for concurrent use and starts no
// goroutine.
type Observer struct {
	prefix func(key string) string
	tracer trace.Tracer
	reg    metric.Registration

	watched lockmetrics.Watched

	waitDuration, holdDuration, fenceWaitDuration metric.Float64Histogram
}

// New returns an Observer that watches no Locker yet. It returns an error
// matching [ErrInvalidOption] when an option is out of range, or the
// meter's error when an instrument cannot be created.
func New(opts ...Option) (*Observer, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	m := cfg.mp.Meter(ScopeName)
	o := &Observer{prefix: cfg.prefix, tracer: cfg.tp.Tracer(ScopeName)}
	mk := &maker{m: m, buckets: cfg.buckets}
	o.waitDuration = mk.hist("namedlock.wait.duration", "Time spent acquiring a named lock.")
	o.holdDuration = mk.hist("namedlock.hold.duration", "Time a named lock was held.")
	o.fenceWaitDuration = mk.hist("namedlock.fence.wait.duration", "Time a fenced DoTx's first statement waited for the key's fence row.")
	si := newStatsInstruments(mk)
	if err := errors.Join(mk.errs...); err != nil {
		return nil, err
	}
	o.reg, err = m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		si.observe(ob, o.watched.Stats())
		return nil
	}, si.all()...)
	if err != nil {
		return nil, err
	}
	return o, nil
}

// newConfig applies opts to the defaults: DefaultBuckets, and the global
// MeterProvider and TracerProvider unless an option gives one.
func newConfig(opts []Option) (config, error) {
	cfg := config{buckets: DefaultBuckets}
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return config{}, err
		}
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	return cfg, nil
}

// Watch adds l to the Lockers whose Stats the Observer reports, summed;
// watching l again does nothing. A Locker stays watched after it is closed,
// so that the counters never go back. Give l the Observer when creating
// it: namedlock.WithObserver(o.Observe).
func (o *Observer) Watch(l *namedlock.Locker) {
	o.watched.Add(l)
}

// Close stops reporting the watched Lockers' Stats (it unregisters the
// callback that reads them); Observe still records histograms and spans.
func (o *Observer) Close() error { return o.reg.Unregister() }

// Observe records e: in a histogram, and as a span when it ends an
// acquisition that failed or a hold. It is the observer to give the Lockers
// ([namedlock.WithObserver]); to give them another one too, call both from
// one function.
func (o *Observer) Observe(e namedlock.Event) {
	now := time.Now()
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	var outcome string
	switch e.Outcome {
	case namedlock.Acquired:
		outcome = "server"
		if e.Handoff {
			outcome = "handoff"
		}
		o.waitDuration.Record(ctx, e.Wait.Seconds(), o.attrs(outcome, e.Key))
		return // its span is recorded when the hold ends
	case namedlock.NotAcquired:
		outcome = "not_acquired"
		o.waitDuration.Record(ctx, e.Wait.Seconds(), o.attrs(outcome, e.Key))
	case namedlock.Released, namedlock.Lost:
		outcome = "released"
		if e.Outcome == namedlock.Lost || errors.Is(e.Err, namedlock.ErrLockLost) {
			outcome = "lost"
		}
		o.holdDuration.Record(ctx, e.Held.Seconds(), o.attrs(outcome, e.Key))
	case namedlock.FencedTx:
		o.fenceWaitDuration.Record(ctx, e.FenceWait.Seconds(), o.attrs(lockmetrics.FenceOutcome(e.Err), e.Key))
		return
	default:
		return
	}
	o.span(ctx, e, outcome, now)
}

// span records the span of the acquisition that e ends, at now.
func (o *Observer) span(ctx context.Context, e namedlock.Event, outcome string, now time.Time) {
	attrs := []attribute.KeyValue{OutcomeKey.String(outcome)}
	if o.prefix != nil {
		attrs = append(attrs, PrefixKey.String(lockmetrics.Prefix(o.prefix, e.Key)))
	}
	if e.Outcome != namedlock.NotAcquired {
		attrs = append(attrs, HandoffKey.Bool(e.Handoff))
	}
	acquired := now.Add(-e.Held)
	_, sp := o.tracer.Start(ctx, spanName, trace.WithTimestamp(acquired.Add(-e.Wait)),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if e.Outcome != namedlock.NotAcquired {
		sp.AddEvent(acquiredName, trace.WithTimestamp(acquired), trace.WithAttributes(WaitKey.Float64(e.Wait.Seconds())))
	}
	if outcome == "lost" {
		sp.AddEvent(lostName, trace.WithTimestamp(now))
	}
	if e.Err != nil {
		sp.SetStatus(codes.Error, e.Err.Error())
	}
	sp.End(trace.WithTimestamp(now))
}

// attrs is the attribute set of a histogram record.
func (o *Observer) attrs(outcome, key string) metric.RecordOption {
	if o.prefix == nil {
		return metric.WithAttributes(OutcomeKey.String(outcome))
	}
	return metric.WithAttributes(OutcomeKey.String(outcome), PrefixKey.String(lockmetrics.Prefix(o.prefix, key)))
}
