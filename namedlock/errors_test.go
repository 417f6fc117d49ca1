package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/lockconn"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/pool"
)

// errCase provokes one error of the package against the real server.
type errCase struct {
	name string
	// run provokes the error; key is the caller's key to use (not portable:
	// its server name differs, and the message must name the key).
	run func(t *testing.T, key string) error
	is  []error // each must match errors.Is
	// says: the message must contain each (what happened, in words).
	says []string
	// mysqlErr: the server's error must stay reachable with errors.As.
	mysqlErr uint16
}

// errTestKey returns a key unique to the test that is not portable
// (upper case, a space), so that its server name is not the key.
func errTestKey(t *testing.T) string {
	t.Helper()
	key := "Order " + uniqueKey(t, "x")
	if keyfmt.IsPortable(key) {
		t.Fatalf("%q is portable", key)
	}
	return key
}

// checkMessage fails t unless err's text is one line that says each thing
// once: "namedlock:" once, the key at most once, no phrase of four words
// twice, no driver jargon.
func checkMessage(t *testing.T, err error, key string) {
	t.Helper()
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") {
		t.Errorf("message spans lines: %q", msg)
	}
	if n := strings.Count(msg, "namedlock:"); n > 1 {
		t.Errorf("\"namedlock:\" %d times in %q", n, msg)
	}
	if key != "" {
		if n := strings.Count(msg, key); n > 1 {
			t.Errorf("the key %d times in %q", n, msg)
		}
		if name := keyfmt.Portable(key); name != key && strings.Contains(msg, name) {
			t.Errorf("the server name %q instead of the key in %q", name, msg)
		}
	}
	for _, phrase := range []string{"lock lost", "not acquired", "locker closed", "deadlock", "invalid key", "invalid argument", "invalid option", "fencing misconfigured", "not held"} {
		if n := strings.Count(msg, phrase); n > 1 {
			t.Errorf("%q %d times in %q", phrase, n, msg)
		}
	}
	if p := repeatedPhrase(msg, 4); p != "" {
		t.Errorf("%q twice in %q", p, msg)
	}
	for _, jargon := range []string{"invalid connection", "bad connection", "driver: "} {
		if strings.Contains(msg, jargon) {
			t.Errorf("driver jargon %q in %q", jargon, msg)
		}
	}
}

// repeatedPhrase returns a sequence of n words that occurs twice in s, or "".
func repeatedPhrase(s string, n int) string {
	words := strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == ':' || r == ';' || r == ',' || r == '(' || r == ')' || r == '"'
	})
	seen := map[string]bool{}
	for i := 0; i+n <= len(words); i++ {
		p := strings.Join(words[i:i+n], " ")
		if seen[p] {
			return p
		}
		seen[p] = true
	}
	return ""
}

// TestErrorMessages provokes every reachable error of the package against
// the real server and checks its class (errors.Is, errors.As) and its text:
// one line, each thing said once, in words.
func TestErrorMessages(t *testing.T) {
	srv := testdb.RequireReal(t)
	adm := admin(t)
	// A short keep-alive, so that a KILLed holder is told quickly.
	in := newInstance(t, srv.DSN, namedlock.WithKeepAlive(200*time.Millisecond), namedlock.WithCheckTimeout(time.Second))
	// A long keep-alive: a KILL is found by Release, not by a check.
	slow := newInstance(t, srv.DSN, namedlock.WithKeepAlive(20*time.Second))
	other := newInstance(t, srv.DSN)
	ctx := testCtx(t, 2*time.Minute)

	// kill KILLs the session holding key's server lock.
	kill := func(t *testing.T, key string) {
		t.Helper()
		faultMustKill(t, adm, holderOf(t, adm, keyfmt.Portable(key)))
	}
	// holdElsewhere makes another instance hold key for the test.
	holdElsewhere := func(t *testing.T, key string) {
		t.Helper()
		mustAcquire(t, other.locker, key)
	}
	acquire := func(t *testing.T, l *namedlock.Locker, key string) *namedlock.Lock {
		t.Helper()
		k, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		t.Cleanup(func() { _ = k.Release(context.Background()) })
		return k
	}
	waitDone := func(t *testing.T, k *namedlock.Lock) {
		t.Helper()
		select {
		case <-k.Done():
		// contract: a lost lock is reported within keep-alive + check timeout
		// (docs/guarantees.md); 10 s is well past both instances' sums.
		case <-time.After(10 * time.Second):
			t.Fatal("the loss was not detected within 10 s")
		}
	}
	killed := "the lock's connection was closed by the server (killed?)"
	app := testdb.OpenDB(t, srv.DSN)
	appx := sqlx.NewDb(app, "mysql")

	cases := []errCase{
		{
			name: "Do: lost by KILL, fn returns ctx.Err()",
			run: func(t *testing.T, key string) error {
				return in.locker.Do(ctx, key, func(fctx context.Context) error {
					kill(t, key)
					<-fctx.Done()
					return fctx.Err()
				})
			},
			is:   []error{namedlock.ErrLockLost, context.Canceled},
			says: []string{"lost", killed},
		},
		{
			name: "Do: lost by KILL, fn returns the cause",
			run: func(t *testing.T, key string) error {
				return in.locker.Do(ctx, key, func(fctx context.Context) error {
					kill(t, key)
					<-fctx.Done()
					return fmt.Errorf("stock not decremented: %w", context.Cause(fctx))
				})
			},
			is:   []error{namedlock.ErrLockLost},
			says: []string{"stock not decremented", killed},
		},
		{
			name: "Lock.Err: lost by KILL, found by the keep-alive",
			run: func(t *testing.T, key string) error {
				k := acquire(t, in.locker, key)
				kill(t, key)
				waitDone(t, k)
				return k.Err()
			},
			is:   []error{namedlock.ErrLockLost},
			says: []string{killed},
		},
		{
			name: "Release: lost by KILL, found by the keep-alive",
			run: func(t *testing.T, key string) error {
				k := acquire(t, in.locker, key)
				kill(t, key)
				waitDone(t, k)
				return k.Release(ctx)
			},
			is:   []error{namedlock.ErrLockLost},
			says: []string{killed},
		},
		{
			name: "Release: lost by KILL, found by the release",
			run: func(t *testing.T, key string) error {
				k := acquire(t, slow.locker, key)
				kill(t, key)
				return k.Release(ctx)
			},
			is:   []error{namedlock.ErrLockLost},
			says: []string{killed},
		},
		{
			name: "Release twice after a loss",
			run: func(t *testing.T, key string) error {
				k := acquire(t, slow.locker, key)
				kill(t, key)
				_ = k.Release(ctx)
				return k.Release(ctx)
			},
			is:   []error{namedlock.ErrLockLost},
			says: []string{killed},
		},
		{
			name: "DoTx: lost by KILL before the commit",
			run: func(t *testing.T, key string) error {
				return in.locker.DoTx(ctx, key, appx.DB, nil, func(fctx context.Context, _ *sql.Tx) error {
					kill(t, key)
					<-fctx.Done()
					return nil
				})
			},
			is:   []error{namedlock.ErrLockLost},
			says: []string{killed},
		},
		{
			name: "Acquire: wait cancelled",
			run: func(t *testing.T, key string) error {
				holdElsewhere(t, key)
				c, cancel := context.WithCancel(ctx)
				time.AfterFunc(200*time.Millisecond, cancel)
				_, err := in.locker.Acquire(c, key)
				return err
			},
			is:   []error{namedlock.ErrNotAcquired, context.Canceled},
			says: []string{"the wait was cancelled (context canceled)"},
		},
		{
			name: "Acquire: wait cancelled with a cause",
			run: func(t *testing.T, key string) error {
				holdElsewhere(t, key)
				c, cancel := context.WithCancelCause(ctx)
				time.AfterFunc(200*time.Millisecond, func() { cancel(errShutdown) })
				_, err := in.locker.Acquire(c, key)
				return err
			},
			is:   []error{namedlock.ErrNotAcquired, context.Canceled, errShutdown},
			says: []string{"the wait was cancelled", errShutdown.Error()},
		},
		{
			name: "Acquire: wait past the deadline",
			run: func(t *testing.T, key string) error {
				holdElsewhere(t, key)
				c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				_, err := in.locker.Acquire(c, key)
				return err
			},
			is:   []error{namedlock.ErrNotAcquired, context.DeadlineExceeded},
			says: []string{"context deadline exceeded"},
		},
		{
			name: "Acquire: queued behind a caller of the same Locker, cancelled",
			run: func(t *testing.T, key string) error {
				acquire(t, in.locker, key)
				c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				_, err := in.locker.Acquire(c, key)
				return err
			},
			is:   []error{namedlock.ErrNotAcquired, context.DeadlineExceeded},
			says: []string{"context deadline exceeded"},
		},
		{
			name: "Acquire: ctx already cancelled",
			run: func(t *testing.T, key string) error {
				c, cancel := context.WithCancel(ctx)
				cancel()
				_, err := in.locker.Acquire(c, key)
				return err
			},
			is:   []error{namedlock.ErrNotAcquired, context.Canceled},
			says: []string{"context canceled"},
		},
		{
			// TryAcquire returns no error for a held key; the observer's
			// event carries one.
			name: "TryAcquire: held by another instance (the observer's event)",
			run: func(t *testing.T, key string) error {
				holdElsewhere(t, key)
				l, last := observedLocker(t, in.db)
				if k, err := l.TryAcquire(ctx, key); k != nil || err != nil {
					t.Errorf("TryAcquire of a held key = %v, %v; want nil, nil", k, err)
				}
				return last()
			},
			is:   []error{namedlock.ErrNotAcquired},
			says: []string{"held by another session"},
		},
		{
			name: "TryDo: held by a caller of the same Locker (the observer's event)",
			run: func(t *testing.T, key string) error {
				l, last := observedLocker(t, in.db)
				acquire(t, l, key)
				if ran, err := l.TryDo(ctx, key, func(context.Context) error { return nil }); ran || err != nil {
					t.Errorf("TryDo of a held key = %v, %v; want false, nil", ran, err)
				}
				return last()
			},
			is:   []error{namedlock.ErrNotAcquired},
			says: []string{"held by another caller of this Locker"},
		},
		{
			name: "Release twice",
			run: func(t *testing.T, key string) error {
				k := acquire(t, in.locker, key)
				if err := k.Release(ctx); err != nil {
					t.Fatal(err)
				}
				return k.Release(ctx)
			},
			is: []error{namedlock.ErrNotHeld},
		},
		{
			name: "Release with a cancelled ctx",
			run: func(t *testing.T, key string) error {
				k := acquire(t, slow.locker, key)
				c, cancel := context.WithCancel(ctx)
				cancel()
				return k.Release(c)
			},
			is:   []error{context.Canceled},
			says: []string{"not confirmed", "the server frees the lock"},
		},
		{
			name: "empty key",
			run: func(t *testing.T, _ string) error {
				_, err := in.locker.Acquire(ctx, "")
				return err
			},
			is: []error{namedlock.ErrInvalidKey},
		},
		{
			name: "DoMulti: no keys",
			run: func(t *testing.T, _ string) error {
				return in.locker.DoMulti(ctx, nil, func(context.Context) error { return nil })
			},
			is: []error{namedlock.ErrInvalidKey},
		},
		{
			name: "Do: nil fn",
			run: func(t *testing.T, key string) error {
				return in.locker.Do(ctx, key, nil)
			},
			is: []error{namedlock.ErrInvalidArgument},
		},
		{
			name: "TryDo: nil fn",
			run: func(t *testing.T, key string) error {
				ran, err := in.locker.TryDo(ctx, key, nil)
				if ran {
					t.Error("TryDo with a nil fn ran")
				}
				return err
			},
			is: []error{namedlock.ErrInvalidArgument},
		},
		{
			name: "DoMulti: nil fn",
			run: func(t *testing.T, key string) error {
				return in.locker.DoMulti(ctx, []string{key}, nil)
			},
			is: []error{namedlock.ErrInvalidArgument},
		},
		{
			name: "DoTx: nil fn",
			run: func(t *testing.T, key string) error {
				return in.locker.DoTx(ctx, key, appx.DB, nil, nil)
			},
			is: []error{namedlock.ErrInvalidArgument},
		},
		{
			name: "DoTx: the lock pool as its db",
			run: func(t *testing.T, key string) error {
				return in.locker.DoTx(ctx, key, in.db, nil, func(context.Context, *sql.Tx) error { return nil })
			},
			is:   []error{namedlock.ErrInvalidArgument},
			says: []string{"lock pool"},
		},
		{
			name: "DoTx: a pool on the lock pool's connector as its db",
			run: func(t *testing.T, key string) error {
				db := sql.OpenDB(lockconn.Of(in.db))
				defer db.Close()
				return in.locker.DoTx(ctx, key, db, nil, func(context.Context, *sql.Tx) error { return nil })
			},
			is:   []error{namedlock.ErrInvalidArgument},
			says: []string{"lock pool"},
		},
		{
			name: "DoTx: nil db",
			run: func(t *testing.T, key string) error {
				return in.locker.DoTx(ctx, key, nil, nil, func(context.Context, *sql.Tx) error { return nil })
			},
			is: []error{namedlock.ErrInvalidArgument},
		},
		{
			name: "New: nil db",
			run: func(t *testing.T, _ string) error {
				_, err := namedlock.New(nil)
				return err
			},
			is: []error{namedlock.ErrInvalidArgument},
		},
		{
			name: "New: a nil Option",
			run: func(t *testing.T, _ string) error {
				_, err := namedlock.New(in.db, nil)
				return err
			},
			is: []error{namedlock.ErrInvalidOption},
		},
		{
			name: "New: fencing on the lock pool",
			run: func(t *testing.T, _ string) error {
				_, err := namedlock.New(in.db, namedlock.WithFencing(in.db, "fence"))
				return err
			},
			is:   []error{namedlock.ErrInvalidOption},
			says: []string{"lock pool"},
		},
		{
			name: "CreateFenceTable: nil db",
			run: func(t *testing.T, _ string) error {
				return namedlock.CreateFenceTable(ctx, nil, "fence")
			},
			is: []error{namedlock.ErrInvalidArgument},
		},
		{
			name: "New: keep-alive 0",
			run: func(t *testing.T, _ string) error {
				_, err := namedlock.New(in.db, namedlock.WithKeepAlive(0))
				return err
			},
			is: []error{namedlock.ErrInvalidOption},
		},
		{
			name: "New: keep-alive + check timeout past the lease",
			run: func(t *testing.T, _ string) error {
				_, err := namedlock.New(in.db, namedlock.WithKeepAlive(20*time.Second), namedlock.WithCheckTimeout(15*time.Second))
				return err
			},
			is: []error{namedlock.ErrInvalidOption},
		},
		{
			name: "New: negative handoff",
			run: func(t *testing.T, _ string) error {
				_, err := namedlock.New(in.db, namedlock.WithHandoff(-1, 0))
				return err
			},
			is: []error{namedlock.ErrInvalidOption},
		},
		{
			name: "New: WithFencing on a nil db",
			run: func(t *testing.T, _ string) error {
				_, err := namedlock.New(in.db, namedlock.WithFencing(nil, "fence"))
				return err
			},
			is: []error{namedlock.ErrInvalidOption},
		},
		{
			name: "New: WithFencing on a bad table name",
			run: func(t *testing.T, _ string) error {
				_, err := namedlock.New(in.db, namedlock.WithFencing(app, "my fence"))
				return err
			},
			is: []error{namedlock.ErrInvalidOption},
		},
		{
			name: "CreateFenceTable: bad table name",
			run: func(t *testing.T, _ string) error {
				return namedlock.CreateFenceTable(ctx, app, "my fence")
			},
			is: []error{namedlock.ErrInvalidArgument},
		},
		{
			name: "fencing: the fence table does not exist",
			run: func(t *testing.T, key string) error {
				l := newInstance(t, srv.DSN, namedlock.WithFencing(app, "no_such_fence_table")).locker
				_, err := l.Acquire(ctx, key)
				return err
			},
			is:   []error{namedlock.ErrFencing},
			says: []string{"CREATE TABLE IF NOT EXISTS"},
		},
		{
			name: "fencing: DoTx on another database",
			run: func(t *testing.T, key string) error {
				l, _ := fenced(t, app)
				return l.locker.DoTx(ctx, key, primary(t).DB, nil, func(context.Context, *sql.Tx) error { return nil })
			},
			is: []error{namedlock.ErrFencing},
		},
		{
			name: "fencing: DoTx on another database",
			run: func(t *testing.T, key string) error {
				l, _ := fenced(t, app)
				return l.locker.DoTx(ctx, key, primary(t).DB, nil, func(context.Context, *sql.Tx) error { return nil })
			},
			is:   []error{namedlock.ErrFencing},
			says: []string{"DoTx: db is not"},
		},
		{
			name: "fencing: the fence row held by a stale transaction",
			run: func(t *testing.T, key string) error {
				short := testdb.OpenDB(t, srv.DSN+paramSep(srv.DSN)+"innodb_lock_wait_timeout=1")
				l, table := fenced(t, short)
				stale, err := short.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer stale.Rollback()
				if _, err := stale.ExecContext(ctx, "INSERT INTO "+table+" (name, token) VALUES (?, 1) ON DUPLICATE KEY UPDATE token = token + 1", keyfmt.Portable(key)); err != nil {
					t.Fatal(err)
				}
				return l.locker.DoTx(ctx, key, short, nil, func(context.Context, *sql.Tx) error { return nil })
			},
			is:       []error{namedlock.ErrFenceWait, namedlock.ErrNotAcquired},
			mysqlErr: 1205,
		},
		{
			name: "CheckFenced: a later holder wrote first",
			run: func(t *testing.T, _ string) error {
				return namedlock.CheckFenced(driverResult(0), nil)
			},
			is: []error{namedlock.ErrStaleToken},
		},
		{
			name: "Acquire: the lock pool is closed",
			run: func(t *testing.T, key string) error {
				db, err := pool.Open(srv.DSN)
				if err != nil {
					t.Fatal(err)
				}
				l := mustNew(t, db)
				defer l.Close()
				_ = db.Close()
				_, err = l.Acquire(ctx, key)
				return err
			},
			says: []string{"no connection from the lock pool", "sql: database is closed"},
		},
		{
			name: "Acquire after Close",
			run: func(t *testing.T, key string) error {
				l := mustNew(t, in.db)
				_ = l.Close()
				_, err := l.Acquire(ctx, key)
				return err
			},
			is: []error{namedlock.ErrClosed},
		},
		{
			name: "Close twice",
			run: func(t *testing.T, _ string) error {
				l := mustNew(t, in.db)
				_ = l.Close()
				return l.Close()
			},
			is: []error{namedlock.ErrClosed},
		},
		{
			name: "Release after Close",
			run: func(t *testing.T, key string) error {
				l := mustNew(t, in.db)
				k, err := l.Acquire(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				_ = l.Close()
				return k.Release(ctx)
			},
			is: []error{namedlock.ErrClosed},
		},
		{
			name: "Do: the Locker closed while fn runs",
			run: func(t *testing.T, key string) error {
				l := mustNew(t, in.db)
				return l.Do(ctx, key, func(fctx context.Context) error {
					go l.Close()
					<-fctx.Done()
					return fctx.Err()
				})
			},
			is: []error{namedlock.ErrClosed, context.Canceled},
		},
		{
			name: "Close: a held lock lost before it",
			run: func(t *testing.T, key string) error {
				l := mustNew(t, in.db, namedlock.WithKeepAlive(20*time.Second))
				if _, err := l.Acquire(ctx, key); err != nil {
					t.Fatal(err)
				}
				key2 := errTestKey(t)
				if _, err := l.Acquire(ctx, key2); err != nil {
					t.Fatal(err)
				}
				kill(t, key)
				kill(t, key2)
				return l.Close()
			},
			is:   []error{namedlock.ErrLockLost},
			says: []string{killed},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := errTestKey(t)
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panicked: %v", p)
					}
				}()
				err = tc.run(t, key)
			}()
			if err == nil {
				t.Fatal("no error")
			}
			t.Logf("%s", err)
			for _, target := range tc.is {
				if !errors.Is(err, target) {
					t.Errorf("does not match %v: %q", target, err)
				}
			}
			if tc.mysqlErr != 0 {
				var me *mysql.MySQLError
				if !errors.As(err, &me) || me.Number != tc.mysqlErr {
					t.Errorf("the server's error %d is not reachable with errors.As: %q", tc.mysqlErr, err)
				}
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("does not say %q: %q", s, err)
				}
			}
			checkMessage(t, err, key)
		})
	}
}

var errShutdown = errors.New("shutting down")

// observedLocker returns a Locker on db, closed at the end of the test, and
// a func that returns the error of its latest NotAcquired event.
func observedLocker(t *testing.T, db *sql.DB) (*namedlock.Locker, func() error) {
	t.Helper()
	var (
		mu   sync.Mutex
		last error
	)
	l := mustNew(t, db, namedlock.WithObserver(func(e namedlock.Event) {
		if e.Outcome == namedlock.NotAcquired {
			mu.Lock()
			last = e.Err
			mu.Unlock()
		}
	}))
	t.Cleanup(func() { _ = l.Close() })
	return l, func() error {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// driverResult is a sql.Result that changed n rows.
type driverResult int64

func (r driverResult) LastInsertId() (int64, error) { return 0, nil }
func (r driverResult) RowsAffected() (int64, error) { return int64(r), nil }
