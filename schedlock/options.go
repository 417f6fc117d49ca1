package schedlock

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/namedlock/mysql/internal/sqlident"
)

// DefaultTable is the lock table's name when WithTable is not given; it is
// ShedLock's default too.
const DefaultTable = "shedlock"

// DefaultUnlockTimeout bounds each unlock when WithUnlockTimeout is not
// given.
const DefaultUnlockTimeout = 5 * time.Second

// DefaultLockTimeout bounds each Lock's statements when WithLockTimeout is
// not given.
const DefaultLockTimeout = 5 * time.Second

// An Option configures a Provider. Options are checked by [New].
type Option func(*settings) error

type settings struct {
	table         string
	lockedBy      string
	unlockTimeout time.Duration
	lockTimeout   time.Duration
}

// WithTable sets the lock table: an identifier of 1 to 64 letters, digits or
// underscores, optionally qualified by a database name the same way
// ("jobs.shedlock"). It is quoted with backticks in every statement. The
// default is DefaultTable.
func WithTable(name string) Option {
	return func(s *settings) error {
		if _, err := sqlident.Quote(name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		s.table = name
		return nil
	}
}

// WithLockedBy sets the locked_by value this Provider writes and unlocks by.
// It must identify this Provider uniquely among everything sharing the table
// (two holders with the same value can unlock and extend each other's
// locks): 1 to MaxLockedByLength characters. The default is the hostname,
// the process id and a random suffix made per Provider
// ("host-1234-9f86d081"); ShedLock's default, the bare hostname, is not
// unique when a host runs several processes.
func WithLockedBy(lockedBy string) Option {
	return func(s *settings) error {
		switch {
		case lockedBy == "":
			return fmt.Errorf("%w: empty locked_by value", ErrInvalidConfig)
		case !utf8.ValidString(lockedBy):
			return fmt.Errorf("%w: locked_by value %q is not valid UTF-8", ErrInvalidConfig, lockedBy)
		case utf8.RuneCountInString(lockedBy) > MaxLockedByLength:
			return fmt.Errorf("%w: locked_by value has %d characters; the column holds %d",
				ErrInvalidConfig, utf8.RuneCountInString(lockedBy), MaxLockedByLength)
		}
		s.lockedBy = lockedBy
		return nil
	}
}

// WithUnlockTimeout bounds each Unlock, from its call to its return: the
// wait for the lease's extensions still in flight (at most half of d) and
// the unlock statement (the rest). Unlock does not stop when its context is
// cancelled (a job cancelled by shutdown must still give its lock back); it
// runs for at most d. It must be positive; the default is
// DefaultUnlockTimeout.
func WithUnlockTimeout(d time.Duration) Option {
	return func(s *settings) error {
		if d <= 0 {
			return fmt.Errorf("%w: unlock timeout must be positive, got %v", ErrInvalidConfig, d)
		}
		s.unlockTimeout = d
		return nil
	}
}

// WithLockTimeout bounds the statements of each Lock (and Run's lock), in
// addition to its context. A Provider runs one Lock's statements at a
// time, so this is also the longest one Lock can hold up the Provider's
// other Locks, for any job, while its connection hangs. It must be
// positive; the default is DefaultLockTimeout.
func WithLockTimeout(d time.Duration) Option {
	return func(s *settings) error {
		if d <= 0 {
			return fmt.Errorf("%w: lock timeout must be positive, got %v", ErrInvalidConfig, d)
		}
		s.lockTimeout = d
		return nil
	}
}
