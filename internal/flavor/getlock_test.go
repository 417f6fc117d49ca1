package flavor_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
)

// TestGetLockOnServer checks, on the test server, the named-lock rules the
// library and its documentation rest on, with plain SQL on two sessions of
// their own. Where the servers differ, each subtest states every server's
// rule and checks the test server's.
func TestGetLockOnServer(t *testing.T) {
	s := testdb.RequireReal(t)
	db := testdb.OpenDB(t, s.DSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	session := func(t *testing.T) *sql.Conn {
		t.Helper()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// getLock runs GET_LOCK(name, timeout) on c.
	getLock := func(c *sql.Conn, name string, timeout any) (sql.NullInt64, time.Duration, error) {
		var got sql.NullInt64
		start := time.Now()
		err := c.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, timeout).Scan(&got)
		return got, time.Since(start), err
	}
	ints := func(t *testing.T, c *sql.Conn, query string, args ...any) sql.NullInt64 {
		t.Helper()
		var got sql.NullInt64
		if err := c.QueryRowContext(ctx, query, args...).Scan(&got); err != nil {
			t.Fatalf("%s %v: %v", query, args, err)
		}
		return got
	}
	take := func(t *testing.T, c *sql.Conn, name string) {
		t.Helper()
		if got, _, err := getLock(c, name, 0); err != nil || got.Int64 != 1 {
			t.Fatalf("GET_LOCK(%q, 0) on a free lock = %v, %v; want 1", name, got, err)
		}
	}
	held := func(t *testing.T, c *sql.Conn, name string) bool {
		t.Helper()
		return ints(t, c, "SELECT IS_USED_LOCK(?)", name).Valid
	}
	errNumber := func(err error) uint16 {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			return me.Number
		}
		return 0
	}
	mysqlLike := s.Flavor == flavor.MySQL || s.Flavor == flavor.TiDB

	// Names: MySQL and TiDB fold case, MariaDB compares bytes. All three
	// tell accents apart; MySQL and MariaDB tell a trailing space apart,
	// TiDB does not.
	t.Run("name comparison", func(t *testing.T) {
		a, b := session(t), session(t)
		u := testdb.UniqueName(t)
		take(t, a, u+"-Case")
		take(t, a, u+"-café")
		take(t, a, u+"-sp")
		gotCase, gotAccent, gotSpace := held(t, b, u+"-case"), held(t, b, u+"-cafe"), held(t, b, u+"-sp ")
		t.Logf("%s: while %q is held, %q is held %v; %q %v; %q %v", s.Name, u+"-Case", u+"-case", gotCase, u+"-cafe", gotAccent, u+"-sp ", gotSpace)
		if gotCase != mysqlLike {
			t.Errorf("case: the lowercased name is held %v, want %v (MySQL and TiDB fold case, MariaDB does not)", gotCase, mysqlLike)
		}
		if gotAccent {
			t.Error("accent: the unaccented name is held, want a lock of its own on every server")
		}
		if want := s.Flavor == flavor.TiDB; gotSpace != want {
			t.Errorf("trailing space: held %v, want %v (TiDB ignores it; MySQL and MariaDB do not)", gotSpace, want)
		}
	})

	// The length limit: 64 characters on MySQL (error 4163 beyond, 3057
	// before 8.4, from the manual) and TiDB (3057); 192 bytes on MariaDB
	// (1059 beyond). The empty name: error 3057 on MySQL and TiDB, NULL
	// without an error on MariaDB. A 4-byte character: refused on MySQL
	// (3057: names are converted to utf8mb3), taken on MariaDB and TiDB.
	t.Run("name limits", func(t *testing.T) {
		a := session(t)
		u := testdb.UniqueName(t)
		pad := func(n int) string { return u + strings.Repeat("x", n-len(u)) }
		take(t, a, pad(64))
		got, _, err := getLock(a, pad(65), 0)
		t.Logf("%s: 65 characters: %v, %v", s.Name, got, err)
		switch s.Flavor {
		case flavor.MySQL:
			if n := errNumber(err); n != 4163 && n != 3057 {
				t.Errorf("65 characters = %v, %v; want error 4163 (3057 before 8.4)", got, err)
			}
		case flavor.TiDB:
			if errNumber(err) != 3057 {
				t.Errorf("65 characters = %v, %v; want error 3057", got, err)
			}
		case flavor.MariaDB:
			if err != nil || got.Int64 != 1 {
				t.Errorf("65 characters = %v, %v; want 1 (MariaDB takes up to 192 bytes)", got, err)
			}
			take(t, a, pad(192))
			got, _, err = getLock(a, pad(193), 0)
			if errNumber(err) != 1059 {
				t.Errorf("193 bytes = %v, %v; want error 1059", got, err)
			}
		}
		if err != nil && !flavor.IsBadLockName(err) {
			t.Errorf("IsBadLockName(%v) = false", err)
		}

		got, _, err = getLock(a, "", 0)
		t.Logf("%s: the empty name: %v, %v", s.Name, got, err)
		switch {
		case mysqlLike && errNumber(err) != 3057:
			t.Errorf("empty name = %v, %v; want error 3057", got, err)
		case !mysqlLike && (err != nil || got.Valid):
			t.Errorf("empty name = %v, %v; want NULL without an error", got, err)
		}

		got, _, err = getLock(a, u+"-🔒", 0)
		t.Logf("%s: a 4-byte character: %v, %v", s.Name, got, err)
		switch {
		case s.Flavor == flavor.MySQL && errNumber(err) != 3057:
			t.Errorf("4-byte character = %v, %v; want error 3057", got, err)
		case s.Flavor != flavor.MySQL && (err != nil || got.Int64 != 1):
			t.Errorf("4-byte character = %v, %v; want 1", got, err)
		}
	})

	// A session re-taking a lock it holds counts it, and needs as many
	// releases. RELEASE_LOCK answers 1 for a release by the holder, 0 for
	// a lock another session holds, and for a lock nobody holds NULL
	// (MySQL, MariaDB) or 0 (TiDB).
	t.Run("re-entry and release", func(t *testing.T) {
		a, b := session(t), session(t)
		name := testdb.UniqueName(t)
		take(t, a, name)
		take(t, a, name)
		if got := ints(t, b, "SELECT RELEASE_LOCK(?)", name); !got.Valid || got.Int64 != 0 {
			t.Errorf("RELEASE_LOCK by another session = %v, want 0", got)
		}
		if got := ints(t, a, "SELECT RELEASE_LOCK(?)", name); got.Int64 != 1 {
			t.Errorf("first RELEASE_LOCK = %v, want 1", got)
		}
		if !held(t, b, name) {
			t.Error("after one release of two takes the lock is free, want still held")
		}
		if got := ints(t, a, "SELECT RELEASE_LOCK(?)", name); got.Int64 != 1 {
			t.Errorf("second RELEASE_LOCK = %v, want 1", got)
		}
		got := ints(t, a, "SELECT RELEASE_LOCK(?)", name)
		t.Logf("%s: RELEASE_LOCK of a lock nobody holds = %v", s.Name, got)
		if s.Flavor == flavor.TiDB {
			if !got.Valid || got.Int64 != 0 {
				t.Errorf("RELEASE_LOCK of a free lock = %v, want 0 on TiDB", got)
			}
		} else if got.Valid {
			t.Errorf("RELEASE_LOCK of a free lock = %v, want NULL", got)
		}
	})

	// COMMIT and ROLLBACK leave a named lock alone.
	t.Run("transactions", func(t *testing.T) {
		a, b := session(t), session(t)
		name := testdb.UniqueName(t)
		for _, end := range []string{"COMMIT", "ROLLBACK"} {
			if _, err := a.ExecContext(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if end == "COMMIT" {
				take(t, a, name)
			}
			if _, err := a.ExecContext(ctx, end); err != nil {
				t.Fatal(err)
			}
			if !held(t, b, name) {
				t.Errorf("after %s the lock is free, want held", end)
			}
		}
	})

	// The timeout: MariaDB takes fractional seconds; MySQL rounds to whole
	// seconds (0.4 does not wait, 0.5 waits 1 s); TiDB waits at least 1 s.
	// The lower bounds are what tell them apart; the upper bounds are wide.
	t.Run("timeout unit", func(t *testing.T) {
		a, b := session(t), session(t)
		name := testdb.UniqueName(t)
		take(t, a, name)
		for _, tc := range []struct {
			arg    float64
			lo, hi time.Duration
		}{
			{0.4, 0, 900 * time.Millisecond}, // MySQL: rounds to 0
			{0.5, 950 * time.Millisecond, 3 * time.Second},
		} {
			switch s.Flavor {
			case flavor.MariaDB:
				tc.lo, tc.hi = time.Duration(tc.arg*float64(time.Second))-50*time.Millisecond, 950*time.Millisecond
			case flavor.TiDB:
				tc.lo, tc.hi = 950*time.Millisecond, 3*time.Second
			}
			got, took, err := getLock(b, name, tc.arg)
			t.Logf("%s: GET_LOCK(held, %v) = %v after %v", s.Name, tc.arg, got, took)
			if err != nil || !got.Valid || got.Int64 != 0 {
				t.Errorf("GET_LOCK(held, %v) = %v, %v; want 0", tc.arg, got, err)
			}
			// contract: the timeout unit of each server, as
			// FractionalTimeouts documents it. A lower bound says the
			// wait lasted its (rounded) timeout; an upper bound below 1 s
			// says it was not rounded up to a second; 3 s only catches a
			// wait that does not end.
			if took < tc.lo {
				t.Errorf("GET_LOCK(held, %v) took %v, want at least %v", tc.arg, took, tc.lo)
			}
			if took > tc.hi {
				t.Errorf("GET_LOCK(held, %v) took %v, want at most %v", tc.arg, took, tc.hi)
			}
		}
	})

	// A negative timeout: MySQL and TiDB wait without limit (here until
	// the holder lets go, 1.5 s later); MariaDB answers NULL at once.
	t.Run("negative timeout", func(t *testing.T) {
		a, b := session(t), session(t)
		name := testdb.UniqueName(t)
		take(t, a, name)
		release := time.AfterFunc(1500*time.Millisecond, func() {
			_, _ = a.ExecContext(ctx, "DO RELEASE_LOCK(?)", name)
		})
		defer release.Stop()
		got, took, err := getLock(b, name, -1)
		t.Logf("%s: GET_LOCK(held, -1) = %v, %v after %v", s.Name, got, err, took)
		// contract: MySQL and TiDB wait until the release at 1.5 s (not
		// less); MariaDB answers at once, well before it (1.4 s is the
		// generous bound that still tells them apart).
		switch {
		case err != nil:
			t.Errorf("GET_LOCK(held, -1): %v", err)
		case mysqlLike && (got.Int64 != 1 || took < 1400*time.Millisecond):
			t.Errorf("GET_LOCK(held, -1) = %v after %v; want 1 once the holder released at 1.5 s", got, took)
		case !mysqlLike && (got.Valid || took > 1400*time.Millisecond):
			t.Errorf("GET_LOCK(held, -1) = %v after %v; want NULL at once", got, took)
		}
	})

	// A waiting session in the process list: state "User lock" on MySQL
	// (9.7 here) and MariaDB; TiDB shows the statement only. KILL QUERY of
	// the waiter ends its wait at once: MySQL fails it with error 1317,
	// MariaDB answers NULL (TiDB: a KILL cannot end a wait, not tried
	// here).
	t.Run("waiter", func(t *testing.T) {
		a, b := session(t), session(t)
		name := testdb.UniqueName(t)
		take(t, a, name)
		bid := ints(t, b, "SELECT CONNECTION_ID()").Int64
		type answer struct {
			got  sql.NullInt64
			took time.Duration
			err  error
		}
		done := make(chan answer, 1)
		go func() {
			got, took, err := getLock(b, name, 20)
			done <- answer{got, took, err}
		}()
		var state, info string
		deadline := time.Now().Add(10 * time.Second)
		for {
			state, info = sessionState(t, ctx, db, bid)
			if flavor.IsLockWait(state, info) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%s: the waiter's state %q, statement %q", s.Name, state, info)
		if !flavor.IsLockWait(state, info) {
			t.Fatalf("the waiter never showed as waiting: state %q, statement %q", state, info)
		}
		if s.Flavor != flavor.TiDB && state != "User lock" {
			t.Errorf("the waiter's state = %q, want \"User lock\"", state)
		}
		if s.Flavor == flavor.TiDB {
			_, _ = a.ExecContext(ctx, "DO RELEASE_LOCK(?)", name)
			if r := <-done; r.err != nil || r.got.Int64 != 1 {
				t.Errorf("the waiter, once the lock was released: %v, %v", r.got, r.err)
			}
			return
		}
		if _, err := db.ExecContext(ctx, "KILL QUERY "+strconv.FormatInt(bid, 10)); err != nil {
			t.Fatal(err)
		}
		r := <-done
		t.Logf("%s: KILL QUERY of the waiter: %v, %v after %v", s.Name, r.got, r.err, r.took)
		// contract: KILL QUERY ends the 20 s wait at once; 10 s only
		// catches a wait that ran on.
		switch {
		case r.took > 10*time.Second:
			t.Errorf("KILL QUERY did not end the wait (%v)", r.took)
		case s.Flavor == flavor.MySQL && (errNumber(r.err) != 1317 || !flavor.IsWaitKilled(r.err)):
			t.Errorf("the killed wait = %v, %v; want error 1317", r.got, r.err)
		case s.Flavor == flavor.MariaDB && (r.err != nil || r.got.Valid):
			t.Errorf("the killed wait = %v, %v; want NULL", r.got, r.err)
		}
		if held(t, a, name) && ints(t, a, "SELECT IS_USED_LOCK(?)", name).Int64 != ints(t, a, "SELECT CONNECTION_ID()").Int64 {
			t.Error("the killed waiter holds the lock")
		}
	})

	// A waiter whose client goes away (the driver closes the socket when
	// ctx ends, and sends nothing) stops waiting on MySQL and MariaDB,
	// which poll the connection while they wait (every second), and its
	// session ends; TiDB's wait ignores it and runs to its own timeout.
	t.Run("disconnect", func(t *testing.T) {
		a, b := session(t), session(t)
		name := testdb.UniqueName(t)
		take(t, a, name)
		bid := ints(t, b, "SELECT CONNECTION_ID()").Int64
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			var got sql.NullInt64
			done <- b.QueryRowContext(wctx, "SELECT GET_LOCK(?, 5)", name).Scan(&got)
		}()
		// contract: a GET_LOCK on a held lock shows as waiting
		// (IsLockWait); the 10 s only ends a wait for what never comes.
		deadline := time.Now().Add(10 * time.Second)
		for state, info := sessionState(t, ctx, db, bid); !flavor.IsLockWait(state, info); state, info = sessionState(t, ctx, db, bid) {
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("the waiter never showed as waiting: state %q, statement %q", state, info)
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		closed := time.Now()
		if err := <-done; err == nil {
			t.Fatal("the cancelled GET_LOCK answered")
		}
		var gone time.Duration
		for {
			state, info := sessionState(t, ctx, db, bid)
			gone = time.Since(closed)
			if state == "" && info == "" || gone > 8*time.Second {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%s: the waiter's session was gone %v after its client closed the socket (its GET_LOCK would wait 5 s)", s.Name, gone)
		// contract: TiDB's wait runs to its 5 s timeout (not ended before
		// 4 s); MySQL's and MariaDB's ends at their next poll of the
		// connection, about 1 s (3 s: 3× that).
		if s.Flavor == flavor.TiDB {
			if gone < 4*time.Second {
				t.Errorf("on TiDB the wait ended %v after the disconnect, want it to run to its 5 s timeout", gone)
			}
			return
		}
		// contract: (see above) gone within about 1 s on MySQL, MariaDB.
		if gone > 3*time.Second {
			t.Errorf("the waiter's session was still there %v after the disconnect, want it gone within about 1 s", gone)
		}
	})

	// A statement time limit ends a wait on MySQL (max_execution_time,
	// milliseconds: error 3024, which flavor.IsWaitKilled reports) and on
	// MariaDB (max_statement_time, seconds: GET_LOCK answers NULL, without
	// an error); TiDB's max_execution_time does not end a GET_LOCK wait,
	// which runs to its own timeout.
	t.Run("statement time limit", func(t *testing.T) {
		a, b := session(t), session(t)
		name := testdb.UniqueName(t)
		take(t, a, name)
		set := "SET SESSION max_execution_time = 300"
		if s.Flavor == flavor.MariaDB {
			set = "SET SESSION max_statement_time = 0.3"
		}
		if _, err := b.ExecContext(ctx, set); err != nil {
			t.Fatal(err)
		}
		got, took, err := getLock(b, name, 2)
		t.Logf("%s: %s, then GET_LOCK(held, 2) = %v, %v after %v", s.Name, set, got, err, took)
		switch s.Flavor {
		case flavor.MySQL:
			if errNumber(err) != 3024 || !flavor.IsWaitKilled(err) {
				t.Errorf("GET_LOCK under %q = %v, %v; want error 3024", set, got, err)
			}
		case flavor.MariaDB:
			if err != nil || got.Valid {
				t.Errorf("GET_LOCK under %q = %v, %v; want NULL", set, got, err)
			}
		case flavor.TiDB:
			// contract: TiDB's limit does not end the wait: it runs its
			// own 2 s.
			if err != nil || !got.Valid || got.Int64 != 0 || took < 1900*time.Millisecond {
				t.Errorf("GET_LOCK under %q = %v, %v after %v; want 0 after its own 2 s", set, got, err, took)
			}
			return
		}
		// contract: the statement limit ends the wait at its 300 ms: not
		// before, and before the wait's own 2 s (1.9 s is the generous
		// bound that still tells them apart).
		if took < 250*time.Millisecond {
			t.Errorf("the limited wait took %v, want about 300 ms", took)
		}
		if took > 1900*time.Millisecond {
			t.Errorf("the limited wait took %v, want about 300 ms", took)
		}
	})
}

// sessionState returns the state and statement of server session id, as
// SHOW FULL PROCESSLIST lists it.
func sessionState(t *testing.T, ctx context.Context, db *sql.DB, id int64) (state, info string) {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SHOW FULL PROCESSLIST")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[strings.ToLower(c)] = vals[i].String
		}
		if row["id"] == strconv.FormatInt(id, 10) {
			return row["state"], row["info"]
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return "", ""
}
