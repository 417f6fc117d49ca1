package schedlock

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"
)

// A Provider runs one Lock's statements at a time; a Lock whose statement
// hangs (here: another transaction holds its row, so the server makes it
// wait up to innodb_lock_wait_timeout) holds up a Lock of another job for
// at most the lock timeout, though neither has a deadline of its own.
func TestLockTimeoutBoundsTheTurn(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := newTable(t, db)
	var wait int
	if err := db.QueryRow("SELECT @@innodb_lock_wait_timeout").Scan(&wait); err != nil {
		t.Fatal(err)
	}
	const lockTimeout, bound = 500 * time.Millisecond, 10 * time.Second
	if time.Duration(wait)*time.Second <= bound {
		t.Skipf("innodb_lock_wait_timeout is %d s: a held-up Lock would end by itself within the test's bound", wait)
	}
	p := mustNew(t, db, WithTable(table), WithLockTimeout(lockTimeout))
	stuck, other := uniqueName(t), uniqueName(t)
	lease, err := p.Lock(bg, Config{Name: stuck, LockAtMostFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(bg); err != nil {
		t.Fatal(err)
	}

	holder := openDB(t)
	tx, err := holder.BeginTx(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	var n int
	if err := tx.QueryRow("SELECT COUNT(*) FROM `"+table+"` WHERE name = ? FOR UPDATE", stuck).Scan(&n); err != nil || n != 1 {
		t.Fatalf("hold the row: %d rows, %v", n, err)
	}
	stuckErr := make(chan error, 1)
	go func() {
		l, err := p.Lock(bg, Config{Name: stuck, LockAtMostFor: time.Minute})
		if err == nil {
			_ = l.Unlock(bg)
		}
		stuckErr <- err
	}()
	// Wait until the stuck Lock's statement is at the server, waiting for
	// the row.
	// contract: the stuck Lock's statement reaches the server (the
	// premise of the test); bound only ends a wait for what never comes.
	for deadline := time.Now().Add(bound); ; {
		if statementsOn(t, db, table) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held-up Lock's statement never reached the server")
		}
		time.Sleep(5 * time.Millisecond)
	}

	began := time.Now()
	l, err := p.Lock(bg, Config{Name: other, LockAtMostFor: time.Minute})
	took := time.Since(began)
	if err != nil {
		t.Fatalf("Lock of another job while one Lock was held up: %v", err)
	}
	if err := l.Unlock(bg); err != nil {
		t.Error(err)
	}
	// contract: a held-up Lock holds up another job's Lock for at most the
	// lock timeout (WithLockTimeout, 500 ms); bound is 20× that, and below
	// innodb_lock_wait_timeout, at which the held-up one would end anyway.
	if took > bound {
		t.Errorf("Lock of another job waited %v for the held-up one (lock timeout %v)", took, lockTimeout)
	}
	if err := <-stuckErr; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("held-up Lock: %v, want its lock timeout", err)
	} else {
		checkMessage(t, err)
	}
	t.Logf("another job's Lock waited %v behind a held-up one (lock timeout %v)", took.Round(time.Millisecond), lockTimeout)
}

// statementsOn counts the sessions whose statement names table, other than
// the one asking. It reads SHOW FULL PROCESSLIST, which the server answers
// from its thread list (a SELECT on information_schema.PROCESSLIST
// materialises a temporary table, and MariaDB 10.11.19 crashed once freeing
// one while sessions were being killed).
func statementsOn(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	rows, err := db.Query("SHOW FULL PROCESSLIST")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			if strings.EqualFold(c, "Info") && strings.Contains(vals[i].String, table) && !strings.Contains(vals[i].String, "PROCESSLIST") {
				n++
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
