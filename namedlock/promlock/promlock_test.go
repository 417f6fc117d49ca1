package promlock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/namedlock/mysql/internal/metricstest"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/namedlock/promlock"
)

// scrape gathers reg's metrics by name.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	return byName
}

// series returns the metrics of family name whose outcome label is outcome
// ("" for a family without labels).
func series(fams map[string]*dto.MetricFamily, name, outcome string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		got := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "outcome" {
				got = lp.GetValue()
			}
		}
		if got == outcome {
			out = append(out, m)
		}
	}
	return out
}

// value is the value of the gauge or counter name{outcome}, -1 if absent.
func value(fams map[string]*dto.MetricFamily, name, outcome string) float64 {
	ms := series(fams, name, outcome)
	if len(ms) != 1 {
		return -1
	}
	if g := ms[0].GetGauge(); g != nil {
		return g.GetValue()
	}
	return ms[0].GetCounter().GetValue()
}

// histogram is the count and sum of the histogram name{outcome}, added up
// over its other labels.
func histogram(fams map[string]*dto.MetricFamily, name, outcome string) (count uint64, sum float64) {
	for _, m := range series(fams, name, outcome) {
		count += m.GetHistogram().GetSampleCount()
		sum += m.GetHistogram().GetSampleSum()
	}
	return count, sum
}

// TestCollectorAgreesWithStats: after Do calls of every outcome (handed
// off, not acquired, a cancelled wait, one lost by KILL, fenced commits, a
// rollback and a fence-wait timeout) a scrape shows the counts the Lockers'
// Stats show, the histograms count the same events (and their sums are the
// Stats' durations), the gauges follow a held lock and a waiting caller,
// no label carries a key, and the metrics pass Prometheus' lint.
func TestCollectorAgreesWithStats(t *testing.T) {
	for _, withPrefix := range []bool{false, true} {
		name := "no-prefix"
		if withPrefix {
			name = "prefix"
		}
		t.Run(name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the Lockers' cleanups
			var opts []promlock.Option
			if withPrefix {
				opts = append(opts, promlock.WithKeyPrefix(keyfmt.Prefix))
			}
			c, err := promlock.New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			run := metricstest.Drive(t, c.Observe, c.Watch)

			run.WhileWaiting(t, func() {
				if got := value(scrape(t, reg), "namedlock_waiters", ""); got != 1 {
					t.Errorf("namedlock_waiters = %v while a caller waits, want 1", got)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			k, err := run.Plain.Acquire(ctx, keyfmt.Key(run.Prefix, "gauge"))
			if err != nil {
				t.Fatal(err)
			}
			run.Keys = append(run.Keys, k.Key())
			if got := value(scrape(t, reg), "namedlock_locks_held", ""); got != 1 {
				t.Errorf("namedlock_locks_held = %v while one lock is held, want 1", got)
			}
			if err := k.Release(ctx); err != nil {
				t.Fatal(err)
			}

			st := run.Stats()
			fams := scrape(t, reg)
			t.Logf("Stats: %+v", st)
			for _, c := range []struct {
				name, outcome string
				want          int64
			}{
				{"namedlock_locks_held", "", int64(st.Held)},
				{"namedlock_waiters", "", int64(st.Waiting)},
				{"namedlock_waiters_queued", "", int64(st.Queued)},
				{"namedlock_acquisitions_total", "server", st.ServerAcquisitions},
				{"namedlock_acquisitions_total", "handoff", st.Handoffs},
				{"namedlock_acquisitions_total", "not_acquired", st.NotAcquired},
				{"namedlock_cancelled_waits_total", "", st.CancelledWaits},
				{"namedlock_locks_lost_total", "", st.Lost},
				{"namedlock_fenced_commits_total", "", st.FencedCommits},
				{"namedlock_fence_wait_timeouts_total", "", st.FenceWaitTimeouts},
			} {
				if got := value(fams, c.name, c.outcome); got != float64(c.want) {
					t.Errorf("%s{outcome=%q} = %v, Stats say %d", c.name, c.outcome, got, c.want)
				}
			}
			var waitSum float64
			for _, c := range []struct {
				name, outcome string
				want          int64
			}{
				{"namedlock_wait_seconds", "server", st.ServerAcquisitions},
				{"namedlock_wait_seconds", "handoff", st.Handoffs},
				{"namedlock_wait_seconds", "not_acquired", st.NotAcquired},
				{"namedlock_hold_seconds", "lost", st.Lost},
				{"namedlock_hold_seconds", "released", st.Acquired - st.Lost}, // every hold has ended
				{"namedlock_fence_wait_seconds", "committed", st.FencedCommits},
				{"namedlock_fence_wait_seconds", "fence_timeout", st.FenceWaitTimeouts},
				{"namedlock_fence_wait_seconds", "rolled_back", 1},
			} {
				n, sum := histogram(fams, c.name, c.outcome)
				if int64(n) != c.want {
					t.Errorf("%s{outcome=%q}: count %d, want %d", c.name, c.outcome, n, c.want)
				}
				if c.name == "namedlock_wait_seconds" {
					waitSum += sum
				}
			}
			if !near(waitSum, st.WaitDuration) {
				t.Errorf("namedlock_wait_seconds: sum %vs, Stats' WaitDuration %v", waitSum, st.WaitDuration)
			}
			var fenceSum float64
			for _, o := range []string{"committed", "fence_timeout", "rolled_back"} {
				_, s := histogram(fams, "namedlock_fence_wait_seconds", o)
				fenceSum += s
			}
			// contract: FenceWaitDuration counts the time in the mint,
			// here a wait that ran into the 1 s innodb_lock_wait_timeout.
			if !near(fenceSum, st.FenceWaitDuration) || st.FenceWaitDuration < 900*time.Millisecond {
				t.Errorf("namedlock_fence_wait_seconds: sum %vs, Stats' FenceWaitDuration %v (at least the 1 s timeout)", fenceSum, st.FenceWaitDuration)
			}

			for _, f := range fams {
				for _, m := range f.GetMetric() {
					for _, lp := range m.GetLabel() {
						for _, key := range run.Keys {
							if strings.Contains(lp.GetValue(), key) || strings.Contains(lp.GetValue(), keyfmt.Portable(key)) {
								t.Errorf("%s: label %s=%q carries the key %q", f.GetName(), lp.GetName(), lp.GetValue(), key)
							}
						}
						if lp.GetName() == "prefix" && lp.GetValue() != run.Prefix {
							t.Errorf("%s: prefix label %q, want %q", f.GetName(), lp.GetValue(), run.Prefix)
						}
					}
				}
			}
			if withPrefix {
				if n, _ := histogram(fams, "namedlock_wait_seconds", "server"); n == 0 || !hasLabel(fams["namedlock_wait_seconds"], "prefix") {
					t.Error("WithKeyPrefix: no prefix label on namedlock_wait_seconds")
				}
			}
			problems, err := testutil.CollectAndLint(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("lint: %s: %s", p.Metric, p.Text)
			}
		})
	}
}

// near reports whether seconds is d, within float rounding.
func near(seconds float64, d time.Duration) bool {
	return math.Abs(seconds-d.Seconds()) < 1e-6
}

func hasLabel(f *dto.MetricFamily, name string) bool {
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == name {
				return true
			}
		}
	}
	return false
}

// TestOptions: out-of-range options are refused.
func TestOptions(t *testing.T) {
	for name, opt := range map[string]promlock.Option{
		"nil prefix":         promlock.WithKeyPrefix(nil),
		"no buckets":         promlock.WithBuckets(),
		"decreasing buckets": promlock.WithBuckets(1, 0.5),
		"duplicate bucket":   promlock.WithBuckets(0.5, 0.5),
		"NaN bucket":         promlock.WithBuckets(0.5, math.NaN()),
	} {
		if _, err := promlock.New(opt); !errors.Is(err, promlock.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", name, err)
		}
	}
	c, err := promlock.New(promlock.WithBuckets(0.1, 1, 10))
	if err != nil {
		t.Fatal(err)
	}
	c.Observe(namedlock.Event{Key: "k", Outcome: namedlock.Acquired, Wait: 2 * time.Second})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	b := series(scrape(t, reg), "namedlock_wait_seconds", "server")[0].GetHistogram().GetBucket()
	if len(b) != 3 || b[2].GetUpperBound() != 10 || b[2].GetCumulativeCount() != 1 || b[1].GetCumulativeCount() != 0 {
		t.Errorf("buckets %v, want 0.1, 1, 10 with the 2 s wait in the last", b)
	}
}

// TestNonUTF8Prefix: a key whose prefix is not valid UTF-8 (the Locker
// accepts any non-empty key) is recorded, under a valid UTF-8 prefix
// label, rather than making the histogram panic inside the Locker's
// acquisition or release.
func TestNonUTF8Prefix(t *testing.T) {
	c, err := promlock.New(promlock.WithKeyPrefix(keyfmt.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	key := "\xff\xfeorder:42"
	for _, e := range []namedlock.Event{
		{Key: key, Outcome: namedlock.Acquired, Wait: time.Millisecond},
		{Key: key, Outcome: namedlock.Released, Held: time.Millisecond},
		{Key: key, Outcome: namedlock.NotAcquired, Wait: time.Millisecond},
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Observe(%v of a key with a non-UTF-8 prefix) panicked: %v", e.Outcome, p)
				}
			}()
			c.Observe(e)
		}()
	}
	fams := scrape(t, reg)
	for _, m := range fams["namedlock_wait_seconds"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if !utf8.ValidString(lp.GetValue()) {
				t.Errorf("label %s = %q, not valid UTF-8", lp.GetName(), lp.GetValue())
			}
		}
	}
	if n, _ := histogram(fams, "namedlock_wait_seconds", "server"); n != 1 {
		t.Errorf("namedlock_wait_seconds{outcome=server} counts %d, want 1", n)
	}
}
