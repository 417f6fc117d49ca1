package schedlock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Sentinel errors. Match them with [errors.Is]; the returned errors wrap them
// with the details (job name, table, holder, the driver's error).
var (
	// ErrInvalidConfig reports a Config or Option that cannot work: an empty
	// job name, a non-positive LockAtMostFor, a LockAtLeastFor outside
	// [0, LockAtMostFor], a bad table identifier, and so on.
	ErrInvalidConfig = errors.New("schedlock: invalid configuration")

	// ErrInvalidArgument reports an argument a call cannot use, which is
	// not part of a Config or an Option: a nil *sql.DB (New), a nil
	// job function (Run), an extension shorter than a millisecond (Extend).
	// It is returned before any statement is sent.
	ErrInvalidArgument = errors.New("schedlock: invalid argument")

	// ErrNameTooLong reports a job name longer than the name column
	// (MaxNameLength characters). Errors carrying it also match
	// ErrInvalidConfig. ShedLock silently never runs such jobs; this package
	// refuses them before touching the table.
	ErrNameTooLong = errors.New("schedlock: job name longer than 64 characters")

	// ErrLocked reports that another instance holds the job's lock. Run turns
	// it into ran == false with a nil error; Lock returns it wrapped with the
	// holder's locked_by value.
	ErrLocked = errors.New("schedlock: job is locked by another instance")

	// ErrLeaseLost reports that the lease stopped being ours while we
	// believed we held it: an extension or the unlock found the row taken by
	// another instance or expired, or the keep-alive could not confirm the
	// lease before its lock_until. It is the cause of fn's cancelled context
	// in Run.
	ErrLeaseLost = errors.New("schedlock: lease lost")

	// ErrUnlocked is returned by (*Lease).Unlock after an Unlock that
	// unlocked the lease, by Extend once Unlock was called, and by both on
	// a nil *Lease.
	ErrUnlocked = errors.New("schedlock: lease already unlocked")

	// ErrTableNotFound reports that the lock table does not exist (MySQL
	// error 1146). Create it once with (*Provider).CreateTable.
	ErrTableNotFound = errors.New("schedlock: lock table does not exist")

	// ErrBadTable reports a lock table without ShedLock's columns (MySQL
	// error 1054, unknown column).
	ErrBadTable = errors.New("schedlock: lock table does not have ShedLock's columns")

	// ErrNameNotStorable reports a job name that the table's name column
	// cannot store exactly (a column narrower than VARCHAR(64), or a
	// character set that cannot hold the name's characters), so the row the
	// server wrote does not carry the name. The job could never be unlocked
	// by name; this package fails instead of silently skipping it forever.
	ErrNameNotStorable = errors.New("schedlock: job name cannot be stored exactly in the name column")

	// ErrLeaseOutOfRange reports a lease whose lock_until (the server's
	// now plus LockAtMostFor, or plus an extension) would be past the end
	// of the TIMESTAMP column, 2038-01-19 03:14:07.999 UTC. The lease was
	// not taken or not extended, and nothing was written: a shorter
	// LockAtMostFor (or extension) would fit.
	ErrLeaseOutOfRange = errors.New("schedlock: lease ends past 2038-01-19 03:14:07 UTC, the end of the TIMESTAMP column")
)

// MySQL server error numbers this package classifies.
const (
	errNoSuchTable    = 1146 // ER_NO_SUCH_TABLE
	errBadFieldError  = 1054 // ER_BAD_FIELD_ERROR
	errDataTooLong    = 1406 // ER_DATA_TOO_LONG (strict mode, plain statements)
	errTruncatedValue = 1366 // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD
	errMixCollations  = 1267 // ER_CANT_AGGREGATE_2COLLATIONS (a name outside the column's charset)
	errCannotConvert  = 3854 // ER_CANNOT_CONVERT_STRING (MySQL: a name compared with a column whose charset cannot hold it)
)

// classify wraps a driver error from a statement on the lock table with the
// sentinel that explains it, or returns it with the table name for context.
func (p *Provider) classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case errNoSuchTable:
			return fmt.Errorf("%w: table %s does not exist; create it once with (*Provider).CreateTable "+
				"(or ShedLock's CREATE TABLE statement): %s: %w", ErrTableNotFound, p.table, op, err)
		case errBadFieldError:
			return fmt.Errorf("%w: table %s must have the columns name VARCHAR(64), lock_until TIMESTAMP(3), "+
				"locked_at TIMESTAMP(3), locked_by VARCHAR(255) (see (*Provider).CreateTable): %s: %w",
				ErrBadTable, p.table, op, err)
		case errDataTooLong, errTruncatedValue, errMixCollations, errCannotConvert:
			return fmt.Errorf("%w: table %s (check the name column's length and character set): %s: %w",
				ErrNameNotStorable, p.table, op, err)
		}
	}
	return fmt.Errorf("schedlock: %s on table %s: %w", op, p.table, err)
}

// multiError is an error with a message of its own, on one line, that
// matches each of errs.
type multiError struct {
	msg  string
	errs []error
}

// Error returns the message.
func (e *multiError) Error() string { return e.msg }

// Unwrap returns the errors it matches.
func (e *multiError) Unwrap() []error { return e.errs }

// join is errors.Join on one line: the non-nil errors' messages separated
// by "; " (errors.Join puts each on a line of its own). It returns nil if
// every error is nil, and a lone error as it is.
func join(errs ...error) error {
	var kept []error
	var msgs []string
	for _, err := range errs {
		if err != nil {
			kept = append(kept, err)
			msgs = append(msgs, err.Error())
		}
	}
	switch len(kept) {
	case 0:
		return nil
	case 1:
		return kept[0]
	}
	return &multiError{msg: strings.Join(msgs, "; "), errs: kept}
}

// trimPrefix is err's message without this package's "schedlock: " prefix,
// for an error quoted inside another of this package's messages.
func trimPrefix(err error) string {
	return strings.TrimPrefix(err.Error(), "schedlock: ")
}
