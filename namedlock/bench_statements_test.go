package namedlock_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/mariadbtest"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
)

// serverCounters reads the global Questions and Com_stmt_prepare counters on
// conn (one statement, itself counted in Questions).
func serverCounters(t *testing.T, conn *sql.Conn) (questions, prepares int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := conn.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_stmt_prepare')")
	if err != nil {
		t.Fatalf("SHOW GLOBAL STATUS: %v", err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var name string
		var value int64
		if err := rows.Scan(&name, &value); err != nil {
			t.Fatalf("SHOW GLOBAL STATUS: %v", err)
		}
		switch name {
		case "Questions":
			questions = value
		case "Com_stmt_prepare":
			prepares = value
		}
		seen++
	}
	if err := rows.Err(); err != nil || seen != 2 {
		t.Fatalf("SHOW GLOBAL STATUS: %d of 2 counters, err %v", seen, err)
	}
	return questions, prepares
}

// controlConn opens one connection to dsn, outside every pool of the test,
// for reading the server's counters; closed at the end of the test.
func controlConn(t *testing.T, dsn string) *sql.Conn {
	t.Helper()
	ctl, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctl.Close() })
	conn, err := ctl.Conn(context.Background())
	if err != nil {
		t.Fatalf("control connection: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestStatementsPerDo counts the statements of an uncontended Do as the
// server sees them: exactly two (GET_LOCK and RELEASE_LOCK) and no
// server-side prepare. It runs on a private mariadbd, where nothing but this
// test sends statements, so the global counters are exact; the keep-alive
// interval is longer than the test, so no ownership check runs (a check is
// per held lock and interval, not per Do).
func TestStatementsPerDo(t *testing.T) {
	srv := mariadbtest.Start(t)
	inst := newInstance(t, srv.DSN(), namedlock.WithKeepAlive(20*time.Second))
	conn := controlConn(t, srv.DSN())

	ctx := context.Background()
	key := "statements-per-do"
	do := func() {
		t.Helper()
		if err := inst.locker.Do(ctx, key, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Do: %v", err)
		}
	}
	// Warm up: the lock connection is open and everything done once per
	// connection or per Locker is done.
	for range 5 {
		do()
	}
	q0, _ := serverCounters(t, conn)
	q1, p1 := serverCounters(t, conn)
	own := q1 - q0 // what one reading of the counters adds
	const n = 100
	for range n {
		do()
	}
	q2, p2 := serverCounters(t, conn)
	statements := q2 - q1 - own
	t.Logf("%d uncontended Do: %d statements (%.2f per Do), %d server-side prepares", n, statements, float64(statements)/n, p2-p1)
	if statements != 2*n {
		t.Errorf("%d uncontended Do ran %d statements, want exactly %d (2 per Do)", n, statements, 2*n)
	}
	if p2 != p1 {
		t.Errorf("%d uncontended Do caused %d server-side prepares, want 0", n, p2-p1)
	}
	if st := inst.locker.Stats(); st.ServerAcquisitions != n+5 || st.Handoffs != 0 {
		t.Errorf("Stats: %d server acquisitions and %d handoffs, want %d and 0", st.ServerAcquisitions, st.Handoffs, n+5)
	}
}

// TestStatementsPerFencedSection counts, as the server sees them on a
// private mariadbd, the statements of an uncontended Do and DoTx without
// and with fencing: fencing adds exactly one (the mint) to each. DoTx's fn
// runs one UPDATE.
func TestStatementsPerFencedSection(t *testing.T) {
	srv := mariadbtest.Start(t)
	app := testdb.OpenDB(t, srv.DSN())
	appx := sqlx.NewDb(app, "mysql")
	table := fenceTable(t, app)
	counter := counterTable(t, appx, 1)
	plain := newInstance(t, srv.DSN(), namedlock.WithKeepAlive(20*time.Second))
	fence := newInstance(t, srv.DSN(), namedlock.WithKeepAlive(20*time.Second), namedlock.WithFencing(app, table))
	conn := controlConn(t, srv.DSN())

	ctx := context.Background()
	upd := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE "+counter+" SET v = v + 1 WHERE id = 1")
		return err
	}
	kinds := []struct {
		name string
		run  func() error
	}{
		{"Do", func() error { return plain.locker.Do(ctx, "stmts", nothing) }},
		{"fenced Do", func() error { return fence.locker.Do(ctx, "stmts-f", nothing) }},
		{"DoTx", func() error { return plain.locker.DoTx(ctx, "stmts", appx.DB, nil, upd) }},
		{"fenced DoTx", func() error { return fence.locker.DoTx(ctx, "stmts-f", appx.DB, nil, upd) }},
	}
	const n = 50
	per := make(map[string]int64)
	for _, k := range kinds {
		for range 5 { // warm up: connections open, the fence table verified
			if err := k.run(); err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
		}
		q0, _ := serverCounters(t, conn)
		q1, p1 := serverCounters(t, conn)
		own := q1 - q0
		for range n {
			if err := k.run(); err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
		}
		q2, p2 := serverCounters(t, conn)
		stmts := q2 - q1 - own
		if stmts%n != 0 {
			t.Errorf("%s: %d statements for %d sections, not a whole number per section", k.name, stmts, n)
		}
		per[k.name] = stmts / n
		t.Logf("%-12s %d statements per section (%d server-side prepares in %d)", k.name, stmts/n, p2-p1, n)
	}
	if per["fenced Do"] != per["Do"]+1 || per["fenced DoTx"] != per["DoTx"]+1 || per["Do"] != 2 {
		t.Errorf("statements per section %v: want Do 2, fenced Do = Do + 1, fenced DoTx = DoTx + 1", per)
	}
}
