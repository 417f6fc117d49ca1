package namedlock

import (
	"context"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestFaultDeadlockErrorMapping: the server's deadlock errors (MariaDB 1213,
// as TestServerDetectsUserLockDeadlock shows it produces for two sessions
// each holding one name and waiting for the other's; MySQL 3058) become
// ErrDeadlock, which also matches ErrNotAcquired and keeps the server error.
// Through a Locker the server can never see such a cycle (a session that
// waits holds nothing: TestCrossedWaitsEndByContext), so the mapping is
// checked here, white-box, on the error values the server sends.
func TestFaultDeadlockErrorMapping(t *testing.T) {
	l := &server{}
	for _, num := range []uint16{1213, 3058} {
		server := &mysql.MySQLError{Number: num, SQLState: [5]byte{'4', '0', '0', '0', '1'}, Message: "Deadlock found when trying to get lock; try restarting transaction"}
		err := l.getLockError(context.Background(), "k", server)
		var me *mysql.MySQLError
		if !errors.Is(err, ErrDeadlock) || !errors.Is(err, ErrNotAcquired) || !errors.As(err, &me) || me.Number != num {
			t.Errorf("getLockError(%d) = %v, want ErrDeadlock, ErrNotAcquired and the server error", num, err)
		}
	}
	for _, num := range []uint16{1317, 1205, 3057} { // query interrupted, lock wait timeout, bad name
		err := l.getLockError(context.Background(), "k", &mysql.MySQLError{Number: num})
		if errors.Is(err, ErrDeadlock) {
			t.Errorf("getLockError(%d) = %v matches ErrDeadlock", num, err)
		}
	}
	// A wait whose ctx ended is ErrNotAcquired with the ctx error, even if
	// the server's answer was a deadlock.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := l.getLockError(ctx, "k", &mysql.MySQLError{Number: 1213})
	if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("getLockError with ctx ended = %v, want ErrNotAcquired and context.Canceled", err)
	}
}
