// Package metricstest drives Lockers on a real server through every outcome
// that the metrics adapters (namedlock/promlock, namedlock/otellock) report,
// so that their tests can compare what the adapters export with what the
// Lockers' Stats say:
//
//	var c = promlock.New()
//	run := metricstest.Drive(t, c.Observe, c.Watch)
//	// gather, then compare with run.Stats()
//
// Drive uses two observed Lockers — one plain, one fenced — and an
// unobserved one standing for another instance. On them it makes server
// acquisitions and handoffs (goroutines of one Locker on one key), failed
// TryDo calls and a cancelled wait (on a key held by the other instance), a
// Do whose lock is lost by KILL, fenced commits, a fenced rollback and a
// fence-wait timeout (a stale transaction on the fence row, with
// innodb_lock_wait_timeout 1 s); it fails the test unless every one of those
// shows in Stats, so that a comparison with them cannot pass by counting
// nothing. All its keys are built with keyfmt.Key from one prefix, Prefix.
package metricstest
