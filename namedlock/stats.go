package namedlock

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a Locker's state and counters, in the manner of
// [database/sql.DBStats]: gauges describe now, counters are cumulative since
// the Locker was created.
type Stats struct {
	Held    int // locks held now by callers of this Locker
	Waiting int // callers waiting now for a lock (queued locally or at the server)
	Queued  int // of those, callers queued locally behind another caller of the same key

	Acquired           int64         // successful acquisitions
	NotAcquired        int64         // acquisitions that ended without the lock
	Lost               int64         // held locks found lost
	Handoffs           int64         // acquisitions served by handing over a held server lock
	ServerAcquisitions int64         // acquisitions that took the lock from the server
	CancelledWaits     int64         // server waits ended because ctx ended (their session is killed)
	WaitDuration       time.Duration // total time spent acquiring, successful or not

	ObserverPanics int64 // calls of the observer ([WithObserver]) that panicked; each was recovered

	// LostCommits counts DoTx transactions that committed (DoTx returned
	// nil) and whose lock was found lost during or after their COMMIT. Such
	// a loss may have happened before the COMMIT reached the server:
	// without fencing, the transaction may then have overlapped another
	// holder of the key; with fencing, the fence row ordered it. A DoTx
	// that handed its lock on before its COMMIT (WithFencing,
	// WithSerializableHandoff) is counted when the loss of the lock's
	// session is found — by its handoff's proof, by a later holder, the
	// keep-alive or a release — before its COMMIT returned, or after it
	// but before a check sent after it showed the lock still held; such a
	// count may come after DoTx returned. The observer was told of each
	// loss, with the call's ctx.
	LostCommits int64

	FencedCommits     int64         // fenced DoTx transactions committed
	FenceWaitTimeouts int64         // fenced DoTx whose mint gave up waiting for the fence row ([ErrFenceWait])
	FenceWaitDuration time.Duration // total time fenced DoTx spent in their mint, waiting for the fence row
}

type counters struct {
	held, waiting                            atomic.Int64
	acquired, notAcquired, lost              atomic.Int64
	handoffs, serverAcquired, cancelledWaits atomic.Int64
	waitNanos                                atomic.Int64
	fencedCommits, fenceWaitTimeouts         atomic.Int64
	lostCommits                              atomic.Int64
	fenceWaitNanos                           atomic.Int64
	observerPanics                           atomic.Int64
}
