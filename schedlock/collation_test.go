package schedlock

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
)

// TestNameCollation: job names compare with the name column's collation, as
// the package documentation says. With the default utf8mb4 collations they
// are case- and accent-insensitive ("cafe" and "café" are one job); trailing
// spaces count only under a NO PAD collation, MySQL 8's default
// utf8mb4_0900_ai_ci, for which MariaDB's utf8mb4_general_nopad_ci stands in
// here ("job" and "job " are two jobs).
func TestNameCollation(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	srv := testdb.Get(t)
	var collation string
	if err := db.QueryRow("SELECT @@collation_database").Scan(&collation); err != nil {
		t.Fatal(err)
	}
	same := func(table, held, other string) bool {
		t.Helper()
		a := mustNew(t, db, WithTable(table), WithLockedBy("instance-a"))
		b := mustNew(t, db, WithTable(table), WithLockedBy("instance-b"))
		la, err := a.Lock(bg, Config{Name: held, LockAtMostFor: time.Minute})
		if err != nil {
			t.Fatalf("%s: Lock(%q): %v", table, held, err)
		}
		defer func() { _ = la.Unlock(bg) }()
		lb, err := b.Lock(bg, Config{Name: other, LockAtMostFor: time.Minute})
		if err == nil {
			_ = lb.Unlock(bg)
			return false
		}
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("%s: Lock(%q) while %q is held: %v", table, other, held, err)
		}
		return true
	}

	table := newTable(t, db)
	if srv.Flavor == flavor.TiDB && strings.HasSuffix(collation, "_bin") {
		t.Logf("%s, database collation %s: \"Job\" and \"job\" are one job: %v", srv.Name, collation, same(table, "Job", "job"))
		t.Skipf("%s: the database's collation is %s, under which job names are case- and accent-sensitive (the README says so); this test is about case-insensitive collations", srv.Name, collation)
	}
	for _, tc := range [][2]string{{"Job", "job"}, {"cafe", "café"}} {
		if !same(table, tc[0], tc[1]) {
			t.Errorf("database collation %s: %q and %q are two jobs, want one", collation, tc[0], tc[1])
		}
	}
	t.Logf("%s, database collation %s: %q and %q are one job: %v", srv.Name, collation, "job", "job ", same(table, "job", "job "))

	if srv.Flavor != flavor.MariaDB {
		return
	}
	nopad := uniqueName(t)
	if _, err := db.Exec("CREATE TABLE `" + nopad + "` (name VARCHAR(64) COLLATE utf8mb4_general_nopad_ci NOT NULL, " +
		"lock_until TIMESTAMP(3) NOT NULL, locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), " +
		"locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name)) DEFAULT CHARSET=utf8mb4"); err != nil {
		t.Fatal(err)
	}
	dropLater(t, db, nopad)
	if same(nopad, "job", "job ") {
		t.Error(`utf8mb4_general_nopad_ci: "job" and "job " are one job, want two`)
	}
	if !same(nopad, "cafe", "café") {
		t.Error(`utf8mb4_general_nopad_ci: "cafe" and "café" are two jobs, want one`)
	}
}
