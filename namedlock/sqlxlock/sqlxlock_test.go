package sqlxlock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/namedlock/sqlxlock"
	"github.com/namedlock/mysql/pool"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// setup returns a Locker on its own lock pool, the application's pool as a
// *sqlx.DB, and a table (id INT PRIMARY KEY, v INT) with row 1 (v = 0),
// all closed or dropped at the end of the test.
func setup(t *testing.T, opts ...namedlock.Option) (*namedlock.Locker, *sqlx.DB, string) {
	t.Helper()
	srv := testdb.RequireReal(t)
	lockDB, err := pool.Open(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lockDB.Close() })
	l, err := namedlock.New(lockDB, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	db := sqlx.NewDb(testdb.OpenDB(t, srv.DSN), "mysql")
	table := "sqlxlock_" + sanitize(testdb.UniqueName(t))
	if _, err := db.Exec("CREATE TABLE " + table + " (id INT PRIMARY KEY, v INT NOT NULL, name VARCHAR(32) NOT NULL DEFAULT '') ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })
	if _, err := db.Exec("INSERT INTO " + table + " (id, v) VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	return l, db, table
}

// sanitize keeps what a table name may hold unquoted, at most 40 bytes.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) > 40 {
		b = b[len(b)-40:]
	}
	return string(b)
}

// TestDoTxSqlxTx: fn gets a *sqlx.Tx begun by db.BeginTxx: it carries db's
// driver name, so Rebind and named statements work on MySQL, and db's
// mapper for Get into a struct; the transaction commits, and nil means it
// did. Fails on a *sqlx.Tx built around the *sql.Tx (no driver name).
func TestDoTxSqlxTx(t *testing.T) {
	l, db, table := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type row struct {
		ID   int    `db:"id"`
		V    int    `db:"v"`
		Name string `db:"name"`
	}
	err := sqlxlock.DoTx(ctx, l, "sqlxlock:"+table, db, nil, func(ctx context.Context, tx *sqlx.Tx) error {
		if got := tx.DriverName(); got != "mysql" {
			t.Errorf("tx.DriverName() = %q, want mysql", got)
		}
		var r row
		if err := tx.GetContext(ctx, &r, tx.Rebind("SELECT id, v, name FROM "+table+" WHERE id = ?"), 1); err != nil {
			return err
		}
		r.V++
		r.Name = "named"
		if _, err := tx.NamedExecContext(ctx, "UPDATE "+table+" SET v = :v, name = :name WHERE id = :id", r); err != nil {
			return err
		}
		_, err := tx.NamedExecContext(ctx, "INSERT INTO "+table+" (id, v, name) VALUES (:id, :v, :name)", row{ID: 2, V: 7, Name: "second"})
		return err
	})
	if err != nil {
		t.Fatalf("DoTx: %v", err)
	}
	var got []row
	if err := db.SelectContext(ctx, &got, "SELECT id, v, name FROM "+table+" ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (row{1, 1, "named"}) || got[1] != (row{2, 7, "second"}) {
		t.Errorf("rows %+v, want [{1 1 named} {2 7 second}]", got)
	}
}

// TestDoTxUnsafe: a db made Unsafe gives fn an unsafe *sqlx.Tx, which
// scans a row with a column the struct lacks; a safe one refuses it.
func TestDoTxUnsafe(t *testing.T) {
	l, db, table := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type partial struct {
		ID int `db:"id"`
	}
	for _, tc := range []struct {
		db     *sqlx.DB
		wantOK bool
	}{{db.Unsafe(), true}, {db, false}} {
		err := sqlxlock.DoTx(ctx, l, "sqlxlock:"+table, tc.db, nil, func(ctx context.Context, tx *sqlx.Tx) error {
			var p partial
			return tx.GetContext(ctx, &p, "SELECT id, v FROM "+table+" WHERE id = 1")
		})
		if (err == nil) != tc.wantOK {
			t.Errorf("unsafe %v: DoTx = %v, want success %v", tc.wantOK, err, tc.wantOK)
		}
	}
}

// TestDoTxRollbackAndMisuse: fn's error rolls back and is returned; a nil
// Locker, db or fn returns ErrInvalidArgument before anything is locked;
// the options reach DoTx (a Locker with the serializable handoff refuses a
// DoTx at READ COMMITTED).
func TestDoTxRollbackAndMisuse(t *testing.T) {
	l, db, table := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	boom := errors.New("boom")
	err := sqlxlock.DoTx(ctx, l, "sqlxlock:"+table, db, nil, func(ctx context.Context, tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = 5 WHERE id = 1"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("DoTx = %v, want fn's error", err)
	}
	var v int
	if err := db.GetContext(ctx, &v, "SELECT v FROM "+table+" WHERE id = 1"); err != nil || v != 0 {
		t.Errorf("v = %d (%v), want 0: rolled back", v, err)
	}
	fn := func(context.Context, *sqlx.Tx) error { return nil }
	for name, err := range map[string]error{
		"nil Locker": sqlxlock.DoTx(ctx, nil, "k", db, nil, fn),
		"nil db":     sqlxlock.DoTx(ctx, l, "k", nil, nil, fn),
		"empty sqlx": sqlxlock.DoTx(ctx, l, "k", &sqlx.DB{}, nil, fn),
		"nil fn":     sqlxlock.DoTx(ctx, l, "k", db, nil, nil),
		"empty key":  sqlxlock.DoTx(ctx, l, "", db, nil, fn),
	} {
		if !errors.Is(err, namedlock.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if st := l.Stats(); st.Acquired != 1 || st.NotAcquired != 0 {
		t.Errorf("Stats = %+v, want the one DoTx acquired", st)
	}
	serial, _, _ := setup(t, namedlock.WithSerializableHandoff())
	err = sqlxlock.DoTx(ctx, serial, "k", db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, fn)
	if !errors.Is(err, namedlock.ErrInvalidArgument) {
		t.Errorf("DoTx at READ COMMITTED with the serializable handoff = %v, want ErrInvalidArgument", err)
	}
}
