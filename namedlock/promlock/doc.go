// Package promlock exports the metrics of namedlock Lockers to Prometheus:
// a [prometheus.Collector] fed by each Locker's Stats (gauges and counters,
// read at every scrape) and by its observer (histograms of wait, hold and
// fence-wait times).
//
//	metrics, err := promlock.New()
//	if err != nil { return err }
//	locker, err := namedlock.New(lockDB, namedlock.WithObserver(metrics.Observe))
//	if err != nil { return err }
//	metrics.Watch(locker)
//	prometheus.MustRegister(metrics)
//
// # Metrics
//
//	namedlock_locks_held                  gauge     locks held now
//	namedlock_waiters                     gauge     callers waiting now for a lock (locally or at the server)
//	namedlock_waiters_queued              gauge     of those, callers queued locally behind another caller of the same key
//	namedlock_acquisitions_total          counter   acquisitions, by outcome: server, handoff, not_acquired
//	namedlock_cancelled_waits_total       counter   server waits ended because their ctx ended (their session killed)
//	namedlock_locks_lost_total            counter   held locks found lost
//	namedlock_fenced_commits_total        counter   fenced DoTx transactions committed
//	namedlock_fence_wait_timeouts_total   counter   fenced DoTx that gave up waiting for the fence row (ErrFenceWait)
//	namedlock_wait_seconds                histogram time spent acquiring, by outcome: server, handoff, not_acquired
//	namedlock_hold_seconds                histogram time a lock was held, by outcome: released, lost
//	namedlock_fence_wait_seconds          histogram time a fenced DoTx's mint waited for the fence row, by outcome: committed, rolled_back, fence_timeout
//
// The counters are the Lockers' [namedlock.Stats], summed over the Lockers
// watched, so they agree with Stats exactly; a lost lock was first counted
// as an acquisition, so lost locks are a counter of their own rather than
// an outcome of acquisitions_total. The histograms come from the observer's
// events: the count of namedlock_wait_seconds for an outcome is the
// matching acquisitions_total, that of namedlock_hold_seconds for "lost"
// is locks_lost_total (a hold taken back by Locker.Close is "released"),
// except for a lock found lost while being given back unheld (granted to a
// wait cancelled at that moment): Stats count it lost, no hold ended.
//
// # Labels
//
// No metric carries the key: its values are unbounded. [WithKeyPrefix]
// adds a "prefix" label to the histograms, with a value computed from the
// key by a function that must return few distinct values —
// [keyfmt.Prefix] does for keys built with keyfmt.Key from a fixed set of
// prefixes. Counts per prefix are then the histograms' _count series.
// To tell several Collectors apart (one per lock pool, say), register each
// with [prometheus.WrapRegistererWith] and a constant label.
package promlock
