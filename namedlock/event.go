package namedlock

import (
	"context"
	"time"
)

// Outcome says what an [Event] reports.
type Outcome int

// Outcomes reported to an observer.
const (
	// Acquired: the lock is now held (Wait is set; Handoff says whether it
	// came from a local holder rather than from the server).
	Acquired Outcome = iota + 1
	// NotAcquired: an acquisition ended without the lock (Wait and Err set;
	// for a try that found the key held, Err says so although TryAcquire
	// and TryDo return no error).
	NotAcquired
	// Released: a holder released the lock, or [Locker.Close] took it back
	// (Err is then [ErrClosed]). Held and Wait are set; Err is set if the
	// release was not confirmed by the server, and matches [ErrLockLost]
	// when the release found the lock lost ([Stats] counts it in Lost).
	Released
	// Lost: the lock was found lost while held (Held, Wait and Err set).
	Lost
	// FencedTx: the transaction of a fenced [Locker.DoTx] ended after its
	// first statement, the mint, ran. FenceWait is how long the mint took
	// (it waits there while an earlier holder's transaction holds the key's
	// fence row); Err is nil when the transaction committed, matches
	// [ErrCommitUnknown] when its COMMIT got no answer, and says why it
	// rolled back otherwise (matching [ErrFenceWait] when the mint gave up).
	FencedTx
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Acquired:
		return "acquired"
	case NotAcquired:
		return "not-acquired"
	case Released:
		return "released"
	case Lost:
		return "lost"
	case FencedTx:
		return "fenced-tx"
	}
	return "unknown"
}

// Event is what an observer registered with [WithObserver] receives. Each
// acquisition is reported once when it ends (Acquired or NotAcquired), and
// each lock acquired once more when its hold ends (Released or Lost), with
// what is needed to draw the whole of it after the fact — a trace span that
// starts Wait+Held before a Released event, for instance.
type Event struct {
	Key       string        // the caller's key
	Outcome   Outcome       // what happened
	Wait      time.Duration // time spent acquiring (Released, Lost: the acquisition that began the hold)
	Held      time.Duration // Released, Lost: time the lock was held
	Handoff   bool          // Acquired, Released, Lost: handed over by a local holder
	FenceWait time.Duration // FencedTx: time the mint took (waiting for the fence row)
	Err       error         // NotAcquired, Lost, FencedTx, and unconfirmed releases

	// Session is, for Acquired, Released and Lost, the server's connection
	// id (CONNECTION_ID()) of the session that holds the lock at the
	// server: what an operator passes to KILL CONNECTION to take a stuck
	// lock back. A handoff keeps the session, so the Acquired event of a
	// handoff carries the id of the acquisition it came from. On TiDB,
	// whose IS_USED_LOCK names no holder, it is the only way to learn it.
	// 0 when it is not known (another outcome, or a server that did not
	// show it).
	Session int64

	// Context is the ctx the lock was acquired (or tried) with, for a trace
	// span's parent; nil in a Lost or Released event of a lock found lost
	// before its acquisition was reported. It is given to the observer to
	// read, not to do I/O with: it may be done.
	Context context.Context
}
