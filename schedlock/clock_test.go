package schedlock

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// No file of the package reads the application's clock: every decision is
// made by the database's UTC_TIMESTAMP(3). (Timers and tickers, which only
// pace the keep-alive, count elapsed time, not the time of day.)
func TestNoApplicationClock(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, file, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		timePkg := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == `"time"` {
				timePkg = "time"
				if imp.Name != nil {
					timePkg = imp.Name.Name
				}
			}
		}
		if timePkg == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == timePkg {
				switch sel.Sel.Name {
				case "Now", "Since", "Until", "Unix", "UnixMilli", "UnixMicro", "Date":
					t.Errorf("%s: reads or builds a wall-clock time: %s.%s", fset.Position(sel.Pos()), timePkg, sel.Sel.Name)
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}

// An instance whose clock is hours away from the database's behaves by the
// database's clock alone. The database clock is frozen five hours behind
// the application's (SET timestamp on the pool's only connection), then
// moved by hand: real time passing does not free a lock, database time
// passing does, in both LockAtMostFor and LockAtLeastFor.
func TestDatabaseTimeDecides(t *testing.T) {
	t.Parallel()
	db := singleConn(t)
	table := newTable(t, db)
	a := mustNew(t, db, WithTable(table), WithLockedBy("a"))
	b := mustNew(t, db, WithTable(table), WithLockedBy("b"))
	c := mustNew(t, db, WithTable(table), WithLockedBy("c"))
	name := uniqueName(t)
	noop := func(context.Context) error { return nil }

	t0 := float64(time.Now().Add(-5*time.Hour).UnixMilli()) / 1000 // the test may read the clock
	setDBTime(t, db, t0)
	if _, err := a.Lock(bg, Config{Name: name, LockAtMostFor: time.Second}); err != nil {
		t.Fatal(err)
	}
	// 1.2 s of real time pass; the database's clock does not move.
	time.Sleep(1200 * time.Millisecond)
	if ran, err := b.Run(bg, Config{Name: name, LockAtMostFor: time.Second}, noop); ran || err != nil {
		t.Fatalf("ran %v err %v: the lock expired by the application's clock", ran, err)
	}
	// The database's clock passes lock_until: the job is free.
	setDBTime(t, db, t0+1.001)
	cfg := Config{Name: name, LockAtMostFor: time.Minute, LockAtLeastFor: 10 * time.Second}
	if ran, err := b.Run(bg, cfg, noop); !ran || err != nil {
		t.Fatalf("ran %v err %v after lock_until in database time", ran, err)
	}
	setDBTime(t, db, t0+5)
	if ran, err := c.Run(bg, cfg, noop); ran || err != nil {
		t.Fatalf("ran %v err %v within LockAtLeastFor in database time", ran, err)
	}
	setDBTime(t, db, t0+11.002)
	if ran, err := c.Run(bg, cfg, noop); !ran || err != nil {
		t.Fatalf("ran %v err %v after LockAtLeastFor in database time", ran, err)
	}
	r := readRow(t, db, table, name)
	t.Logf("application clock %s, database clock %s; row %+v",
		time.Now().UTC().Format(time.DateTime), time.UnixMilli(int64(t0*1000)).UTC().Format(time.DateTime), r)
}

// Extending twice within one database millisecond writes the same
// lock_until: MySQL reports 0 changed rows, yet the lease is still held.
func TestExtendToSameValueIsStillHeld(t *testing.T) {
	t.Parallel()
	db := singleConn(t)
	table := newTable(t, db)
	p := mustNew(t, db, WithTable(table), WithLockedBy("a"))
	name := uniqueName(t)
	setDBTime(t, db, 1_700_000_000.5)
	lease, err := p.Lock(bg, Config{Name: name, LockAtMostFor: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The raw statement shows the ambiguity the Provider must resolve.
	res, err := db.Exec("UPDATE `"+table+"` SET lock_until = TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)) "+
		"WHERE name = ? AND locked_by = ? AND lock_until > UTC_TIMESTAMP(3)", int64(1e6), name, "a")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 0 {
		t.Fatalf("rows affected %d; the server counts matched rows (clientFoundRows?)", n)
	}
	for i := range 2 {
		if err := lease.Extend(bg, time.Second); err != nil {
			t.Fatalf("extend %d: %v", i, err)
		}
	}
	if lease.Err() != nil {
		t.Fatal(lease.Err())
	}
	// And a real loss is still seen.
	if _, err := db.Exec("UPDATE `"+table+"` SET locked_by = 'thief' WHERE name = ?", name); err != nil {
		t.Fatal(err)
	}
	if err := lease.Extend(bg, time.Second); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("extend after theft: %v", err)
	}
	select {
	case <-lease.Done():
	default:
		t.Fatal("Done not closed after a lost extension")
	}
	if err := lease.Unlock(bg); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Unlock of a stolen row: %v", err)
	}
}
