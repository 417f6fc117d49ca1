package lockconn_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/lockconn"
	"github.com/namedlock/mysql/internal/testdb"
)

// TestMethodsMatchDriver: *Conn has every method of go-sql-driver/mysql's
// connection, so it implements every interface that one does, except the
// deprecated Exec and Query (database/sql uses them only for a connection
// without ExecContext and QueryContext). A driver release that adds an
// interface fails here.
func TestMethodsMatchDriver(t *testing.T) {
	t.Parallel()
	mc, err := mysql.NewConnector(config(t))
	if err != nil {
		t.Fatal(err)
	}
	bare, err := mc.Connect(timeout(t))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	bt, ct := reflect.TypeOf(bare), reflect.TypeFor[*lockconn.Conn]()
	for i := range bt.NumMethod() {
		m := bt.Method(i)
		if m.Name == "Exec" || m.Name == "Query" {
			continue
		}
		cm, ok := ct.MethodByName(m.Name)
		if !ok {
			t.Errorf("*lockconn.Conn lacks %s%s", m.Name, m.Type)
			continue
		}
		if !sameSignature(m.Type, cm.Type) {
			t.Errorf("%s: the driver's is %s, *lockconn.Conn's is %s", m.Name, m.Type, cm.Type)
		}
	}
	for name, ok := range map[string]bool{
		"ConnBeginTx":        implements[driver.ConnBeginTx](bare),
		"ConnPrepareContext": implements[driver.ConnPrepareContext](bare),
		"ExecerContext":      implements[driver.ExecerContext](bare),
		"QueryerContext":     implements[driver.QueryerContext](bare),
		"Pinger":             implements[driver.Pinger](bare),
		"SessionResetter":    implements[driver.SessionResetter](bare),
		"Validator":          implements[driver.Validator](bare),
		"NamedValueChecker":  implements[driver.NamedValueChecker](bare),
	} {
		if !ok {
			t.Errorf("the driver's connection no longer implements driver.%s: *lockconn.Conn must not either (database/sql would behave differently)", name)
		}
	}
}

func implements[I any](v any) bool {
	_, ok := v.(I)
	return ok
}

// sameSignature reports whether methods a and b (with their receivers as
// first parameters) take and return the same types.
func sameSignature(a, b reflect.Type) bool {
	if a.NumIn() != b.NumIn() || a.NumOut() != b.NumOut() || a.IsVariadic() != b.IsVariadic() {
		return false
	}
	for i := 1; i < a.NumIn(); i++ {
		if a.In(i) != b.In(i) {
			return false
		}
	}
	for i := range a.NumOut() {
		if a.Out(i) != b.Out(i) {
			return false
		}
	}
	return true
}

// TestForwardCheckNamedValue: a uint64 above math.MaxInt64 goes through the
// driver's own argument check; database/sql's default one refuses it.
func TestForwardCheckNamedValue(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	db, _ := openDB(t, config(t), true)
	var got string
	if err := db.QueryRowContext(ctx, "SELECT CAST(? AS CHAR)", uint64(math.MaxUint64)).Scan(&got); err != nil {
		t.Fatalf("uint64 argument: %v", err)
	}
	if want := strconv.FormatUint(math.MaxUint64, 10); got != want {
		t.Errorf("uint64 argument came back as %s, want %s", got, want)
	}
}

// TestForwardBeginTx: transactions with an isolation level and read-only
// ones work, and take effect: READ COMMITTED sees a row another session
// commits meanwhile, REPEATABLE READ does not; a read-only transaction
// refuses an INSERT, another one accepts it.
func TestForwardBeginTx(t *testing.T) {
	t.Parallel()
	srv := testdb.RequireReal(t)
	ctx := timeout(t)
	db, _ := openDB(t, config(t), true)
	table := "`" + testdb.UniqueName(t) + "`"
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (i INT) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })
	count := func(tx *sql.Tx) int {
		t.Helper()
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		level   sql.IsolationLevel
		seesNew bool
	}{
		{sql.LevelReadCommitted, true},
		{sql.LevelRepeatableRead, false},
	} {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: tc.level})
		if err != nil {
			t.Fatalf("BeginTx(%v): %v", tc.level, err)
		}
		before := count(tx)
		if _, err := db.ExecContext(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		if sees := count(tx) > before; sees != tc.seesNew {
			t.Errorf("%v: sees a row committed meanwhile = %v, want %v", tc.level, sees, tc.seesNew)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	for _, readOnly := range []bool{true, false} {
		if readOnly && srv.Flavor == flavor.TiDB {
			t.Logf("%s: read-only transactions not tried: TiDB refuses START TRANSACTION READ ONLY (error 1235, a no-op function unless tidb_enable_noop_functions)", srv.Name)
			continue
		}
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: readOnly})
		if err != nil {
			t.Fatalf("BeginTx(ReadOnly: %v): %v", readOnly, err)
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES (2)")
		var me *mysql.MySQLError
		refused := errors.As(err, &me) && me.Number == 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
		if err != nil && !refused {
			t.Fatal(err)
		}
		if refused != readOnly {
			t.Errorf("ReadOnly: %v: INSERT refused = %v (%v)", readOnly, refused, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForwardPing: Ping reaches the server: it fails on a connection the
// server killed (database/sql's ping succeeds without a driver Pinger).
func TestForwardPing(t *testing.T) {
	t.Parallel()
	testdb.RequireReal(t)
	ctx := timeout(t)
	db, _ := openDB(t, config(t), true)
	if err := db.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	c := pin(t, ctx, db)
	if err := c.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	kill(t, ctx, sessionID(t, ctx, c))
	if err := c.PingContext(ctx); err == nil {
		t.Error("Ping on a killed connection succeeded")
	}
}

// TestForwardResetSession: an idle connection the server killed is found
// out when it is next taken from the pool (the driver's ResetSession) and
// replaced, so the statement succeeds on a new session.
func TestForwardResetSession(t *testing.T) {
	t.Parallel()
	testdb.RequireReal(t)
	ctx := timeout(t)
	db, _ := openDB(t, config(t), true)
	db.SetMaxOpenConns(1)
	id := sessionID(t, ctx, db)
	kill(t, ctx, id)
	var again int64
	if err := db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&again); err != nil {
		t.Fatalf("first statement after the server killed the idle connection: %v", err)
	}
	if again == id {
		t.Errorf("still session %d after KILL", id)
	}
}

// TestSocketDeadline: a deadline on Socket() bounds a statement run with a
// ctx that cannot be cancelled: one in the past fails it at once, one that
// passes mid-statement ends it then. Either way the driver closes the
// connection, which database/sql discards when it comes back (IsValid),
// even though Raw's callback reports no error.
func TestSocketDeadline(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	for _, tc := range []struct {
		name     string
		deadline func() time.Time
		query    string
	}{
		{"past", func() time.Time { return time.Unix(1, 0) }, "SELECT 1"},
		{"mid-statement", func() time.Time { return time.Now().Add(200 * time.Millisecond) }, "SELECT SLEEP(5)"},
	} {
		db, _ := openDB(t, config(t), true)
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var took time.Duration
		var qerr error
		if err := raw(c, func(lc *lockconn.Conn) error {
			s := lc.Socket()
			if s == nil {
				return errors.New("Socket() = nil")
			}
			if err := s.SetDeadline(tc.deadline()); err != nil {
				return err
			}
			start := time.Now()
			var rows driver.Rows
			rows, qerr = lc.QueryContext(context.Background(), tc.query, nil)
			if qerr == nil {
				_ = rows.Close()
			}
			took = time.Since(start)
			// Fails once the driver has closed the socket: harmless.
			_ = s.SetDeadline(time.Time{})
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if qerr == nil {
			t.Errorf("%s: %s succeeded", tc.name, tc.query)
		}
		// contract: the socket's deadline bounds the statement (Socket):
		// at once, or at 200 ms, not at the end of SLEEP(5); 2 s is the
		// generous bound that still tells them apart.
		if took > 2*time.Second {
			t.Errorf("%s: the statement took %v", tc.name, took)
		}
		t.Logf("%s: %v after %v", tc.name, qerr, took)
		_ = c.Close()
		if st := db.Stats(); st.OpenConnections != 0 {
			t.Errorf("%s: the broken connection went back to the pool (open %d, idle %d)", tc.name, st.OpenConnections, st.Idle)
		}
		if err := db.PingContext(ctx); err != nil {
			t.Errorf("%s: the pool after: %v", tc.name, err)
		}
	}
}
