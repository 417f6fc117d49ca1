package flavor_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/embedded"
	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
)

// TestMain runs testdb.Main: the server Get may start is stopped.
func TestMain(m *testing.M) { testdb.Main(m) }

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		version, comment string
		want             flavor.Flavor
	}{
		{"10.11.19-MariaDB-0+deb12u1", "Debian 12", flavor.MariaDB},
		{"11.4.2-MariaDB-log", "", flavor.MariaDB},
		{"5.5.5-10.6.12-mariadb", "", flavor.MariaDB},
		{"8.4.3", "MySQL Community Server - GPL", flavor.MySQL},
		{"8.0.36-28", "Percona Server (GPL), Release 28", flavor.MySQL},
		{"8.0.11-TiDB-master-20251126-e4e814fdc0af", "", flavor.TiDB},
		{"8.0.11-TiDB-v7.5.0", "", flavor.TiDB},
		{"8.0.31", "Dolt", flavor.Embedded},
		{"", "", flavor.MySQL},
	} {
		if got := flavor.Of(tc.version, tc.comment); got != tc.want {
			t.Errorf("Of(%q, %q) = %v, want %v", tc.version, tc.comment, got, tc.want)
		}
	}
}

func TestString(t *testing.T) {
	for f, want := range map[flavor.Flavor]string{
		flavor.Unknown:    "Flavor(0)",
		flavor.MySQL:      "MySQL",
		flavor.MariaDB:    "MariaDB",
		flavor.Embedded:   "go-mysql-server",
		flavor.TiDB:       "TiDB",
		flavor.Flavor(42): "Flavor(42)",
	} {
		if got := f.String(); got != want {
			t.Errorf("Flavor(%d).String() = %q, want %q", int(f), got, want)
		}
	}
}

func TestBehaviour(t *testing.T) {
	for _, tc := range []struct {
		f                   flavor.Flavor
		fractional, ignores bool
	}{
		{flavor.Unknown, false, false},
		{flavor.MySQL, false, false},
		{flavor.MariaDB, true, false},
		{flavor.Embedded, false, true},
		{flavor.TiDB, false, true},
	} {
		if got := tc.f.FractionalTimeouts(); got != tc.fractional {
			t.Errorf("%v.FractionalTimeouts() = %v", tc.f, got)
		}
		if got := tc.f.WaitsIgnoreCancel(); got != tc.ignores {
			t.Errorf("%v.WaitsIgnoreCancel() = %v", tc.f, got)
		}
	}
}

func TestWaitArg(t *testing.T) {
	const year = int64(365 * 24 * 3600)
	for _, tc := range []struct {
		f        flavor.Flavor
		left     time.Duration
		deadline bool
		arg      any
		hard     bool
	}{
		// No deadline: the longest wait; 1 s where waits ignore cancellation.
		{flavor.MySQL, 0, false, year, false},
		{flavor.MariaDB, 0, false, year, false},
		{flavor.TiDB, 0, false, int64(1), false},
		{flavor.Unknown, 0, false, year, false},
		{flavor.Embedded, 0, false, int64(1), false},
		{flavor.Embedded, time.Hour, false, int64(1), false},

		// MariaDB: fractional seconds, rounded up to the millisecond.
		{flavor.MariaDB, time.Nanosecond, true, 0.001, false},
		{flavor.MariaDB, 300 * time.Millisecond, true, 0.3, false},
		{flavor.MariaDB, 300*time.Millisecond + time.Microsecond, true, 0.301, false},
		{flavor.MariaDB, 1500 * time.Millisecond, true, 1.5, false},
		{flavor.MariaDB, 2 * time.Second, true, 2.0, false},
		{flavor.MariaDB, 400 * 24 * time.Hour, true, float64(400 * 24 * 3600), false},

		// Whole seconds: the seconds left, truncated, capped at the longest.
		{flavor.MySQL, time.Second, true, int64(1), false},
		{flavor.MySQL, 2999 * time.Millisecond, true, int64(2), false},
		{flavor.MySQL, 90 * time.Second, true, int64(90), false},
		{flavor.MySQL, 400 * 24 * time.Hour, true, year, false},
		{flavor.TiDB, 2500 * time.Millisecond, true, int64(1), false},
		{flavor.Unknown, 5 * time.Second, true, int64(5), false},
		{flavor.Embedded, time.Second, true, int64(1), false},
		{flavor.Embedded, 90 * time.Second, true, int64(1), false},

		// Under 1 s: 1 s, cut by the caller's ctx.
		{flavor.MySQL, time.Nanosecond, true, int64(1), true},
		{flavor.MySQL, 999 * time.Millisecond, true, int64(1), true},
		{flavor.TiDB, 500 * time.Millisecond, true, int64(1), true},
		{flavor.Embedded, 300 * time.Millisecond, true, int64(1), true},
	} {
		arg, hard := tc.f.WaitArg(tc.left, tc.deadline)
		if arg != tc.arg || hard != tc.hard {
			t.Errorf("%v.WaitArg(%v, %v) = %v (%T), %v; want %v (%T), %v",
				tc.f, tc.left, tc.deadline, arg, arg, hard, tc.arg, tc.arg, tc.hard)
		}
	}
}

func TestIsDeadlock(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}, true},
		{&mysql.MySQLError{Number: 3058, Message: "Deadlock found when trying to get user-level lock"}, true},
		{fmt.Errorf("GET_LOCK: %w", &mysql.MySQLError{Number: 3058}), true},
		{errors.Join(errors.New("x"), &mysql.MySQLError{Number: 1213}), true},
		{&mysql.MySQLError{Number: 1205}, false}, // lock wait timeout
		{&mysql.MySQLError{Number: 1317}, false}, // query interrupted
		{errors.New("Error 1213: deadlock"), false},
		{nil, false},
	} {
		if got := flavor.IsDeadlock(tc.err); got != tc.want {
			t.Errorf("IsDeadlock(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestDetect asks the test server what it is, on a pool and on a connection.
func TestDetect(t *testing.T) {
	s := testdb.Get(t)
	db := testdb.OpenDB(t, s.DSN)
	ctx := context.Background()
	f, version, err := flavor.Detect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Detect on %s: %v, %q", s.Name, f, version)
	if f != s.Flavor || version != s.Version {
		t.Errorf("Detect = %v, %q; the server is %v, %q", f, version, s.Flavor, s.Version)
	}
	if s.Real() == (f == flavor.Embedded) {
		t.Errorf("Detect = %v on a server with Real() = %v", f, s.Real())
	}

	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if f2, v2, err := flavor.Detect(ctx, c); err != nil || f2 != f || v2 != version {
		t.Errorf("Detect on a *sql.Conn = %v, %q, %v", f2, v2, err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if f, _, err := flavor.Detect(cancelled, db); err == nil || f != flavor.Unknown {
		t.Errorf("Detect with a cancelled ctx = %v, %v", f, err)
	}
}

// TestDetectEmbedded: go-mysql-server is Embedded, whatever server the other
// tests run on.
func TestDetectEmbedded(t *testing.T) {
	e, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after OpenDB's cleanup has closed the pool
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	f, version, err := flavor.Detect(context.Background(), testdb.OpenDB(t, e.DSN()))
	t.Logf("Detect on go-mysql-server at %s: %v, %q, %v", e.Addr(), f, version, err)
	if err != nil || f != flavor.Embedded {
		t.Fatalf("Detect = %v, %q, %v; want %v", f, version, err, flavor.Embedded)
	}
}

// TestWaitArgOnServer: the argument WaitArg gives for 300 ms left is accepted
// by the test server, and its wait for a held lock lasts about 300 ms where
// timeouts are fractional, 1 s (hard) elsewhere.
func TestWaitArgOnServer(t *testing.T) {
	s := testdb.Get(t)
	db := testdb.OpenDB(t, s.DSN)
	ctx := context.Background()
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	name := testdb.UniqueName(t)
	var got sql.NullInt64
	if err := holder.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("GET_LOCK = %v, %v", got, err)
	}
	defer func() { _, _ = holder.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", name) }()

	arg, hard := s.Flavor.WaitArg(300*time.Millisecond, true)
	start := time.Now()
	err = waiter.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, arg).Scan(&got)
	took := time.Since(start)
	t.Logf("%s: GET_LOCK(name, %v) for a held lock answered %v after %v (hard %v)", s.Name, arg, got, took, hard)
	if err != nil || !got.Valid || got.Int64 != 0 {
		t.Fatalf("GET_LOCK(name, %v) = %v, %v; want 0", arg, got, err)
	}
	// contract: WaitArg's wait lasts until the deadline: 300 ms where
	// timeouts are fractional, else the whole second it rounds up to
	// (FractionalTimeouts, WaitArg).
	lo := 900 * time.Millisecond
	if s.Flavor.FractionalTimeouts() {
		lo = 250 * time.Millisecond
	}
	if took < lo {
		t.Errorf("the wait took %v, want at least %v", took, lo)
	}
	// contract: where timeouts are fractional the wait ends at its 300 ms,
	// not at the next whole second (900 ms is the generous bound that
	// still tells them apart); elsewhere 3 s, 3× the second, only catches
	// a wait that does not end.
	hi := 3 * time.Second
	if s.Flavor.FractionalTimeouts() {
		hi = 900 * time.Millisecond
	}
	if took > hi {
		t.Errorf("the wait took %v, want at most %v", took, hi)
	}
	if hard == s.Flavor.FractionalTimeouts() {
		t.Errorf("hard = %v on %v", hard, s.Flavor)
	}
}

// TestCheckTopology: the test server (not Galera) passes; a failed query is
// an error that is not ErrNodeLocal.
func TestCheckTopology(t *testing.T) {
	s := testdb.Get(t)
	db := testdb.OpenDB(t, s.DSN)
	err := flavor.CheckTopology(context.Background(), db)
	t.Logf("CheckTopology on %s: %v", s.Name, err)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err = flavor.CheckTopology(cancelled, db)
	if err == nil || errors.Is(err, flavor.ErrNodeLocal) || !errors.Is(err, context.Canceled) ||
		!strings.Contains(err.Error(), "wsrep_on") {
		t.Errorf("CheckTopology with a cancelled ctx = %v", err)
	}
}

// TestCheckTopologyAnswers runs CheckTopology against a fake driver that
// answers its queries as told: no Galera node and no Group Replication
// group run here. The fake's DSN lists what the server answers:
// "name=value" for each variable SHOW VARIABLES has, "online=N" for the
// ONLINE members of the group, "fail" for a failing SHOW VARIABLES,
// "failmembers" for a failing read of the members.
func TestCheckTopologyAnswers(t *testing.T) {
	const gr = "group_replication_single_primary_mode"
	isNil := func(err error) bool { return err == nil }
	multi := func(n int) func(error) bool {
		return func(err error) bool {
			return errors.Is(err, flavor.ErrMultiPrimary) && errors.Is(err, flavor.ErrNodeLocal) &&
				err.Error() == fmt.Sprintf("%v (%d ONLINE members)", flavor.ErrMultiPrimary, n)
		}
	}
	for _, tc := range []struct {
		answer string
		check  func(error) bool
	}{
		{"wsrep_on=ON", func(err error) bool { return err == flavor.ErrNodeLocal }},
		{"wsrep_on=on", func(err error) bool { return err == flavor.ErrNodeLocal }},
		{"wsrep_on=OFF", isNil},
		{"", isNil}, // no such variables: MariaDB without Galera, MySQL without Group Replication
		{"fail", func(err error) bool {
			return errors.Is(err, errFake) && !errors.Is(err, flavor.ErrNodeLocal) && strings.Contains(err.Error(), "read wsrep_on")
		}},

		// Group Replication: refused in multi-primary mode with more than
		// one ONLINE member, like Galera.
		{gr + "=OFF;online=3", multi(3)},
		{gr + "=OFF;online=2", multi(2)},
		{gr + "=0;online=2", multi(2)},
		{gr + "=OFF;online=1", isNil}, // a group of one: one node, one set of locks
		{gr + "=OFF;online=0", isNil}, // the plugin is installed, the group is not running
		{gr + "=ON;online=3", isNil},  // single primary: like a primary with replicas
		{"wsrep_on=OFF;" + gr + "=ON;online=5", isNil},
		{gr + "=OFF;failmembers", func(err error) bool {
			return errors.Is(err, errFake) && !errors.Is(err, flavor.ErrNodeLocal) &&
				strings.Contains(err.Error(), "ONLINE members of the group could not be read")
		}},
	} {
		db, err := sql.Open(fakeDriverName, tc.answer)
		if err != nil {
			t.Fatal(err)
		}
		err = flavor.CheckTopology(context.Background(), db)
		_ = db.Close()
		t.Logf("server answering %q: CheckTopology = %v", tc.answer, err)
		if !tc.check(err) {
			t.Errorf("server answering %q: CheckTopology = %v", tc.answer, err)
		}
	}
	if errors.Is(flavor.ErrNodeLocal, flavor.ErrMultiPrimary) {
		t.Error("ErrNodeLocal (Galera) matches ErrMultiPrimary")
	}
}

// A fake database/sql driver answering CheckTopology's queries from its DSN
// (see TestCheckTopologyAnswers), or failing with errFake.
const fakeDriverName = "flavor-test-fake"

var errFake = errors.New("fake query failure")

func init() { sql.Register(fakeDriverName, fakeDriver{}) }

type fakeDriver struct{}

func (fakeDriver) Open(dsn string) (driver.Conn, error) { return fakeConn(dsn), nil }

type fakeConn string

func (c fakeConn) Prepare(q string) (driver.Stmt, error) { return fakeStmt{c, q}, nil }
func (fakeConn) Close() error                            { return nil }
func (fakeConn) Begin() (driver.Tx, error)               { return nil, errors.New("no transactions") }

type fakeStmt struct {
	conn  fakeConn
	query string
}

func (fakeStmt) Close() error                               { return nil }
func (fakeStmt) NumInput() int                              { return -1 }
func (fakeStmt) Exec([]driver.Value) (driver.Result, error) { return nil, errors.New("no exec") }
func (s fakeStmt) Query([]driver.Value) (driver.Rows, error) {
	answers := map[string]string{}
	for _, kv := range strings.Split(string(s.conn), ";") {
		k, v, _ := strings.Cut(kv, "=")
		answers[k] = v
	}
	switch {
	case strings.HasPrefix(s.query, "SHOW VARIABLES"):
		if _, ok := answers["fail"]; ok {
			return nil, errFake
		}
		r := &fakeRows{cols: []string{"Variable_name", "Value"}}
		for _, name := range []string{"wsrep_on", "group_replication_single_primary_mode"} {
			if v, ok := answers[name]; ok && strings.Contains(s.query, "'"+name+"'") {
				r.rows = append(r.rows, []driver.Value{name, v})
			}
		}
		return r, nil
	case strings.Contains(s.query, "performance_schema.replication_group_members") &&
		strings.Contains(s.query, "MEMBER_STATE = 'ONLINE'"):
		if _, ok := answers["failmembers"]; ok {
			return nil, errFake
		}
		n, err := strconv.Atoi(answers["online"])
		if err != nil {
			return nil, fmt.Errorf("fake: online=%q: %w", answers["online"], err)
		}
		return &fakeRows{cols: []string{"COUNT(*)"}, rows: [][]driver.Value{{int64(n)}}}, nil
	}
	return nil, fmt.Errorf("fake: unexpected query %q", s.query)
}

type fakeRows struct {
	cols []string
	rows [][]driver.Value
}

func (r *fakeRows) Columns() []string { return r.cols }
func (*fakeRows) Close() error        { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if len(r.rows) == 0 {
		return io.EOF
	}
	copy(dest, r.rows[0])
	r.rows = r.rows[1:]
	return nil
}

// TestIsWaitKilled: the errors of a wait ended by the server (KILL QUERY,
// a statement time limit) on MySQL, MariaDB and TiDB, as the driver returns
// them, and nothing else.
func TestIsWaitKilled(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1317, SQLState: [5]byte{'7', '0', '1', '0', '0'}, Message: "Query execution was interrupted"}, true},
		{&mysql.MySQLError{Number: 3024, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: "Query execution was interrupted, maximum statement execution time exceeded"}, true},
		{&mysql.MySQLError{Number: 1969, SQLState: [5]byte{'7', '0', '1', '0', '0'}, Message: "Query execution was interrupted (max_statement_time exceeded)"}, true},
		{fmt.Errorf("GET_LOCK: %w", &mysql.MySQLError{Number: 3024}), true},
		{&mysql.MySQLError{Number: 1213}, false}, // deadlock
		{&mysql.MySQLError{Number: 3058}, false}, // deadlock
		{&mysql.MySQLError{Number: 1205}, false}, // lock wait timeout
		{&mysql.MySQLError{Number: 1927}, false}, // connection killed (MariaDB)
		{mysql.ErrInvalidConn, false},
		{errors.New("Error 1317: interrupted"), false},
		{nil, false},
	} {
		if got := flavor.IsWaitKilled(tc.err); got != tc.want {
			t.Errorf("IsWaitKilled(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestIsBadLockName: MySQL's 3057 and 4163 (8.4's number for an over-long
// name) and MariaDB's 1059 are refused names; other errors are not.
func TestIsBadLockName(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 3057, Message: "Incorrect user-level lock name ''."}, true},
		{&mysql.MySQLError{Number: 4163, Message: "User-level lock name 'xxx' should not exceed 64 characters."}, true},
		{&mysql.MySQLError{Number: 1059, Message: "Identifier name 'xxx' is too long"}, true},
		{fmt.Errorf("x: %w", &mysql.MySQLError{Number: 4163}), true},
		{&mysql.MySQLError{Number: 1317}, false},
		{nil, false},
	} {
		if got := flavor.IsBadLockName(tc.err); got != tc.want {
			t.Errorf("IsBadLockName(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if !flavor.IsUnknownVariable(fmt.Errorf("x: %w", &mysql.MySQLError{Number: 1193})) || flavor.IsUnknownVariable(&mysql.MySQLError{Number: 1105}) {
		t.Error("IsUnknownVariable does not tell error 1193")
	}
}

// TestStatementTimeVar: the per-kind rule. MySQL's and TiDB's variable
// cannot be tried here (no such server runs): MariaDB's is tried by
// TestNoStatementLimitOnServer.
func TestStatementTimeVar(t *testing.T) {
	for f, want := range map[flavor.Flavor]string{
		flavor.MariaDB:  "max_statement_time",
		flavor.MySQL:    "max_execution_time",
		flavor.TiDB:     "max_execution_time",
		flavor.Embedded: "",
		flavor.Unknown:  "",
	} {
		if got := f.StatementTimeVar(); got != want {
			t.Errorf("%v.StatementTimeVar() = %q, want %q", f, got, want)
		}
		stmt := f.NoStatementLimit()
		if (want == "") != (stmt == "") || (want != "" && stmt != "SET SESSION "+want+" = 0") {
			t.Errorf("%v.NoStatementLimit() = %q", f, stmt)
		}
	}
}

// TestNoStatementLimitOnServer: the test server accepts its kind's
// statement, and it switches the limit off for that session only.
func TestNoStatementLimitOnServer(t *testing.T) {
	s := testdb.Get(t)
	stmt := s.Flavor.NoStatementLimit()
	if stmt == "" {
		t.Skipf("%s has no statement time limit", s.Name)
	}
	db := testdb.OpenDB(t, s.DSN)
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "SET SESSION "+s.Flavor.StatementTimeVar()+" = 5"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		t.Fatalf("%s: %s: %v", s.Name, stmt, err)
	}
	var v float64
	if err := db.QueryRowContext(ctx, "SELECT @@session."+s.Flavor.StatementTimeVar()).Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: after %q the session's %s is %v", s.Name, stmt, s.Flavor.StatementTimeVar(), v)
	if v != 0 {
		t.Errorf("%s = %v after %q", s.Flavor.StatementTimeVar(), v, stmt)
	}
	other := map[flavor.Flavor]flavor.Flavor{flavor.MariaDB: flavor.MySQL, flavor.MySQL: flavor.MariaDB, flavor.TiDB: flavor.MariaDB}[s.Flavor]
	_, err := db.ExecContext(ctx, other.NoStatementLimit())
	t.Logf("%s: the other kind's %q: %v", s.Name, other.NoStatementLimit(), err)
	if s.Flavor == flavor.TiDB {
		// TiDB knows MariaDB's name too (measured: no error); only the
		// refusal between MySQL and MariaDB matters to pool.Open.
		return
	}
	if !flavor.IsUnknownVariable(err) {
		t.Errorf("%q on %s = %v, want error 1193", other.NoStatementLimit(), s.Name, err)
	}
}

// TestTiDBRules: the rules that set TiDB apart, per kind.
func TestTiDBRules(t *testing.T) {
	for _, tc := range []struct {
		f                                  flavor.Flavor
		deadlocks, tryWaits, interpolation bool
	}{
		{flavor.Unknown, false, false, false},
		{flavor.MySQL, true, false, false},
		{flavor.MariaDB, true, false, false},
		{flavor.Embedded, false, false, false},
		{flavor.TiDB, false, true, true},
	} {
		if got := tc.f.DetectsDeadlocks(); got != tc.deadlocks {
			t.Errorf("%v.DetectsDeadlocks() = %v", tc.f, got)
		}
		if got := tc.f.NamesHolder(); got == (tc.f == flavor.TiDB) {
			t.Errorf("%v.NamesHolder() = %v", tc.f, got)
		}
		if got := tc.f.TryWaits(); got != tc.tryWaits {
			t.Errorf("%v.TryWaits() = %v", tc.f, got)
		}
		if got := tc.f.SnapshotAtFirstStatement(); got != (tc.f == flavor.TiDB) {
			t.Errorf("%v.SnapshotAtFirstStatement() = %v", tc.f, got)
		}
		if got := tc.f.NeedsInterpolation(); got != tc.interpolation {
			t.Errorf("%v.NeedsInterpolation() = %v", tc.f, got)
		}
	}
	if got := flavor.TryProbeName("Report:Nightly"); got != "report:nightly" {
		t.Errorf("TryProbeName = %q", got)
	}
}

// TestIsRetryLimit: TiDB's 1105 with its message, and nothing else (1105
// is TiDB's catch-all error).
func TestIsRetryLimit(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1105, Message: "pessimistic lock retry limit reached"}, true},
		{fmt.Errorf("GET_LOCK: %w", &mysql.MySQLError{Number: 1105, Message: "[tikv:1105]pessimistic lock retry limit reached"}), true},
		{&mysql.MySQLError{Number: 1105, Message: "other error"}, false},
		{&mysql.MySQLError{Number: 1205, Message: "pessimistic lock retry limit reached"}, false},
		{errors.New("pessimistic lock retry limit reached"), false},
		{nil, false},
	} {
		if got := flavor.IsRetryLimit(tc.err); got != tc.want {
			t.Errorf("IsRetryLimit(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if !flavor.IsLockedNowait(fmt.Errorf("x: %w", &mysql.MySQLError{Number: 3572})) || flavor.IsLockedNowait(&mysql.MySQLError{Number: 1205}) {
		t.Error("IsLockedNowait misclassifies 3572 / 1205")
	}
}

// TestMaxHoldOnServer: 0 (no limit) on every kind but TiDB; on TiDB the
// instance's performance.max-txn-ttl, read without error.
func TestMaxHoldOnServer(t *testing.T) {
	s := testdb.Get(t)
	db := testdb.OpenDB(t, s.DSN)
	d, err := s.Flavor.MaxHold(context.Background(), db)
	t.Logf("%s: MaxHold = %v, %v", s.Name, d, err)
	if err != nil {
		t.Fatal(err)
	}
	if (d > 0) != (s.Flavor == flavor.TiDB) {
		t.Errorf("MaxHold = %v on %v", d, s.Flavor)
	}
}

// TestMaxHoldAnswers: what MaxHold makes of TiDB's answers to
// MaxTxnTTLQuery, from a fake driver (no TiDB in security enhanced mode
// runs here): the setting in milliseconds; a refusal to say (error 1227,
// RESTRICTED_VARIABLES_ADMIN; 1193; NULL), which is TiDB's default of 1 h
// and ErrMaxHoldRefused; any other failure, which is no limit known (0)
// and an error that is not ErrMaxHoldRefused, so that the caller asks
// again. Other kinds have no limit and are not asked.
func TestMaxHoldAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  driver.Value
		err     error
		want    time.Duration
		refused bool
		failed  bool
	}{
		{"5000 ms", float64(5000), nil, 5 * time.Second, false, false},
		{"SEM", nil, &mysql.MySQLError{Number: 1227, Message: "Access denied; you need (at least one of) the RESTRICTED_VARIABLES_ADMIN privilege(s) for this operation"}, flavor.DefaultMaxTxnTTL, true, true},
		{"unknown variable", nil, &mysql.MySQLError{Number: 1193, Message: "Unknown system variable 'tidb_config'"}, flavor.DefaultMaxTxnTTL, true, true},
		{"NULL", nil, nil, flavor.DefaultMaxTxnTTL, true, true},
		{"broken connection", nil, mysql.ErrInvalidConn, 0, false, true},
		{"timeout", nil, context.DeadlineExceeded, 0, false, true},
	} {
		db := sql.OpenDB(oneAnswer{q: flavor.MaxTxnTTLQuery, v: tc.answer, err: tc.err})
		got, err := flavor.TiDB.MaxHold(context.Background(), db)
		_ = db.Close()
		t.Logf("%s: MaxHold = %v, %v", tc.name, got, err)
		if got != tc.want || (err != nil) != tc.failed || errors.Is(err, flavor.ErrMaxHoldRefused) != tc.refused {
			t.Errorf("%s: MaxHold = %v, %v; want %v, failed %v, ErrMaxHoldRefused %v", tc.name, got, err, tc.want, tc.failed, tc.refused)
		}
	}
	db := sql.OpenDB(oneAnswer{q: "none", err: errFake})
	defer db.Close()
	if got, err := flavor.MariaDB.MaxHold(context.Background(), db); got != 0 || err != nil {
		t.Errorf("MariaDB: MaxHold = %v, %v; want 0, nil without a query", got, err)
	}
	if !flavor.IsWriteConflict(&mysql.MySQLError{Number: 9007, Message: "Write conflict, txnStartTS=1 [try again later]"}) ||
		flavor.IsWriteConflict(&mysql.MySQLError{Number: 1213, Message: "Deadlock found"}) || flavor.IsWriteConflict(errFake) {
		t.Error("IsWriteConflict: want 9007 only")
	}
}

// oneAnswer is a fake connector whose connections answer query q with one
// row of one column, v (NULL when nil), or fail it with err; any other
// query fails with errFake.
type oneAnswer struct {
	q   string
	v   driver.Value
	err error
}

func (c oneAnswer) Connect(context.Context) (driver.Conn, error) { return oneAnswerConn{c}, nil }
func (c oneAnswer) Driver() driver.Driver                        { return nil }

type oneAnswerConn struct{ a oneAnswer }

func (c oneAnswerConn) Prepare(q string) (driver.Stmt, error) {
	if q != c.a.q {
		return nil, errFake
	}
	return oneAnswerStmt(c), nil
}
func (oneAnswerConn) Close() error              { return nil }
func (oneAnswerConn) Begin() (driver.Tx, error) { return nil, errors.New("no transactions") }

type oneAnswerStmt struct{ a oneAnswer }

func (oneAnswerStmt) Close() error                               { return nil }
func (oneAnswerStmt) NumInput() int                              { return -1 }
func (oneAnswerStmt) Exec([]driver.Value) (driver.Result, error) { return nil, errors.New("no exec") }
func (s oneAnswerStmt) Query([]driver.Value) (driver.Rows, error) {
	if s.a.err != nil {
		return nil, s.a.err
	}
	return &fakeRows{cols: []string{"ms"}, rows: [][]driver.Value{{s.a.v}}}, nil
}
