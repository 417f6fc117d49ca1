package namedlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestErrorText: the errors that the real server cannot be made to produce
// on demand (TestErrorMessages provokes the others) are one line that says
// each thing once, and still match what they stand for.
func TestErrorText(t *testing.T) {
	deadlock := &mysql.MySQLError{Number: 1213, SQLState: [5]byte{'4', '0', '0', '0', '1'}, Message: "Deadlock found when trying to get lock; try restarting transaction"}
	userJoin := errors.Join(errors.New("first"), errors.New("second"))
	loss := lost(connClosed, mysql.ErrInvalidConn)
	a, b := forKey("a", loss), forKey("b", loss)
	unconfirmed := fail("", "", "release not confirmed: "+releaseEnded(context.DeadlineExceeded)+"; its connection was closed", context.DeadlineExceeded)
	for _, tc := range []struct {
		name string
		err  error
		want string
		is   []error
	}{
		{
			"deadlock", (&server{}).getLockError(context.Background(), "k", deadlock),
			`namedlock: lock "k" not acquired: the server refused the wait, which would deadlock (Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction)`,
			[]error{ErrNotAcquired, ErrDeadlock, deadlock},
		},
		{
			"a session's loss, for a key", a,
			`namedlock: lock "a" lost: the lock's connection was closed by the server (killed?)`,
			[]error{ErrLockLost, mysql.ErrInvalidConn, loss},
		},
		{
			"the same loss of two keys (Close)", joinErrors(a, b),
			`namedlock: locks "a", "b" lost: the lock's connection was closed by the server (killed?)`,
			[]error{ErrLockLost, a, b},
		},
		{
			"two failures, two keys", joinErrors(a, forKey("c", unconfirmed)),
			`namedlock: lock "a" lost: the lock's connection was closed by the server (killed?); lock "c": release not confirmed: no answer in time (context deadline exceeded); its connection was closed`,
			[]error{ErrLockLost, context.DeadlineExceeded},
		},
		{
			"a loss and fn's multi-line error", joinErrors(a, userJoin),
			`namedlock: lock "a" lost: the lock's connection was closed by the server (killed?); first; second`,
			[]error{ErrLockLost, userJoin},
		},
		{
			"a loss and fn's error wrapping it", joinErrors(a, fmt.Errorf("stock: %w", a)),
			`stock: namedlock: lock "a" lost: the lock's connection was closed by the server (killed?)`,
			[]error{ErrLockLost},
		},
		{
			"the same loss twice (DoTx)", joinErrors(a, a),
			`namedlock: lock "a" lost: the lock's connection was closed by the server (killed?)`,
			[]error{ErrLockLost},
		},
		{
			"fn's error whose text contains another's without wrapping it", joinErrors(errors.New("stock low"), errors.New("order 7: stock low")),
			`stock low; order 7: stock low`,
			nil,
		},
		{
			"the same loss of many keys (Close of a large DoMulti)", joinErrors(manyKeys(loss, 500)...),
			`namedlock: locks ` + quotedKeys(500) + ` lost: the lock's connection was closed by the server (killed?)`,
			[]error{ErrLockLost},
		},
		{
			"a loss that failed a statement", alsoMatching(a, context.Canceled),
			`namedlock: lock "a" lost: the lock's connection was closed by the server (killed?)`,
			[]error{ErrLockLost, context.Canceled},
		},
		{
			"not acquired, for a key's own failure", notAcquired(context.Background(), "k", fail("k", "", "no fencing token minted in `f`: boom")),
			"namedlock: lock \"k\" not acquired: no fencing token minted in `f`: boom",
			[]error{ErrNotAcquired},
		},
		{
			"the Locker closing during a check", fail("", "", "locker closed", ErrClosed, context.Canceled),
			`namedlock: locker closed`,
			[]error{ErrClosed, context.Canceled},
		},
		{
			"a check that got no answer", forKey("k", lost("its ownership check got no answer within 3s", fmt.Errorf("%w: %w", context.DeadlineExceeded, mysql.ErrInvalidConn))),
			`namedlock: lock "k" lost: its ownership check got no answer within 3s`,
			[]error{ErrLockLost, context.DeadlineExceeded},
		},
	} {
		got := tc.err.Error()
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
		if strings.ContainsAny(got, "\r\n") {
			t.Errorf("%s: spans lines: %q", tc.name, got)
		}
		for _, target := range tc.is {
			if !errors.Is(tc.err, target) {
				t.Errorf("%s: does not match %v", tc.name, target)
			}
		}
	}
	var me *mysql.MySQLError
	if err := (&server{}).getLockError(context.Background(), "k", deadlock); !errors.As(err, &me) || me.Number != 1213 {
		t.Errorf("the deadlock's server error is not reachable with errors.As")
	}
	if joinErrors(nil, nil) != nil || joinErrors(nil, a) != a {
		t.Error("joinErrors of nils, or of one error, is not nil, or that error")
	}
}

// manyKeys returns the failure err for n keys k0, k1, ….
func manyKeys(err error, n int) []error {
	list := make([]error, n)
	for i := range list {
		list[i] = forKey(fmt.Sprintf("k%d", i), err)
	}
	return list
}

// quotedKeys returns "k0", "k1", … as errorList writes n grouped keys.
func quotedKeys(n int) string {
	q := make([]string, n)
	for i := range q {
		q[i] = strconv.Quote(fmt.Sprintf("k%d", i))
	}
	return strings.Join(q, ", ")
}
