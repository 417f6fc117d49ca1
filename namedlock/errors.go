package namedlock

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Sentinel errors. Match them with [errors.Is]; errors returned by this
// package wrap them and keep the underlying cause (a context error, a server
// error) matchable too, while their text stays one line that says each thing
// once.
var (
	// ErrNotAcquired: the lock was not acquired, because another session
	// holds it (a server timeout; [Locker.TryAcquire] and [Locker.TryDo]
	// report a held key without an error), because ctx ended first (the
	// error then also matches ctx.Err()), or because the server ended the
	// wait itself, by an operator's KILL QUERY or a statement time limit
	// (which lock connections switch off for their sessions), or because
	// the lock's connection was closed before GET_LOCK answered (an
	// operator's KILL of the waiting session, a restart): the error then
	// says so.
	ErrNotAcquired = errors.New("namedlock: lock not acquired")
	// ErrLockLost: the lock was held and is no longer: its session ended
	// (KILL, server restart, network failure, wait_timeout) or its ownership
	// check failed or did not answer in time. Another instance may hold it.
	ErrLockLost = errors.New("namedlock: lock lost")
	// ErrInvalidKey: the key is empty (or DoMulti got no key). Any other
	// string is accepted. Such an error also matches ErrInvalidArgument.
	ErrInvalidKey = errors.New("namedlock: invalid key")
	// ErrInvalidArgument: a call was given an argument it cannot use — a
	// nil fn, a nil database, [Locker.DoTx] given the lock pool itself as
	// its database, a table name that is not a plain identifier, a fenced
	// DoTx on TiDB at an isolation level it cannot fence, a DoTx with
	// [WithSerializableHandoff] at a level other than the default and
	// SERIALIZABLE or on a server whose serializable reads do not lock. It is
	// returned before anything is locked, counted or sent to the server.
	ErrInvalidArgument = errors.New("namedlock: invalid argument")
	// ErrClosed: the Locker was closed. Locks held at Close were released by it.
	ErrClosed = errors.New("namedlock: locker closed")
	// ErrNotHeld: Release was called on a lock that was already released.
	ErrNotHeld = errors.New("namedlock: lock not held (already released)")
	// ErrDeadlock: the server refused the wait because it would deadlock
	// (MySQL error 3058, MariaDB 1213). Such an error also matches
	// ErrNotAcquired. Take several keys with [Locker.DoMulti].
	ErrDeadlock = errors.New("namedlock: deadlock")
	// ErrInvalidOption: an option passed to [New] is out of range,
	// or two options exclude each other ([WithFencing] and
	// [WithSerializableHandoff]).
	ErrInvalidOption = errors.New("namedlock: invalid option")
	// ErrFencing: fencing is configured ([WithFencing]) but cannot be
	// used as asked: the fence table does not exist, [Locker.DoTx] was
	// given another database than the one that holds it, or, on TiDB, an
	// isolation level other than the default and READ COMMITTED, or a
	// session in optimistic transaction mode. Nothing was locked or
	// written.
	ErrFencing = errors.New("namedlock: fencing misconfigured")
	// ErrFenceWait: a fenced [Locker.DoTx] waited for the fence row longer
	// than the server's innodb_lock_wait_timeout, because an earlier
	// holder's transaction (one that lost its lock and did not end) still
	// holds it. The transaction was rolled back. Such an error also matches
	// ErrNotAcquired.
	ErrFenceWait = errors.New("namedlock: fence row held by an earlier holder's open transaction")
	// ErrCommitUnknown: the COMMIT of a [Locker.DoTx] transaction, or of
	// the group of a [Locker.DoBatch] or [Merger], was sent and no answer
	// came back (the application's connection broke, or the server ended
	// its session, during the COMMIT), so the transaction may have
	// committed or not, and nothing the library could read tells which
	// (every caller of such a group gets it). A DoTx whose fn ended the
	// transaction itself (tx.Commit, tx.Rollback), which DoTx's doc
	// forbids, returns it too: database/sql does not say whether fn
	// committed. A session the server ended while it sat idle before the
	// COMMIT (MySQL's error 4031) is not such a case: the transaction was
	// rolled back, and the error does not match. Do not
	// run it again blindly: check whether its writes are there (a row it
	// inserted, an idempotency key) first. The error also matches the
	// driver's.
	ErrCommitUnknown = errors.New("namedlock: the transaction may have committed: its COMMIT's outcome is unknown")
	// ErrNeedsInterpolation: on TiDB, the lock pool's driver sends
	// statements with arguments as server-side prepared statements (a
	// plain *sql.DB whose DSN lacks interpolateParams=true), under which
	// TiDB counts a lock's references wrongly, so that a release could
	// leave the lock held. The acquisition is refused before any GET_LOCK;
	// such an error also matches ErrNotAcquired. pool.Open always sets
	// interpolateParams=true.
	ErrNeedsInterpolation = errors.New("namedlock: the lock pool must interpolate parameters (interpolateParams=true) on this server")
)

// ErrStaleToken is returned by [CheckFenced] when a fenced write changed
// nothing: a later holder of the lock wrote with a greater token first (or
// the row does not exist).
var ErrStaleToken = errors.New("namedlock: fenced write rejected: a later holder wrote first")

// failure is an error of this package: its text is one line that says each
// thing once, in words — "namedlock: lock "key" what: why" — and it matches
// (errors.Is, errors.As) each error of is: the sentinels it belongs to and
// the errors it stands for (ctx.Err() and the context's cause, a server or
// driver error), whose own texts it does not repeat.
//
// A failure of a session has no key (a session serves every holder it is
// handed to): "namedlock: lock what: why". The Lock that hears of it says
// whose lock it was (forKey). With neither key nor what, the text is
// "namedlock: why".
type failure struct {
	key  string
	what string // "lost", "not acquired"; "" when why says it all
	why  string
	is   []error
}

func (e *failure) Error() string {
	var b strings.Builder
	b.WriteString("namedlock: ")
	e.write(&b, true)
	return b.String()
}

// write writes e's text without the "namedlock: " prefix, with the key
// when withKey (errorList groups keys itself).
func (e *failure) write(b *strings.Builder, withKey bool) {
	if e.key != "" || e.what != "" {
		b.WriteString("lock")
		if withKey && e.key != "" {
			b.WriteByte(' ')
			b.WriteString(strconv.Quote(e.key))
		}
		if e.what != "" {
			b.WriteByte(' ')
			b.WriteString(e.what)
		}
		if e.why != "" {
			b.WriteString(": ")
		}
	}
	b.WriteString(e.why)
}

func (e *failure) Unwrap() []error { return e.is }

// fail returns a failure; nil errors in is are left out.
func fail(key, what, why string, is ...error) *failure {
	f := &failure{key: key, what: what, why: oneLine(why)}
	for _, err := range is {
		if err != nil {
			f.is = append(f.is, err)
		}
	}
	return f
}

// forKey returns err, a session's failure (no key), as the failure of the
// holder of key: the same words, naming the key, matching err itself (so a
// loss shared by several holders stays one error for errors.Is). Any other
// error is returned as is.
func forKey(key string, err error) error {
	f, ok := err.(*failure)
	if !ok || f.key != "" {
		return err
	}
	return &failure{key: key, what: f.what, why: f.why, is: []error{err}}
}

// alsoMatching returns an error with err's text that also matches more:
// for an error that another one caused (a statement cancelled by a loss),
// whose text would only repeat it.
func alsoMatching(err error, more ...error) error {
	if f, ok := err.(*failure); ok {
		return &failure{key: f.key, what: f.what, why: f.why, is: append([]error{err}, more...)}
	}
	return joinErrors(append([]error{err}, more...)...)
}

// notAcquired builds the error of a wait that ended without the lock:
// ErrNotAcquired, with ctx's error (and its cause) when ctx ended, or cause.
func notAcquired(ctx context.Context, key string, cause error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		c := context.Cause(ctx)
		if c == ctxErr {
			c = nil
		}
		return fail(key, "not acquired", ctxWords("the wait", ctxErr, c), ErrNotAcquired, ctxErr, c)
	}
	if cause == nil {
		return fail(key, "not acquired", "", ErrNotAcquired)
	}
	why := cause.Error()
	if f, ok := cause.(*failure); ok && (f.key == "" || f.key == key) {
		why = f.why // the key's own failure: its words, without its head
		if f.what != "" {
			why = f.what + ": " + f.why
		}
	}
	return fail(key, "not acquired", why, ErrNotAcquired, cause)
}

// errHeld marks the error of a try that found its key held, which
// TryAcquire and TryDo report as no lock rather than as an error.
var errHeld = errors.New("namedlock: held elsewhere")

// heldElsewhere is the error of a try that found key held: by another
// session, or by another caller of this Locker (local). It reaches the
// observer and the stats; TryAcquire and TryDo return no error for it.
func heldElsewhere(key string, local bool) error {
	if local {
		return fail(key, "not acquired", "held by another caller of this Locker", ErrNotAcquired, errHeld)
	}
	return fail(key, "not acquired", "held by another session", ErrNotAcquired, errHeld)
}

// ctxWords says why what ended with ctx: cancelled or timed out, with the
// context's error and its cause.
func ctxWords(what string, ctxErr, cause error) string {
	s := what + " was cancelled ("
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		s = what + " timed out ("
	}
	s += ctxErr.Error()
	if cause != nil {
		s += ": " + cause.Error()
	}
	return s + ")"
}

// connClosed is what the user reads when a lock's connection failed under
// a statement: the driver says only "invalid connection" (it logs the
// reason, an EOF, itself), and on a connection that was working that means
// the server closed it: an operator's KILL, a restart, wait_timeout.
const connClosed = "the lock's connection was closed by the server (killed?)"

// isConnClosed reports whether err is the driver's report of a connection
// that broke under a statement.
func isConnClosed(err error) bool {
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// lost returns a session's loss (no key: see forKey): why says what showed
// it; cause is the statement's error, if any.
func lost(why string, cause error) *failure {
	return fail("", "lost", why, ErrLockLost, cause)
}

// errEmptyKey is the error of an empty key.
var errEmptyKey = fail("", "", "invalid key: empty key", ErrInvalidKey, ErrInvalidArgument)

// isLost reports whether err tells of a lost lock.
func isLost(err error) bool { return errors.Is(err, ErrLockLost) }

// oneLine returns s with its line breaks turned into "; ".
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}

// errorList is several errors returned at once (Do's release error and
// fn's, the releases that failed in Close): errors.Is and errors.As match
// each; its text is theirs on one line, joined by "; ", each said once — an
// error with the text of an earlier one, or of an error another one wraps,
// is left out, "namedlock: " is written once, and failures that say the
// same of several keys are written once for all of them.
type errorList []error

// joinErrors returns errs as one error: nil when all are nil, the error
// itself when only one is not nil, an errorList otherwise (lists flattened).
func joinErrors(errs ...error) error {
	var list errorList
	for _, err := range errs {
		switch e := err.(type) {
		case nil:
		case errorList:
			list = append(list, e...)
		default:
			list = append(list, err)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

func (l errorList) Unwrap() []error { return l }

// Error returns the errors' texts on one line, each said once (see
// errorList).
func (l errorList) Error() string {
	texts := make([]string, len(l))
	for i, err := range l {
		texts[i] = oneLine(err.Error())
	}
	var b strings.Builder
	prefixed := false
	for i, p := range errorParts(l, texts, coveredTexts(l, texts)) {
		if i > 0 {
			b.WriteString("; ")
		}
		if p.f == nil {
			b.WriteString(p.text)
			prefixed = prefixed || strings.HasPrefix(p.text, "namedlock: ")
			continue
		}
		if !prefixed {
			b.WriteString("namedlock: ")
			prefixed = true
		}
		p.write(&b)
	}
	return b.String()
}

// errorPart is one part of an errorList's text: a failure with every key
// that failed the same way, or the text of an error of another kind.
type errorPart struct {
	f    *failure // nil for another kind of error
	keys []string
	text string // when f is nil
}

// errorParts returns the parts of l's text, in the order of l, leaving out
// the covered errors: the failures that say the same (what and why) of
// several keys make one part, found by a map in one pass.
func errorParts(l errorList, texts []string, covered []bool) []*errorPart {
	type sameFailure struct{ what, why string }
	var parts []*errorPart
	byFailure := make(map[sameFailure]*errorPart)
	for i, err := range l {
		if covered[i] {
			continue
		}
		f, ok := err.(*failure)
		switch {
		case ok && f.key != "":
			id := sameFailure{f.what, f.why}
			if p := byFailure[id]; p != nil {
				p.keys = append(p.keys, f.key)
				continue
			}
			p := &errorPart{f: f, keys: []string{f.key}}
			byFailure[id] = p
			parts = append(parts, p)
		case ok:
			parts = append(parts, &errorPart{f: f})
		default:
			parts = append(parts, &errorPart{text: texts[i]})
		}
	}
	return parts
}

// write writes the failure's text without the "namedlock: " prefix, for
// several keys as `locks "a", "b" what: why`.
func (p *errorPart) write(b *strings.Builder) {
	if len(p.keys) < 2 {
		p.f.write(b, true)
		return
	}
	b.WriteString("locks ")
	for j, k := range p.keys {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(k))
	}
	var rest strings.Builder
	p.f.write(&rest, false)
	b.WriteString(strings.TrimPrefix(rest.String(), "lock"))
}

// coveredTexts reports, for each error of l, whether its text is said by
// another one: an earlier error with the same text, or another error that
// wraps an error with this text (whose own text then repeats it). It walks
// each error's chain once, so its cost grows with the size of the chains,
// not with the square of the list.
func coveredTexts(l errorList, texts []string) []bool {
	covered := make([]bool, len(l))
	first := make(map[string]int, len(l))
	for i, t := range texts {
		if j, seen := first[t]; seen && j < i {
			covered[i] = true
			continue
		}
		first[t] = i
	}
	wrapped := make(map[string]int) // a text wrapped inside an error of l → that error's index
	for i, err := range l {
		if covered[i] {
			continue
		}
		walkWrapped(err, func(inner error) {
			if t := oneLine(inner.Error()); t != texts[i] {
				if _, ok := wrapped[t]; !ok {
					wrapped[t] = i
				}
			}
		})
	}
	for i, t := range texts {
		if j, ok := wrapped[t]; ok && j != i {
			covered[i] = true
		}
	}
	return covered
}

// walkWrapped calls fn for every error err wraps, directly or not (err
// itself excluded), through Unwrap() error and Unwrap() []error.
func walkWrapped(err error, fn func(error)) {
	var inner []error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			inner = []error{e}
		}
	case interface{ Unwrap() []error }:
		inner = u.Unwrap()
	}
	for _, e := range inner {
		if e == nil {
			continue
		}
		fn(e)
		walkWrapped(e, fn)
	}
}
