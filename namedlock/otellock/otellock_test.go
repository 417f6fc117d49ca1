package otellock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/namedlock/mysql/internal/metricstest"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/namedlock/otellock"
)

// collected is one collection of a manual reader, by instrument name.
type collected map[string]metricdata.Metrics

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otellock.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otellock.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func outcomeOf(set attribute.Set) string {
	v, _ := set.Value(otellock.OutcomeKey)
	return v.AsString()
}

// value is the value of the asynchronous instrument name for outcome ("":
// no outcome attribute), -1 if absent.
func (c collected) value(name, outcome string) int64 {
	sum, ok := c[name].Data.(metricdata.Sum[int64])
	if !ok {
		return -1
	}
	for _, dp := range sum.DataPoints {
		if outcomeOf(dp.Attributes) == outcome {
			return dp.Value
		}
	}
	return -1
}

// histogram is the count and sum of histogram name for outcome, added up
// over its other attributes.
func (c collected) histogram(name, outcome string) (count uint64, sum float64) {
	h, _ := c[name].Data.(metricdata.Histogram[float64])
	for _, dp := range h.DataPoints {
		if outcomeOf(dp.Attributes) == outcome {
			count += dp.Count
			sum += dp.Sum
		}
	}
	return count, sum
}

// attributeSets returns the attribute sets of the data points of the
// asynchronous counters and of the histograms.
func (c collected) attributeSets() (counters, histograms []attribute.Set) {
	for _, m := range c {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, dp := range d.DataPoints {
				counters = append(counters, dp.Attributes)
			}
		case metricdata.Histogram[float64]:
			for _, dp := range d.DataPoints {
				histograms = append(histograms, dp.Attributes)
			}
		}
	}
	return counters, histograms
}

// TestObserverAgreesWithStats: after Do calls of every outcome (handed
// off, not acquired, a cancelled wait, one lost by KILL, fenced commits, a
// rollback and a fence-wait timeout) a manual reader shows the counts the
// Lockers' Stats show, the histograms count the same events (their sums
// are the Stats' durations), the gauges follow a held lock and a waiting
// caller, each acquisition is one span (the lost one with a "lost" event),
// a span is the child of the caller's, and no attribute carries a key.
func TestObserverAgreesWithStats(t *testing.T) {
	for _, withPrefix := range []bool{false, true} {
		name := "no-prefix"
		if withPrefix {
			name = "prefix"
		}
		t.Run(name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the Lockers' cleanups
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			t.Cleanup(func() {
				_ = mp.Shutdown(context.Background())
				_ = tp.Shutdown(context.Background())
			})
			opts := []otellock.Option{otellock.WithMeterProvider(mp), otellock.WithTracerProvider(tp)}
			if withPrefix {
				opts = append(opts, otellock.WithKeyPrefix(keyfmt.Prefix))
			}
			obs, err := otellock.New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			run := metricstest.Drive(t, obs.Observe, obs.Watch)

			run.WhileWaiting(t, func() {
				if got := collect(t, reader).value("namedlock.waiters", ""); got != 1 {
					t.Errorf("namedlock.waiters = %d while a caller waits, want 1", got)
				}
			})
			// A lock held under the caller's span, for a while.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ctx, root := tp.Tracer("test").Start(ctx, "caller")
			k, err := run.Plain.Acquire(ctx, keyfmt.Key(run.Prefix, "gauge"))
			if err != nil {
				t.Fatal(err)
			}
			run.Keys = append(run.Keys, k.Key())
			if got := collect(t, reader).value("namedlock.locks.held", ""); got != 1 {
				t.Errorf("namedlock.locks.held = %d while one lock is held, want 1", got)
			}
			time.Sleep(20 * time.Millisecond)
			if err := k.Release(ctx); err != nil {
				t.Fatal(err)
			}
			root.End()

			st := run.Stats()
			got := collect(t, reader)
			t.Logf("Stats: %+v", st)
			for _, c := range []struct {
				name, outcome string
				want          int64
			}{
				{"namedlock.locks.held", "", int64(st.Held)},
				{"namedlock.waiters", "", int64(st.Waiting)},
				{"namedlock.waiters.queued", "", int64(st.Queued)},
				{"namedlock.acquisitions", "server", st.ServerAcquisitions},
				{"namedlock.acquisitions", "handoff", st.Handoffs},
				{"namedlock.acquisitions", "not_acquired", st.NotAcquired},
				{"namedlock.waits.cancelled", "", st.CancelledWaits},
				{"namedlock.locks.lost", "", st.Lost},
				{"namedlock.fence.commits", "", st.FencedCommits},
				{"namedlock.fence.wait_timeouts", "", st.FenceWaitTimeouts},
			} {
				if v := got.value(c.name, c.outcome); v != c.want {
					t.Errorf("%s{outcome=%q} = %d, Stats say %d", c.name, c.outcome, v, c.want)
				}
			}
			var waitSum, fenceSum float64
			for _, c := range []struct {
				name, outcome string
				want          int64
			}{
				{"namedlock.wait.duration", "server", st.ServerAcquisitions},
				{"namedlock.wait.duration", "handoff", st.Handoffs},
				{"namedlock.wait.duration", "not_acquired", st.NotAcquired},
				{"namedlock.hold.duration", "lost", st.Lost},
				{"namedlock.hold.duration", "released", st.Acquired - st.Lost}, // every hold has ended
				{"namedlock.fence.wait.duration", "committed", st.FencedCommits},
				{"namedlock.fence.wait.duration", "fence_timeout", st.FenceWaitTimeouts},
				{"namedlock.fence.wait.duration", "rolled_back", 1},
			} {
				n, sum := got.histogram(c.name, c.outcome)
				if int64(n) != c.want {
					t.Errorf("%s{outcome=%q}: count %d, want %d", c.name, c.outcome, n, c.want)
				}
				switch c.name {
				case "namedlock.wait.duration":
					waitSum += sum
				case "namedlock.fence.wait.duration":
					fenceSum += sum
				}
				if u := got[c.name].Unit; u != "s" {
					t.Errorf("%s: unit %q, want s", c.name, u)
				}
			}
			if math.Abs(waitSum-st.WaitDuration.Seconds()) > 1e-6 {
				t.Errorf("namedlock.wait.duration: sum %vs, Stats' WaitDuration %v", waitSum, st.WaitDuration)
			}
			// contract: FenceWaitDuration counts the time in the mint,
			// here a wait that ran into the 1 s innodb_lock_wait_timeout.
			if math.Abs(fenceSum-st.FenceWaitDuration.Seconds()) > 1e-6 || st.FenceWaitDuration < 900*time.Millisecond {
				t.Errorf("namedlock.fence.wait.duration: sum %vs, Stats' FenceWaitDuration %v (at least the 1 s timeout)", fenceSum, st.FenceWaitDuration)
			}
			counterSets, sets := got.attributeSets() // sets: those that may carry a prefix

			// Spans: one per acquisition, the lost one marked.
			var lock []sdktrace.ReadOnlySpan
			for _, s := range spans.Ended() {
				if s.Name() == "namedlock.lock" {
					lock = append(lock, s)
					sets = append(sets, attribute.NewSet(s.Attributes()...))
				}
			}
			if int64(len(lock)) != st.Acquired+st.NotAcquired {
				t.Errorf("%d namedlock.lock spans, want one per acquisition: %d", len(lock), st.Acquired+st.NotAcquired)
			}
			var lostSpans, failed, children int
			for _, s := range lock {
				events := map[string]bool{}
				for _, ev := range s.Events() {
					events[ev.Name] = true
				}
				if events["lost"] {
					lostSpans++
				}
				if s.Status().Code == codes.Error {
					failed++
				}
				if !s.StartTime().Before(s.EndTime()) && !s.StartTime().Equal(s.EndTime()) {
					t.Errorf("span %v ends before it starts", s)
				}
				if s.Parent().SpanID() == root.SpanContext().SpanID() {
					children++
					// contract: the lock span lasts from the grant
					// (its acquired event) to the release, past the
					// caller's 20 ms in its section.
					if len(s.Events()) != 1 || s.Events()[0].Name != "acquired" || s.EndTime().Sub(s.Events()[0].Time) < 20*time.Millisecond ||
						s.StartTime().After(s.Events()[0].Time) {
						t.Errorf("the caller's lock span: start %v, events %v, end %v; want acquired, then held at least 20ms", s.StartTime(), s.Events(), s.EndTime())
					}
				}
			}
			if int64(lostSpans) != st.Lost || int64(failed) != st.NotAcquired+st.Lost || children != 1 {
				t.Errorf("spans: %d with a lost event (want %d), %d with an error status (want %d), %d children of the caller's span (want 1)",
					lostSpans, st.Lost, failed, st.NotAcquired+st.Lost, children)
			}

			for i, set := range append(sets, counterSets...) {
				if _, ok := set.Value(otellock.PrefixKey); ok != (withPrefix && i < len(sets)) {
					t.Errorf("attributes %v: a prefix %v, want %v", set.ToSlice(), ok, withPrefix && i < len(sets))
				}
				for _, kv := range set.ToSlice() {
					for _, key := range run.Keys {
						if v := kv.Value.String(); strings.Contains(v, key) || strings.Contains(v, keyfmt.Portable(key)) {
							t.Errorf("attribute %s=%q carries the key %q", kv.Key, v, key)
						}
					}
					if kv.Key == otellock.PrefixKey && kv.Value.AsString() != run.Prefix {
						t.Errorf("prefix attribute %q, want %q", kv.Value.AsString(), run.Prefix)
					}
				}
			}

			if err := obs.Close(); err != nil {
				t.Fatal(err)
			}
			if v := collect(t, reader).value("namedlock.acquisitions", "server"); v != -1 {
				t.Errorf("after Close: namedlock.acquisitions = %d, want no data point", v)
			}
		})
	}
}

// TestOptions: out-of-range options are refused.
func TestOptions(t *testing.T) {
	for name, opt := range map[string]otellock.Option{
		"nil meter provider":  otellock.WithMeterProvider(nil),
		"nil tracer provider": otellock.WithTracerProvider(nil),
		"nil prefix":          otellock.WithKeyPrefix(nil),
		"no buckets":          otellock.WithBuckets(),
		"decreasing buckets":  otellock.WithBuckets(1, 0.5),
		"NaN bucket":          otellock.WithBuckets(0.5, math.NaN()),
	} {
		if _, err := otellock.New(opt); !errors.Is(err, otellock.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", name, err)
		}
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	obs, err := otellock.New(otellock.WithMeterProvider(mp), otellock.WithBuckets(0.1, 1, 10))
	if err != nil {
		t.Fatal(err)
	}
	obs.Observe(namedlock.Event{Key: "k", Outcome: namedlock.NotAcquired, Wait: 2 * time.Second, Err: namedlock.ErrNotAcquired})
	h := collect(t, reader)["namedlock.wait.duration"].Data.(metricdata.Histogram[float64])
	if dp := h.DataPoints[0]; len(dp.Bounds) != 3 || dp.Bounds[2] != 10 || dp.BucketCounts[2] != 1 {
		t.Errorf("bounds %v, counts %v; want 0.1, 1, 10 with the 2 s wait in the third bucket", dp.Bounds, dp.BucketCounts)
	}
}

// TestNonUTF8Prefix: a key whose prefix is not valid UTF-8 (the Locker
// accepts any non-empty key) is recorded under a valid UTF-8 prefix
// attribute, in the histograms and the span, without a panic: an exporter
// must be able to encode it (OTLP's strings are UTF-8).
func TestNonUTF8Prefix(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	obs, err := otellock.New(otellock.WithMeterProvider(mp), otellock.WithTracerProvider(tp), otellock.WithKeyPrefix(keyfmt.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = obs.Close() })
	key := "\xff\xfeorder:42"
	ctx := context.Background()
	for _, e := range []namedlock.Event{
		{Key: key, Outcome: namedlock.Acquired, Wait: time.Millisecond, Context: ctx},
		{Key: key, Outcome: namedlock.Released, Wait: time.Millisecond, Held: time.Millisecond, Context: ctx},
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Observe(%v of a key with a non-UTF-8 prefix) panicked: %v", e.Outcome, p)
				}
			}()
			obs.Observe(e)
		}()
	}
	valid := func(where string, set attribute.Set) {
		if v, ok := set.Value(otellock.PrefixKey); ok && !utf8.ValidString(v.AsString()) {
			t.Errorf("%s: %s = %q, not valid UTF-8", where, otellock.PrefixKey, v.AsString())
		}
	}
	_, hists := collect(t, reader).attributeSets()
	if len(hists) == 0 {
		t.Error("no histogram data point")
	}
	for _, set := range hists {
		valid("histogram", set)
	}
	for _, sp := range spans.Ended() {
		valid("span "+sp.Name(), attribute.NewSet(sp.Attributes()...))
	}
}
