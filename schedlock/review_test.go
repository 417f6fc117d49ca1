package schedlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/testdb"
)

// hookConnector wraps go-sql-driver's connector so a test can hold a query
// back before it is sent to the (real) server.
type hookConnector struct {
	driver.Connector
	beforeQuery func(query string, args []driver.NamedValue)
}

type fullConn interface {
	driver.Conn
	driver.QueryerContext
	driver.ExecerContext
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

type hookConn struct {
	fullConn
	beforeQuery func(query string, args []driver.NamedValue)
}

func (c *hookConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &hookConn{fullConn: dc.(fullConn), beforeQuery: c.beforeQuery}, nil
}

func (c *hookConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.beforeQuery(query, args)
	return c.fullConn.QueryContext(ctx, query, args)
}

// openHookDB opens a pool on the test's server whose queries pass through
// beforeQuery first.
func openHookDB(t *testing.T, beforeQuery func(query string, args []driver.NamedValue)) *sql.DB {
	t.Helper()
	s, ok := servers.Load(t.Name())
	if !ok {
		t.Fatal("call openDB first")
	}
	cfg, err := mysql.ParseDSN(s.(*testdb.Server).DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime = true
	cfg.InterpolateParams = true
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(&hookConnector{Connector: inner, beforeQuery: beforeQuery})
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestReviewCollationTwinsShareAnIdentity: two names the column's collation
// makes one row, but that acquireSlot's key (lower case, trailing spaces
// dropped) keeps apart, take no turns on one Provider. Lock(X) takes the
// row; before its read-back runs, the row expires and Lock(Y) takes it
// again; X's read-back then reads Y's locked_at, and the two leases carry
// one identity. X's lease is stale (its own acquisition ran out), yet its
// Unlock ends Y's lease and reports nil, and another instance takes the job
// while Y's run is well inside its lease: issue 25's double run, by another
// road. The read-back is held back by a driver wrapper (no timing but
// X's 50 ms LockAtMostFor against a 300 ms wait, both in database time).
func TestReviewCollationTwinsShareAnIdentity(t *testing.T) {
	t.Parallel()
	plain := openDB(t)
	table := newTable(t, plain)

	// Pick a pair of names this server's default collation makes one row
	// and slotKey keeps apart; accents are the documented case, the others
	// are not mentioned in the documentation.
	pairs := [][2]string{
		{"job\u00df", "jobss"}, // ß: one row with "ss" in utf8mb4_0900_ai_ci
		{"job\u00df", "jobs"},  // ß: one row with "s" in utf8mb4_general_ci
		{"job\U0001F600", "job\U0001F601"},
		{"job\uff41", "joba"}, // full-width a
		{"job\u00e9", "jobe"}, // accent (documented)
	}
	var x, y string
	for _, pr := range pairs {
		if slotKey(pr[0]) == slotKey(pr[1]) {
			continue
		}
		var n int
		if _, err := plain.Exec("INSERT INTO `"+table+"` (name, lock_until, locked_by) VALUES (?, UTC_TIMESTAMP(3), 'probe')", pr[0]); err != nil {
			t.Fatal(err)
		}
		if err := plain.QueryRow("SELECT COUNT(*) FROM `"+table+"` WHERE name = ?", pr[1]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if _, err := plain.Exec("DELETE FROM `" + table + "`"); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			x, y = pr[0], pr[1]
			break
		}
	}
	if x == "" {
		t.Skip("no pair of names shares a row on this server")
	}
	t.Logf("names %q and %q: one row, two acquisition turns", x, y)

	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	db := openHookDB(t, func(query string, args []driver.NamedValue) {
		if !strings.HasPrefix(query, "SELECT "+lockedAtMs) || len(args) == 0 {
			return
		}
		if s, _ := args[0].Value.(string); s != x {
			return
		}
		once.Do(func() {
			close(reached)
			<-release
		})
	})
	a := New(db, WithTable(table), WithLockedBy("a"))
	c := New(plain, WithTable(table), WithLockedBy("c"))

	type result struct {
		l   *Lease
		err error
	}
	xRes := make(chan result, 1)
	go func() {
		l, err := a.Lock(bg, Config{Name: x, LockAtMostFor: 50 * time.Millisecond})
		xRes <- result{l, err}
	}()
	<-reached // X's acquisition is applied; its read-back is held back
	time.Sleep(300 * time.Millisecond)
	yLease, err := a.Lock(bg, Config{Name: y, LockAtMostFor: time.Minute})
	if err != nil {
		close(release)
		<-xRes
		t.Fatalf("Lock(%q) after X's lease ran out: %v", y, err)
	}
	close(release)
	r := <-xRes
	if r.err != nil {
		t.Logf("Lock(%q): %v (no stale lease handed out: fine)", x, r.err)
		if err := yLease.Unlock(bg); err != nil {
			t.Error(err)
		}
		return
	}
	held := readRow(t, plain, table, y)
	uerr := r.l.Unlock(bg)
	after := readRow(t, plain, table, y)
	if !errors.Is(uerr, ErrLeaseLost) || after != held {
		t.Errorf("X's stale lease (its acquisition ran out and Y took the row): Unlock = %v, want ErrLeaseLost; "+
			"row before %+v, after %+v", uerr, held, after)
	}
	cl, err := c.Lock(bg, Config{Name: y, LockAtMostFor: time.Minute})
	if err == nil {
		t.Errorf("another instance took the job while Y's lease (LockAtMostFor 1m) was held: two runs at once")
		_ = cl.Unlock(bg)
	} else if !errors.Is(err, ErrLocked) {
		t.Errorf("another instance's Lock: %v", err)
	}
	_ = yLease.Unlock(bg)
}
