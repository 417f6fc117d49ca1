package schedlock

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 65)
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    []error
		message string
	}{
		{"empty name", Config{LockAtMostFor: time.Second}, []error{ErrInvalidConfig}, "empty job name"},
		{"65 characters", Config{Name: long, LockAtMostFor: time.Second},
			[]error{ErrInvalidConfig, ErrNameTooLong}, "65 characters"},
		{"65 multibyte characters", Config{Name: strings.Repeat("é", 65), LockAtMostFor: time.Second},
			[]error{ErrNameTooLong}, "65 characters"},
		{"invalid UTF-8", Config{Name: "a\xffb", LockAtMostFor: time.Second}, []error{ErrInvalidConfig}, "UTF-8"},
		{"zero LockAtMostFor", Config{Name: "j"}, []error{ErrInvalidConfig}, "LockAtMostFor"},
		{"negative LockAtMostFor", Config{Name: "j", LockAtMostFor: -time.Second}, []error{ErrInvalidConfig}, "LockAtMostFor"},
		{"sub-millisecond LockAtMostFor", Config{Name: "j", LockAtMostFor: 999 * time.Microsecond},
			[]error{ErrInvalidConfig}, "at least 1ms"},
		{"negative LockAtLeastFor", Config{Name: "j", LockAtMostFor: time.Second, LockAtLeastFor: -1},
			[]error{ErrInvalidConfig}, "LockAtLeastFor"},
		{"LockAtLeastFor over LockAtMostFor", Config{Name: "j", LockAtMostFor: time.Second, LockAtLeastFor: 2 * time.Second},
			[]error{ErrInvalidConfig}, "must not exceed"},
		{"negative KeepAlive", Config{Name: "j", LockAtMostFor: time.Second, KeepAlive: -1},
			[]error{ErrInvalidConfig}, "KeepAlive"},
		{"KeepAlive not shorter", Config{Name: "j", LockAtMostFor: time.Second, KeepAlive: time.Second},
			[]error{ErrInvalidConfig}, "shorter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("Validate: %v, want %v", err, want)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("message %q lacks %q", err, tc.message)
			}
			checkMessage(t, err)
		})
	}
	ok := []Config{
		{Name: strings.Repeat("é", 64), LockAtMostFor: time.Millisecond},
		{Name: "j", LockAtMostFor: time.Second, LockAtLeastFor: time.Second},
		{Name: "j", LockAtMostFor: time.Second, KeepAlive: time.Second / 3},
	}
	for _, cfg := range ok {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	db := &sql.DB{} // never used: options fail before any statement
	for _, tc := range []struct {
		name string
		opt  Option
	}{
		{"empty table", WithTable("")},
		{"table with a space", WithTable("shed lock")},
		{"table with a backtick", WithTable("x`; DROP TABLE y; --")},
		{"65-character table", WithTable(strings.Repeat("t", 65))},
		{"two dots", WithTable("a.b.c")},
		{"empty locked_by", WithLockedBy("")},
		{"256-character locked_by", WithLockedBy(strings.Repeat("b", 256))},
		{"zero unlock timeout", WithUnlockTimeout(0)},
		{"zero lock timeout", WithLockTimeout(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(db, tc.opt)
			if !errors.Is(err, ErrInvalidConfig) || p != nil {
				t.Errorf("New: %v, %v", p, err)
			}
			checkMessage(t, err)
		})
	}
	if _, err := New(nil); !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil db: %v, want ErrInvalidArgument only", err)
	}
	p, err := New(db, WithTable("jobs.shedlock_2"), WithLockedBy(strings.Repeat("b", 255)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Table() != "jobs.shedlock_2" || !strings.Contains(p.stmt.update, "`jobs`.`shedlock_2`") {
		t.Errorf("table %q, statement %q", p.Table(), p.stmt.update)
	}
	a, b := mustNew(t, db), mustNew(t, db)
	if a.LockedBy() == b.LockedBy() || a.Table() != DefaultTable {
		t.Errorf("defaults: %q %q %q", a.LockedBy(), b.LockedBy(), a.Table())
	}
	t.Logf("default locked_by: %q", a.LockedBy())
}

// Bad input against the server: every case fails loudly, with the table
// or the name in the message.
func TestBadTables(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	cfg := Config{Name: uniqueName(t), LockAtMostFor: time.Second}
	noop := func(context.Context) error { return nil }

	t.Run("missing table", func(t *testing.T) {
		table := uniqueName(t)
		p := mustNew(t, db, WithTable(table))
		ran, err := p.Run(bg, cfg, noop)
		if ran || !errors.Is(err, ErrTableNotFound) ||
			!strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), "CreateTable") {
			t.Fatalf("ran %v err %v", ran, err)
		}
		t.Log(err)
		// CreateTable fixes it, and is idempotent.
		dropLater(t, db, table)
		for range 2 {
			if err := p.CreateTable(bg); err != nil {
				t.Fatal(err)
			}
		}
		if ran, err := p.Run(bg, cfg, noop); !ran || err != nil {
			t.Fatalf("after CreateTable: ran %v err %v", ran, err)
		}
	})
	t.Run("over-long name never reaches the table", func(t *testing.T) {
		p := mustNew(t, db, WithTable(uniqueName(t)))
		_, err := p.Run(bg, Config{Name: strings.Repeat("n", 65), LockAtMostFor: time.Second}, noop)
		if !errors.Is(err, ErrNameTooLong) {
			t.Fatal(err)
		}
	})
	t.Run("wrong columns", func(t *testing.T) {
		table := uniqueName(t)
		dropLater(t, db, table)
		if _, err := db.Exec("CREATE TABLE `" + table + "` (id INT PRIMARY KEY, `until` DATETIME)"); err != nil {
			t.Fatal(err)
		}
		ran, err := mustNew(t, db, WithTable(table)).Run(bg, cfg, noop)
		if ran || !errors.Is(err, ErrBadTable) || !strings.Contains(err.Error(), table) {
			t.Fatalf("ran %v err %v", ran, err)
		}
		t.Log(err)
	})
	srv := testdb.Get(t)
	for _, tc := range []struct {
		name, column, job string
		// what each attempt's error says on this server
		want func(attempt int) string
	}{
		// INSERT IGNORE truncates into a narrow column (ShedLock's lost jobs).
		{"name column narrower than 64", "VARCHAR(16)", strings.Repeat("n", 40),
			func(attempt int) string {
				if attempt == 0 {
					return "does not carry this name"
				}
				return "no row of table"
			}},
		// ... and cuts a 4-byte character a utf8mb3 column cannot hold. Both
		// servers store the mangled name with a warning; then neither will
		// compare the real name with the column: MariaDB raises error 1267
		// ("Illegal mix of collations"), MySQL error 3854 ("Cannot convert
		// string"), on the insert's check and on the later update alike.
		{"name column without 4-byte characters", "VARCHAR(64) CHARACTER SET utf8mb3", "job-\U0001F600",
			func(int) string {
				switch srv.Flavor {
				case flavor.MySQL:
					return "Error 3854"
				case flavor.MariaDB:
					return "Error 1267"
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := uniqueName(t)
			dropLater(t, db, table)
			if _, err := db.Exec("CREATE TABLE `" + table + "` (name " + tc.column + " NOT NULL, " +
				"lock_until TIMESTAMP(3) NOT NULL, locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), " +
				"locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"); err != nil {
				t.Fatal(err)
			}
			p := mustNew(t, db, WithTable(table))
			c := Config{Name: tc.job, LockAtMostFor: time.Second}
			for attempt := range 2 { // first run: the insert; second: the mangled row exists
				ran, err := p.Run(bg, c, noop)
				if ran || !errors.Is(err, ErrNameNotStorable) || !strings.Contains(err.Error(), tc.want(attempt)) {
					t.Fatalf("attempt %d: ran %v err %v; want ErrNameNotStorable saying %q", attempt, ran, err, tc.want(attempt))
				}
				t.Logf("attempt %d: %v", attempt, err)
			}
		})
	}
}

// checkMessage: an error of this package says "schedlock:" once, at the
// start, on one line.
func checkMessage(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "schedlock: ") || strings.Count(msg, "schedlock:") != 1 || strings.ContainsAny(msg, "\r\n") {
		t.Errorf("message %q: want one line with the prefix \"schedlock: \" once", msg)
	}
}

// Arguments that are no Config or Option are refused with
// ErrInvalidArgument, before any statement.
func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	p := mustNew(t, &sql.DB{}) // never used: the arguments fail first
	cfg := Config{Name: "j", LockAtMostFor: time.Second}
	ran, err := p.Run(bg, cfg, nil)
	if ran || !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Run with a nil fn: ran %v, %v; want ErrInvalidArgument only", ran, err)
	}
	checkMessage(t, err)
	l := &Lease{p: p, cfg: cfg, done: make(chan struct{})}
	err = l.Extend(bg, time.Microsecond)
	if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Extend(1µs): %v; want ErrInvalidArgument only", err)
	}
	checkMessage(t, err)
}
