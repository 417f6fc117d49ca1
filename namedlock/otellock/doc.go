// Package otellock records the metrics and traces of namedlock Lockers with
// OpenTelemetry: instruments fed by each Locker's Stats (asynchronous
// counters, read at every collection) and by its observer (histograms of
// wait, hold and fence-wait times, and a span per acquisition).
//
//	obs, err := otellock.New() // the global MeterProvider and TracerProvider, or WithMeterProvider, WithTracerProvider
//	if err != nil { return err }
//	locker, err := namedlock.New(lockDB, namedlock.WithObserver(obs.Observe))
//	if err != nil { return err }
//	obs.Watch(locker)
//
// # Metrics
//
//	namedlock.locks.held           up-down counter {lock}         locks held now
//	namedlock.waiters              up-down counter {caller}       callers waiting now (locally or at the server)
//	namedlock.waiters.queued       up-down counter {caller}       of those, callers queued locally behind another caller of the same key
//	namedlock.acquisitions         counter {acquisition}          by namedlock.outcome: server, handoff, not_acquired
//	namedlock.waits.cancelled      counter {wait}                 server waits ended because their ctx ended
//	namedlock.locks.lost           counter {lock}                 held locks found lost
//	namedlock.fence.commits        counter {transaction}          fenced DoTx transactions committed
//	namedlock.fence.wait_timeouts  counter {transaction}          fenced DoTx that gave up waiting for the fence row
//	namedlock.wait.duration        histogram s                    time spent acquiring, by namedlock.outcome: server, handoff, not_acquired
//	namedlock.hold.duration        histogram s                    time a lock was held, by namedlock.outcome: released, lost
//	namedlock.fence.wait.duration  histogram s                    time a fenced DoTx's mint waited for the fence row, by namedlock.outcome: committed, rolled_back, fence_timeout
//
// The counters are the Lockers' [namedlock.Stats], summed over the Lockers
// watched, so they agree with Stats exactly; the histograms' counts agree
// with them too (a lost lock was first an acquisition: it is a counter of
// its own), except for a lock found lost while being given back unheld
// (granted to a wait cancelled at that moment), which Stats count as lost
// and no hold event reports. No attribute carries the key; [WithKeyPrefix] adds
// namedlock.key.prefix to the histograms and spans.
//
// # Traces
//
// Each acquisition is a span named "namedlock.lock", a child of the span in
// the ctx the lock was acquired with. It starts when the acquisition began
// and ends when the hold ends (released, lost, or taken back by
// Locker.Close), with an "acquired" event where the wait ended and a "lost"
// event and an error status when the lock was lost; an acquisition that
// failed is a span of its wait alone, with an error status. The span is
// recorded when it ends, from the observer's event, so it is not the parent
// of the spans that fn starts: those are its siblings, beside it in time.
package otellock
