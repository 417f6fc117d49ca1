package schedlock

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxNameLength is the longest job name, in characters, that ShedLock's
// name column (VARCHAR(64)) holds.
const MaxNameLength = 64

// MaxLockedByLength is the longest locked_by value, in characters, that
// ShedLock's locked_by column (VARCHAR(255)) holds.
const MaxLockedByLength = 255

// Config describes one scheduled job's lock, with ShedLock's meanings.
//
// The durations are sent to the server in microseconds, as ShedLock does;
// the TIMESTAMP(3) columns keep milliseconds.
type Config struct {
	// Name identifies the job: one row of the table. At most MaxNameLength
	// characters. Names are compared with the name column's collation, which
	// for a table made by CreateTable in a default utf8mb4 database is
	// case- and accent-insensitive ("Job" and "job" are the same lock, and
	// so are "cafe" and "café"); trailing spaces are ignored on MariaDB
	// (PAD SPACE) but not on MySQL 8 (utf8mb4_0900_ai_ci is NO PAD: "job"
	// and "job " are two locks).
	Name string

	// LockAtMostFor is how long the lock is held if the holder never
	// unlocks it (it crashed): lock_until is set to now + LockAtMostFor on
	// acquire. It must be positive (at least a millisecond) and should be
	// longer than the job normally runs, or another instance may run the job
	// while it is still running — unless KeepAlive extends the lease. now +
	// LockAtMostFor (database time) must not pass 2038-01-19 03:14:07 UTC,
	// the end of the TIMESTAMP column: such a lease is refused with
	// ErrLeaseOutOfRange (see the package documentation).
	LockAtMostFor time.Duration

	// LockAtLeastFor is how long, measured from acquisition, the lock stays
	// held after a fast job finishes: on unlock lock_until becomes
	// max(locked_at + LockAtLeastFor, now). It keeps an instance whose tick
	// comes a little late from running the job again. 0 unlocks at once;
	// it must not exceed LockAtMostFor.
	//
	// For a job fired every period P on several instances, the lease
	// gives exactly one run per tick only within two bounds: an instance
	// whose Run acquires more than LockAtLeastFor after the tick's first
	// run runs the tick again, and a tick whose run's lock_until (its
	// acquisition plus LockAtLeastFor, or its end if later) passes only
	// after every instance fired the next tick makes them all skip that
	// next tick. LockAtLeastFor close to P leaves almost no room for the
	// second; P/2 leaves the most room for both, for instances whose ticks
	// fire late or whose statements are slow.
	LockAtLeastFor time.Duration

	// KeepAlive, if positive, extends the lease every KeepAlive while the
	// lease is held (lock_until = now + LockAtMostFor, only while the row
	// is still this lease's), so a job may run longer than
	// LockAtMostFor and a crash still frees the job after LockAtMostFor. It
	// must be shorter than LockAtMostFor; LockAtMostFor/3 is a good value.
	// 0 disables keep-alive, as in ShedLock's default.
	KeepAlive time.Duration
}

// Validate reports whether c can be used, with an error matching
// ErrInvalidConfig (and ErrNameTooLong for an over-long name) if not.
func (c Config) Validate() error {
	if err := validateName(c.Name); err != nil {
		return err
	}
	switch {
	case c.LockAtMostFor < time.Millisecond:
		return fmt.Errorf("%w: job %q: LockAtMostFor must be at least 1ms (the table keeps milliseconds), got %v",
			ErrInvalidConfig, c.Name, c.LockAtMostFor)
	case c.LockAtLeastFor < 0:
		return fmt.Errorf("%w: job %q: LockAtLeastFor must not be negative, got %v",
			ErrInvalidConfig, c.Name, c.LockAtLeastFor)
	case c.LockAtLeastFor > c.LockAtMostFor:
		return fmt.Errorf("%w: job %q: LockAtLeastFor (%v) must not exceed LockAtMostFor (%v)",
			ErrInvalidConfig, c.Name, c.LockAtLeastFor, c.LockAtMostFor)
	case c.KeepAlive < 0:
		return fmt.Errorf("%w: job %q: KeepAlive must not be negative, got %v",
			ErrInvalidConfig, c.Name, c.KeepAlive)
	case c.KeepAlive > 0 && c.KeepAlive >= c.LockAtMostFor:
		return fmt.Errorf("%w: job %q: KeepAlive (%v) must be shorter than LockAtMostFor (%v), "+
			"or the lease expires before it is extended", ErrInvalidConfig, c.Name, c.KeepAlive, c.LockAtMostFor)
	}
	return nil
}

func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty job name", ErrInvalidConfig)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: job name %q is not valid UTF-8", ErrInvalidConfig, name)
	}
	if n := utf8.RuneCountInString(name); n > MaxNameLength {
		return &multiError{
			msg: fmt.Sprintf("%v: job name %q has %d characters, more than the name column's %d",
				ErrInvalidConfig, name, n, MaxNameLength),
			errs: []error{ErrInvalidConfig, ErrNameTooLong},
		}
	}
	return nil
}
