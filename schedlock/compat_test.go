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

// shedLock runs ShedLock's MySQL statements (MySqlServerTimeStatementsSource,
// the usingDbTime() variant) exactly as its JDBC providers send them, with
// the named parameters bound in the same order. They are written out here,
// not taken from the package, so the comparison is against ShedLock's text.
type shedLock struct {
	db       *sql.DB
	table    string
	lockedBy string
}

// lock is StorageBasedLockProvider's lock: insert, then update.
func (s shedLock) lock(t *testing.T, name string, atMost time.Duration) bool {
	t.Helper()
	us := atMost.Nanoseconds() / 1_000 // lockConfiguration.getLockAtMostFor().toNanos() / 1_000
	res, err := s.db.Exec("INSERT IGNORE INTO "+s.table+"(name, lock_until, locked_at, locked_by) VALUES(?, "+
		"TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)), UTC_TIMESTAMP(3), ?)", name, us, s.lockedBy)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true
	}
	res, err = s.db.Exec("UPDATE "+s.table+" SET lock_until = TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)), "+
		"locked_at = UTC_TIMESTAMP(3), locked_by = ? WHERE name = ? AND lock_until <= UTC_TIMESTAMP(3)",
		us, s.lockedBy, name)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := res.RowsAffected()
	return n == 1
}

func (s shedLock) unlock(t *testing.T, name string, atLeast time.Duration) {
	t.Helper()
	us := atLeast.Nanoseconds() / 1_000
	_, err := s.db.Exec("UPDATE "+s.table+" SET lock_until = IF (TIMESTAMPADD(MICROSECOND, ?, locked_at) > "+
		"UTC_TIMESTAMP(3) , TIMESTAMPADD(MICROSECOND, ?, locked_at), UTC_TIMESTAMP(3)) WHERE name = ? AND locked_by = ?",
		us, us, name, s.lockedBy)
	if err != nil {
		t.Fatal(err)
	}
}

func (s shedLock) extend(t *testing.T, name string, atMost time.Duration) int64 {
	t.Helper()
	res, err := s.db.Exec("UPDATE "+s.table+" SET lock_until = TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)) "+
		"WHERE name = ? AND locked_by = ? AND lock_until > UTC_TIMESTAMP(3)", atMost.Nanoseconds()/1_000, name, s.lockedBy)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := res.RowsAffected()
	return n
}

// The Provider and ShedLock's statements, run on the same connection with
// the same frozen database clock, write identical rows at every step, in a
// +00:00 and in a +05:00 session.
//
// The rows are ShedLock's on each server, and the servers differ where a
// value has more than the column's three fractional digits: the unlock's
// locked_at + LockAtLeastFor is 22:13:21.2505, which MySQL (and TiDB)
// round to .251 when storing it in TIMESTAMP(3) (unless sql_mode has
// TIME_TRUNCATE_FRACTIONAL) and MariaDB truncates to .250. ShedLock sends
// the same expression, so it writes the same value as the Provider on
// every server.
func TestShedLockIdenticalRows(t *testing.T) {
	t.Parallel()
	srv := testdb.Get(t)
	rounds := fractionsRound(t, openDB(t), srv)
	for _, zone := range []string{"+00:00", "+05:00"} {
		t.Run("time_zone "+zone, func(t *testing.T) {
			db := singleConn(t)
			table := newTable(t, db)
			if _, err := db.Exec("SET time_zone = '" + zone + "'"); err != nil {
				t.Fatal(err)
			}
			const lockedBy = "node-a"
			java := shedLock{db: db, table: table, lockedBy: lockedBy}
			goP := mustNew(t, db, WithTable(table), WithLockedBy(lockedBy))
			const javaJob, goJob = "java-job", "go-job"
			// Sub-millisecond parts on purpose: both sides send microseconds,
			// the TIMESTAMP(3) columns keep milliseconds.
			cfg := Config{Name: goJob, LockAtMostFor: 10*time.Second + 123456*time.Microsecond,
				LockAtLeastFor: time.Second + 500*time.Microsecond}
			t0 := 1_700_000_000.250

			same := func(step string) {
				t.Helper()
				j, g := readRow(t, db, table, javaJob), readRow(t, db, table, goJob)
				if j != g {
					t.Errorf("%s: ShedLock wrote %+v, Provider wrote %+v", step, j, g)
				} else {
					t.Logf("%-28s %+v", step+":", g)
				}
			}
			check := func(step string, want row) {
				t.Helper()
				same(step)
				if got := readRow(t, db, table, goJob); got != want {
					t.Errorf("%s: row %+v, want %+v", step, got, want)
				}
			}
			// The wall-clock values UTC_TIMESTAMP(3) gives at t0 + offset.
			utc := func(off float64) string {
				ms := int64(t0*1000+0.5) + int64(off*1000+0.5)
				return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000")
			}

			setDBTime(t, db, t0)
			if !java.lock(t, javaJob, cfg.LockAtMostFor) {
				t.Fatal("ShedLock did not lock")
			}
			lease, err := goP.Lock(bg, cfg)
			if err != nil {
				t.Fatal(err)
			}
			check("lock (insert)", row{utc(10.123), utc(0), lockedBy})

			setDBTime(t, db, t0+0.1)
			if java.lock(t, javaJob, cfg.LockAtMostFor) {
				t.Error("ShedLock locked a held row")
			}
			if _, err := goP.Lock(bg, cfg); !errors.Is(err, ErrLocked) {
				t.Errorf("Provider locked a held row: %v", err)
			}
			check("held: both refuse", row{utc(10.123), utc(0), lockedBy})

			setDBTime(t, db, t0+0.2)
			java.extend(t, javaJob, cfg.LockAtMostFor)
			if err := lease.Extend(bg, cfg.LockAtMostFor); err != nil {
				t.Fatal(err)
			}
			check("extend", row{utc(10.323), utc(0), lockedBy})

			setDBTime(t, db, t0+0.3)
			java.unlock(t, javaJob, cfg.LockAtLeastFor)
			if err := lease.Unlock(bg); err != nil {
				t.Fatal(err)
			}
			// 1.0005 s after locked_at: MySQL rounds, MariaDB truncates.
			atLeastEnd := utc(1.000)
			if rounds {
				atLeastEnd = utc(1.001)
			}
			check("unlock (locked_at+atLeast)", row{atLeastEnd, utc(0), lockedBy})

			setDBTime(t, db, t0+0.9)
			if java.lock(t, javaJob, cfg.LockAtMostFor) {
				t.Error("ShedLock locked within LockAtLeastFor")
			}
			if _, err := goP.Lock(bg, cfg); !errors.Is(err, ErrLocked) {
				t.Errorf("Provider locked within LockAtLeastFor: %v", err)
			}

			setDBTime(t, db, t0+2)
			if !java.lock(t, javaJob, cfg.LockAtMostFor) {
				t.Fatal("ShedLock did not lock")
			}
			if lease, err = goP.Lock(bg, cfg); err != nil {
				t.Fatal(err)
			}
			check("lock (update)", row{utc(12.123), utc(2), lockedBy})

			setDBTime(t, db, t0+5)
			java.unlock(t, javaJob, cfg.LockAtLeastFor)
			if err := lease.Unlock(bg); err != nil {
				t.Fatal(err)
			}
			check("unlock (now)", row{utc(5), utc(2), lockedBy})
		})
	}
}

// fractionsRound reports whether srv rounds (MySQL, TiDB) or truncates (MariaDB)
// the digits past a TIMESTAMP(3) column's three, checked against what the
// server does with 0.0005 s stored into a temporary table.
func fractionsRound(t *testing.T, db *sql.DB, srv *testdb.Server) bool {
	t.Helper()
	var mode string
	if err := db.QueryRow("SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	want := (srv.Flavor == flavor.MySQL || srv.Flavor == flavor.TiDB) && !strings.Contains(mode, "TIME_TRUNCATE_FRACTIONAL")
	conn, err := db.Conn(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	var stored string
	for _, q := range []string{
		"CREATE TEMPORARY TABLE frac (ts TIMESTAMP(3) NOT NULL)",
		"INSERT INTO frac VALUES ('2023-11-14 22:13:21.2505')",
	} {
		if _, err := conn.ExecContext(bg, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.QueryRowContext(bg, "SELECT CAST(ts AS CHAR) FROM frac").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(bg, "DROP TEMPORARY TABLE frac"); err != nil {
		t.Fatal(err)
	}
	got := stored == "2023-11-14 22:13:21.251"
	if got != want {
		t.Fatalf("%s (sql_mode %q) stored 22:13:21.2505 in TIMESTAMP(3) as %s; expected it to %s", srv.Name, mode, stored,
			map[bool]string{true: "round (MySQL, TiDB)", false: "truncate (MariaDB)"}[want])
	}
	t.Logf("%s stores 22:13:21.2505 in TIMESTAMP(3) as %s (%s)", srv.Name, stored,
		map[bool]string{true: "rounds", false: "truncates"}[got])
	return got
}

// Rows written by ShedLock's statements are honoured by the Provider, and
// the other way round, on the live clock.
func TestShedLockHonoursEachOther(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := newTable(t, db)
	java := shedLock{db: db, table: table, lockedBy: "java-node"}
	p := mustNew(t, db, WithTable(table), WithLockedBy("go-node"))
	name := uniqueName(t)
	cfg := Config{Name: name, LockAtMostFor: time.Hour}
	noop := func(context.Context) error { return nil }

	if !java.lock(t, name, time.Hour) {
		t.Fatal("ShedLock could not lock")
	}
	if ran, err := p.Run(bg, cfg, noop); ran || err != nil {
		t.Fatalf("Provider ran a job ShedLock holds: ran %v err %v", ran, err)
	}
	if _, err := p.Lock(bg, cfg); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "java-node") {
		t.Fatalf("Lock: %v", err)
	}
	java.unlock(t, name, 0)
	if ran, err := p.Run(bg, Config{Name: name, LockAtMostFor: time.Hour, LockAtLeastFor: time.Hour}, noop); !ran || err != nil {
		t.Fatalf("Provider did not run after ShedLock unlocked: ran %v err %v", ran, err)
	}
	// The Provider's LockAtLeastFor row keeps ShedLock out, and ShedLock
	// cannot extend or unlock a row it does not hold.
	if java.lock(t, name, time.Hour) {
		t.Fatal("ShedLock locked within the Provider's LockAtLeastFor")
	}
	if n := java.extend(t, name, time.Hour); n != 0 {
		t.Fatalf("ShedLock extended the Provider's row (%d rows)", n)
	}
	r := readRow(t, db, table, name)
	if r.LockedBy != "go-node" {
		t.Fatalf("row %+v", r)
	}
	t.Logf("row after Provider's run: %+v", r)
}

// The documented hazard, shown: a row written in one session time_zone and
// read in another is shifted by the zones' difference. Every instance must
// use the same session time_zone (ShedLock's rule too).
func TestTimeZoneMismatchShiftsRows(t *testing.T) {
	t.Parallel()
	db := singleConn(t)
	table := newTable(t, db)
	p := mustNew(t, db, WithTable(table))
	name := uniqueName(t)
	if _, err := db.Exec("SET time_zone = '+05:00'"); err != nil {
		t.Fatal(err)
	}
	lease, err := p.Lock(bg, Config{Name: name, LockAtMostFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	in5 := readRow(t, db, table, name)
	if _, err := db.Exec("SET time_zone = '+00:00'"); err != nil {
		t.Fatal(err)
	}
	in0 := readRow(t, db, table, name)
	a, _ := time.Parse("2006-01-02 15:04:05.000", in5.LockedAt)
	b, _ := time.Parse("2006-01-02 15:04:05.000", in0.LockedAt)
	if d := a.Sub(b); d != 5*time.Hour {
		t.Errorf("locked_at read in +05:00 is %v after the same row read in +00:00, want 5h", d)
	}
	t.Logf("locked_at: %s in a +05:00 session, %s in a +00:00 session", in5.LockedAt, in0.LockedAt)
	// Unlocked in the zone it was locked in: in the +00:00 session its
	// lock_until reads as passed, and the unlock would find it run out.
	if _, err := db.Exec("SET time_zone = '+05:00'"); err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(bg); err != nil {
		t.Fatal(err)
	}
}
