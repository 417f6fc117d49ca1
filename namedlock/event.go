package namedlock

import "time"

// Outcome says what an [Event] reports.
type Outcome int

// Outcomes reported to an observer.
const (
	// Acquired: the lock is now held (Wait is set; Handoff says whether it
	// came from a local holder rather than from the server).
	Acquired Outcome = iota + 1
	// NotAcquired: an acquisition ended without the lock (Wait and Err set).
	NotAcquired
	// Released: a holder released the lock (Held set; Err set if the
	// release was not confirmed by the server).
	Released
	// Lost: the lock was found lost while held (Held and Err set).
	Lost
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
	}
	return "unknown"
}

// Event is what an observer registered with [WithObserver] receives.
type Event struct {
	Key     string        // the caller's key
	Outcome Outcome       // what happened
	Wait    time.Duration // Acquired, NotAcquired: time spent acquiring
	Held    time.Duration // Released, Lost: time the lock was held
	Handoff bool          // Acquired: handed over by a local holder
	Err     error         // NotAcquired, Lost, and unconfirmed releases
}
