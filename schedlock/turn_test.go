package schedlock

import (
	"context"
	"errors"
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
	p := New(db, WithTable(table), WithLockTimeout(lockTimeout))
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
	for deadline := time.Now().Add(bound); ; {
		var waiting int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND INFO NOT LIKE '%PROCESSLIST%'",
			"%"+table+"%").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
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
