package pool_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/pool"
)

// sameAsUser stands for a password equal to the DSN's user name.
const sameAsUser = "\x00user"

// hostilePasswords are the passwords every bad input is tried with: one
// character, digits that also appear in the address, the characters that
// delimit a DSN, unicode, and the user name itself.
var hostilePasswords = []string{
	"t", "1", "0", "3306", "127", "test", "secretpw",
	"p/w", "p@w", "p:w", "p%w", "p(w", "p)w", "p?w", "/@:%()", "a/b@c:d%e(f)g",
	"pä$$wörd✓", "日本語", sameAsUser,
}

// badInput is one row of TestOpenBadInput: a DSN shape (and options), the
// class of error Open must return, and its exact message.
type badInput struct {
	name string
	// dsn builds the DSN from the user, password and the server's network
	// and address.
	dsn  func(u, pw, netw, addr string) string
	ctx  func() context.Context // nil: Background
	opts []pool.Option
	// user picks the DSN's user: "" for a user that does not exist, "own"
	// for one whose password is pw, "other" for one whose password is not.
	user  string
	class error  // matched with errors.Is; nil: Open must succeed
	errno uint16 // if not 0, errors.As finds a *mysql.MySQLError with this Number
	netOp bool   // errors.As finds a *net.OpError
	// want is the exact message, with {net} {addr} {user} {db} replaced;
	// wantSlash replaces it when the password holds a '/' (the DSN then
	// parses otherwise).
	want, wantSlash string
}

func (b badInput) open(t *testing.T, u, pw, netw, addr string) error {
	ctx := context.Background()
	if b.ctx != nil {
		ctx = b.ctx()
	}
	db, err := pool.OpenContext(ctx, b.dsn(u, pw, netw, addr), b.opts...)
	if err == nil {
		_ = db.Close()
	}
	return err
}

// TestOpenBadInput: every bad DSN shape and option, with every hostile
// password, fails with an error of the expected class whose message is one
// line, exactly the expected text, and does not depend on the password:
// the same row run with the password's letters masked (its delimiters
// / @ : ( ) ? kept, so that the DSN parses the same way) gives the same
// message and the same texts all down the error chain. Login cases run
// against the real server, as users created here (for the masked run the
// user's password is changed to the masked one).
func TestOpenBadInput(t *testing.T) {
	t.Parallel()
	srv := testdb.RequireReal(t)
	cfg, err := mysql.ParseDSN(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	netw, addr := cfg.Net, cfg.Addr
	admin := testdb.OpenDB(t, srv.DSN)
	silent := listenSilently(t)
	pid := os.Getpid()
	noDB := fmt.Sprintf("nlpw_nodb_%d", pid)
	other := fmt.Sprintf("nlpw_other_%d", pid) // its password is none of the hostile ones
	createUser(t, admin, other, "Right-0ne-"+fmt.Sprint(pid), noDB, netw, addr)

	plain := func(db string) func(u, pw, netw, addr string) string {
		return func(u, pw, netw, addr string) string { return u + ":" + pw + "@" + netw + "(" + addr + ")/" + db }
	}
	at := func(netw, addr string) func(u, pw, _, _ string) string {
		return func(u, pw, _, _ string) string { return u + ":" + pw + "@" + netw + "(" + addr + ")/test" }
	}
	cancelled := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	const format = "expected the go-sql-driver format user:password@tcp(host:port)/dbname"
	rows := []badInput{
		{name: "right password, no database", dsn: plain(""), user: "own"},
		{name: "wrong password", dsn: plain("test"), user: "other", class: pool.ErrRefused, errno: 1045,
			want: `pool: {net} {addr}: the server refused the login for user "{user}" (access denied)`},
		{name: "unknown database", dsn: plain(noDB), user: "own", class: pool.ErrRefused, errno: 1049,
			want: `pool: {net} {addr} as "{user}": unknown database "{db}"`},
		{name: "database without access", dsn: plain("test"), user: "own", class: pool.ErrRefused, errno: 1044,
			want: `pool: {net} {addr} as "{user}": no access to database "test" (access denied)`},
		{name: "closed port", dsn: at("tcp", "127.0.0.1:1"), class: pool.ErrUnreachable, netOp: true,
			want: `pool: tcp 127.0.0.1:1 as "{user}": cannot reach the server: connect: connection refused`},
		{name: "silent server", dsn: at("tcp", silent), opts: []pool.Option{pool.WithConnectTimeout(200 * time.Millisecond)},
			class: pool.ErrUnreachable, want: `pool: tcp ` + silent + ` as "{user}": cannot reach the server: no answer within 200ms (WithConnectTimeout)`},
		{name: "no socket file", dsn: at("unix", "/nonexistent/mysqld.sock"), class: pool.ErrUnreachable, netOp: true,
			want: `pool: unix /nonexistent/mysqld.sock as "{user}": cannot reach the server: connect: no such file or directory`},
		{name: "cancelled ctx", dsn: at("tcp", "127.0.0.1:1"), ctx: cancelled, class: context.Canceled,
			want: `pool: tcp 127.0.0.1:1 as "{user}": gave up: context canceled`},
		{name: "unknown network", dsn: at("bogus", "127.0.0.1:3306"), class: pool.ErrInvalidDSN,
			want: `pool: invalid DSN: unknown network "bogus" (tcp, unix, or one registered with mysql.RegisterDialContext)`},
		{name: "URL", dsn: func(u, pw, _, _ string) string { return "mysql://" + u + ":" + pw + "@127.0.0.1:3306/test" },
			class: pool.ErrInvalidDSN, want: "pool: invalid DSN: a URL (scheme://…) is not accepted; " + format},
		{name: "URL with tcp()", dsn: func(u, pw, _, _ string) string { return "mysql://" + u + ":" + pw + "@tcp(127.0.0.1:3306)/test" },
			class: pool.ErrInvalidDSN, want: "pool: invalid DSN: a URL (scheme://…) is not accepted; " + format},
		{name: "host:port without tcp()", dsn: func(u, pw, _, _ string) string { return u + ":" + pw + "@127.0.0.1:3306/test" },
			class: pool.ErrInvalidDSN, want: "pool: invalid DSN: write the address as tcp(host:port); " + format},
		{name: "no /dbname", dsn: func(u, pw, _, _ string) string { return u + ":" + pw + "@tcp(127.0.0.1:3306)" },
			class: pool.ErrInvalidDSN, want: "pool: invalid DSN: no '/' before the database name (write /dbname after the address, or a bare / for none); " + format,
			wantSlash: "pool: invalid DSN: the database name holds '@', '(' or ')': is /dbname missing after the address? (a '/' in the password needs it); " + format},
		{name: "no closing parenthesis", dsn: func(u, pw, _, _ string) string { return u + ":" + pw + "@tcp(127.0.0.1:3306/test" },
			class: pool.ErrInvalidDSN, want: "pool: invalid DSN: the address has no closing ')'; " + format},
		{name: "unescaped / in a parameter", dsn: func(u, pw, _, _ string) string { return u + ":" + pw + "@tcp(127.0.0.1:3306)/test?loc=Europe/Paris" },
			class: pool.ErrInvalidDSN, want: "pool: invalid DSN: a '/' or ')' after the address is not escaped (URL-escape parameter values, e.g. %2F for '/')"},
		{name: "bad duration", dsn: func(u, pw, _, _ string) string { return u + ":" + pw + "@tcp(127.0.0.1:3306)/test?readTimeout=soon" },
			class: pool.ErrInvalidDSN, want: "pool: invalid DSN: parameter readTimeout has an invalid value"},
		{name: "unknown TLS config", dsn: func(u, pw, _, _ string) string { return u + ":" + pw + "@tcp(127.0.0.1:3306)/test?tls=custom" },
			class: pool.ErrInvalidDSN, want: "pool: invalid DSN: parameter tls has an invalid value"},
		{name: "bad escape in a parameter", dsn: func(u, pw, _, _ string) string { return u + ":" + pw + "@tcp(127.0.0.1:3306)/test?x=%zz" },
			class: pool.ErrInvalidDSN, want: "pool: invalid DSN: a parameter value is not URL-escaped (a '%' must start %XX)"},
		{name: "bad escape in the database", dsn: func(u, pw, _, _ string) string { return u + ":" + pw + "@tcp(127.0.0.1:3306)/te%zzst" },
			class: pool.ErrInvalidDSN, want: "pool: invalid DSN: the database name is not URL-escaped (a '%' must start %XX)"},
		{name: "unsafe collation", dsn: func(u, pw, _, _ string) string {
			return u + ":" + pw + "@tcp(127.0.0.1:3306)/test?collation=big5_chinese_ci"
		},
			class: pool.ErrInvalidDSN, want: "pool: invalid DSN: the collation cannot be used with interpolateParams, which the lock pool needs (use a utf8mb4 collation)"},
		{name: "WithMaxConns(0)", dsn: plain("test"), opts: []pool.Option{pool.WithMaxConns(0)},
			class: pool.ErrInvalidOption, want: "pool: invalid option: WithMaxConns(0): must be at least 1"},
		{name: "WithLease(1s)", dsn: plain("test"), opts: []pool.Option{pool.WithLease(time.Second)},
			class: pool.ErrInvalidOption, want: "pool: invalid option: WithLease(1s): must be at least 2s"},
		{name: "WithConnectTimeout(-1s)", dsn: plain("test"), opts: []pool.Option{pool.WithConnectTimeout(-time.Second)},
			class: pool.ErrInvalidOption, want: "pool: invalid option: WithConnectTimeout(-1s): must be positive"},
	}

	for i, pw := range hostilePasswords {
		t.Run(fmt.Sprintf("password %q", pw), func(t *testing.T) {
			if srv.Flavor != flavor.TiDB { // TiDB: one account change at a time (see settleTime)
				t.Parallel()
			}
			own := fmt.Sprintf("nlpw_%d_%d", i, pid)
			ownPw := pw
			if pw == sameAsUser {
				ownPw = own
			}
			createUser(t, admin, own, ownPw, noDB, netw, addr)
			// run opens every row with the passwords given and returns
			// what each error says, all down its chain.
			run := func(ownPw, otherPw func(u string) string) [][]string {
				var got [][]string
				for _, row := range rows {
					u, p := "app", otherPw("app")
					switch row.user {
					case "own":
						u, p = own, ownPw(own)
					case "other":
						u, p = other, otherPw(other)
					}
					err := row.open(t, u, p, netw, addr)
					got = append(got, chainTexts(err))
					checkBadInput(t, row, err, strings.Contains(p, "/"), strings.NewReplacer("{net}", netw, "{addr}", addr, "{user}", u, "{db}", noDB))
				}
				return got
			}
			with := func(p string) func(u string) string {
				return func(u string) string {
					if p == sameAsUser {
						return u
					}
					return p
				}
			}
			masked := func(u string) string { return mask(with(pw)(u)) }
			got := run(with(pw), with(pw))
			adminExec(t, admin, fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s", account(own), quote(mask(ownPw))))
			untilLogin(t, netw, addr, own, mask(ownPw), noDB)
			ref := run(masked, masked)
			for j, row := range rows {
				if strings.Join(got[j], "\n") != strings.Join(ref[j], "\n") {
					t.Errorf("%s: the error depends on the password:\n  with %q:\n    %s\n  masked:\n    %s",
						row.name, pw, strings.Join(got[j], "\n    "), strings.Join(ref[j], "\n    "))
				}
			}
		})
	}
}

// checkBadInput asserts the class, the one-line message and its exact text.
func checkBadInput(t *testing.T, row badInput, err error, slash bool, fill *strings.Replacer) {
	t.Helper()
	if row.class == nil {
		if err != nil {
			t.Errorf("%s: Open failed: %v", row.name, err)
		}
		return
	}
	if err == nil {
		t.Errorf("%s: Open succeeded", row.name)
		return
	}
	msg := err.Error()
	if !errors.Is(err, row.class) {
		t.Errorf("%s: %q does not match %v", row.name, msg, row.class)
	}
	for _, other := range []error{pool.ErrInvalidDSN, pool.ErrInvalidOption, pool.ErrUnreachable, pool.ErrRefused, pool.ErrUnsupportedServer} {
		if other != row.class && errors.Is(err, other) {
			t.Errorf("%s: %q also matches %v", row.name, msg, other)
		}
	}
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("%s: message spans lines: %q", row.name, msg)
	}
	want := row.want
	if slash && row.wantSlash != "" {
		want = row.wantSlash
	}
	if want := fill.Replace(want); msg != want {
		t.Errorf("%s:\n   got %s\n  want %s", row.name, msg, want)
	}
	var me *mysql.MySQLError
	if row.errno != 0 && (!errors.As(err, &me) || me.Number != row.errno) {
		t.Errorf("%s: errors.As finds no *mysql.MySQLError %d in %q (found %v)", row.name, row.errno, msg, me)
	}
	if row.netOp && !errors.As(err, new(*net.OpError)) {
		t.Errorf("%s: errors.As finds no *net.OpError in %q", row.name, msg)
	}
}

// chainTexts returns the text of err and of every error it wraps.
func chainTexts(err error) []string {
	if err == nil {
		return nil
	}
	texts := []string{err.Error()}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		texts = append(texts, chainTexts(u.Unwrap())...)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			texts = append(texts, chainTexts(e)...)
		}
	}
	return texts
}

// mask replaces every character of pw but the DSN delimiters / @ : ( ) ?
// with one that pw does not contain, so that a DSN with the masked
// password parses as the original does.
func mask(pw string) string {
	sub := 'Q'
	for strings.ContainsRune(pw, sub) {
		sub++
	}
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune("/@:()?", r) {
			return r
		}
		return sub
	}, pw)
}

// createUser creates user@'%' with password pw and a grant on the (never
// created) database noDB, dropped at the end of the test, and waits until
// it can log in at netw/addr.
func createUser(t *testing.T, admin *sql.DB, user, pw, noDB, netw, addr string) {
	t.Helper()
	acct := account(user)
	for _, stmt := range []string{
		"CREATE USER IF NOT EXISTS " + acct + " IDENTIFIED BY " + quote(pw),
		"ALTER USER " + acct + " IDENTIFIED BY " + quote(pw), // if it existed
		"GRANT SELECT ON `" + noDB + "`.* TO " + acct,
	} {
		adminExec(t, admin, stmt)
	}
	untilLogin(t, netw, addr, user, pw, noDB)
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP USER IF EXISTS " + acct); err != nil {
			t.Errorf("drop user %s: %v", user, err)
		}
	})
}

// settleTime bounds how long a user change may take to show: TiDB loads
// user records asynchronously (an ALTER USER right after CREATE USER may
// fail with error 1105 "Failed to get user record", and a login may be
// refused for a moment after a password change); MariaDB at once.
const settleTime = 10 * time.Second

// adminExec runs an account statement, again while TiDB has not yet loaded
// the user record it names.
func adminExec(t *testing.T, admin *sql.DB, stmt string) {
	t.Helper()
	deadline := time.Now().Add(settleTime)
	for {
		_, err := admin.Exec(stmt)
		if err == nil {
			return
		}
		// contract: the statement works once the server has the user
		// record; settleTime only ends a wait for what never comes.
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", stmt, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// untilLogin waits until user can log in at netw/addr with pw and its
// grant on noDB shows: a login to noDB, which does not exist, is then
// refused as an unknown database (1049), not as a database without access
// (1044) nor as a wrong password (1045), three times in a row.
func untilLogin(t *testing.T, netw, addr, user, pw, noDB string) {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, pw, netw, addr, noDB
	deadline := time.Now().Add(settleTime)
	for ok := 0; ; {
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err == nil {
			err = db.Ping()
			_ = db.Close()
		}
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1049 {
			if ok++; ok == 3 {
				return
			}
			continue
		}
		ok = 0
		// contract: the login works once the server has the account;
		// settleTime only ends a wait for what never comes.
		if time.Now().After(deadline) {
			t.Fatalf("user %s cannot log in with its password after %v: %v", user, settleTime, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func account(user string) string { return quote(user) + "@'%'" }

// quote is a SQL string literal of s (no backslashes in the passwords).
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
