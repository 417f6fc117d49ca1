package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Sentinel errors of [Open], matched with [errors.Is]. The message of an
// error Open returns is one line, composed by this package from fixed text
// and the fields it names on purpose (network, address, user, database);
// it never quotes the DSN, so the password cannot appear in it whatever it
// looks like. The driver's error stays in the chain wherever its own text
// cannot hold DSN text: [errors.As] finds the server's *mysql.MySQLError
// when a login is refused, and the *net.OpError when the server cannot be
// reached.
var (
	// ErrInvalidDSN: the DSN is not one the driver can use (not its
	// format, a URL, a parameter with an invalid value). Nothing was
	// dialed.
	ErrInvalidDSN = errors.New("pool: invalid DSN")

	// ErrInvalidOption: an [Option] is out of range. Nothing was dialed.
	ErrInvalidOption = errors.New("pool: invalid option")

	// ErrUnreachable: no answer from the server: nothing listens at the
	// address, the host name does not resolve, the connection was cut, or
	// the server did not answer within the connect timeout.
	ErrUnreachable = errors.New("pool: cannot reach the server")

	// ErrRefused: the server answered and refused the connection: wrong
	// user or password, unknown database or no access to it, too many
	// connections and so on. The server's *mysql.MySQLError is in the
	// chain when it sent one.
	ErrRefused = errors.New("pool: the server refused the connection")

	// ErrUnsupportedServer is returned by [Open] when the server answers
	// but named locks cannot be trusted there (for example Galera or
	// Percona XtraDB Cluster with wsrep_on=ON, where locks are node-local
	// or refused).
	ErrUnsupportedServer = errors.New("pool: named locks cannot be trusted on this server")
)

// openError is an error of Open whose text is composed here rather than
// taken from the errors it wraps.
type openError struct {
	msg     string  // one line; holds no DSN text but the fields named on purpose
	wrapped []error // a sentinel of this package, the driver's (or net's) error when its text cannot hold DSN text, ctx's error
}

// Error returns the message.
func (e *openError) Error() string { return e.msg }

// Unwrap returns the errors kept in the chain.
func (e *openError) Unwrap() []error { return e.wrapped }

// newOpenError formats the message and keeps the non-nil errors of wrapped.
func newOpenError(wrapped []error, format string, args ...any) error {
	e := &openError{msg: oneLine(fmt.Sprintf(format, args...))}
	for _, err := range wrapped {
		if err != nil {
			e.wrapped = append(e.wrapped, err)
		}
	}
	return e
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// dsnFormat is what a DSN looks like, for messages.
const dsnFormat = "the go-sql-driver format user:password@tcp(host:port)/dbname"

// Texts of the driver's DSN errors that hold no DSN text: such an error is
// kept in the chain. Any other parse error is replaced, not wrapped.
var driverFixedDSNErrors = map[string]string{
	"invalid DSN: missing the slash separating the database name":           "no '/' before the database name (write /dbname after the address, or a bare / for none); expected " + dsnFormat,
	"invalid DSN: network address not terminated (missing closing brace)":   "the address has no closing ')'; expected " + dsnFormat,
	"invalid DSN: did you forget to escape a param value?":                  "a '/' or ')' after the address is not escaped (URL-escape parameter values, e.g. %2F for '/')",
	"invalid DSN: interpolateParams can not be used with unsafe collations": "the collation cannot be used with interpolateParams, which the lock pool needs (use a utf8mb4 collation)",
}

// driverParams are the parameters the driver itself interprets: a message
// may name one of them, since the name then comes from this list.
var driverParams = map[string]bool{
	"allowAllFiles": true, "allowCleartextPasswords": true, "allowFallbackToPlaintext": true,
	"allowNativePasswords": true, "allowOldPasswords": true, "charset": true, "checkConnLiveness": true,
	"clientFoundRows": true, "collation": true, "columnsWithAlias": true, "compress": true,
	"connectionAttributes": true, "interpolateParams": true, "loc": true, "maxAllowedPacket": true,
	"multiStatements": true, "parseTime": true, "readTimeout": true, "rejectReadOnly": true,
	"serverPubKey": true, "strict": true, "timeTruncate": true, "timeout": true, "tls": true,
	"writeTimeout": true,
}

// invalidDSN is an ErrInvalidDSN error saying what is wrong, with the
// driver's error in the chain only if its text is one of the fixed ones.
func invalidDSN(what string, driverErr error) error {
	var cause error
	if driverErr != nil {
		if _, fixed := driverFixedDSNErrors[driverErr.Error()]; fixed {
			cause = driverErr
		}
	}
	return newOpenError([]error{ErrInvalidDSN, cause}, "pool: invalid DSN: %s", what)
}

// parseDSN parses dsn with the driver's parser. Its errors say what is
// wrong without quoting the DSN. It also refuses what the driver accepts
// but has evidently parsed otherwise than meant (a password with a '/' in
// a DSN without /dbname), since the fields it would name could then be
// pieces of the password.
func parseDSN(dsn string) (*mysql.Config, error) {
	if dsn == "" {
		return nil, invalidDSN("empty; expected "+dsnFormat, nil)
	}
	if isURL(dsn) {
		return nil, invalidDSN("a URL (scheme://…) is not accepted; expected "+dsnFormat, nil)
	}
	// The driver splits at the last '/': what follows is the database
	// name and the parameters.
	db, params := "", ""
	if slash := strings.LastIndexByte(dsn, '/'); slash >= 0 {
		db, params, _ = strings.Cut(dsn[slash+1:], "?")
	}
	if strings.ContainsAny(db, "@()") {
		return nil, invalidDSN("the database name holds '@', '(' or ')': is /dbname missing after the address? "+
			"(a '/' in the password needs it); expected "+dsnFormat, nil)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, invalidDSN(whatIsWrong(err, db, params), err)
	}
	if !isName(cfg.Net) {
		return nil, invalidDSN("the network before the address is not a name; expected "+dsnFormat, nil)
	}
	return cfg, nil
}

// whatIsWrong says, without quoting the DSN, why the driver refused it.
func whatIsWrong(err error, db, params string) string {
	if what, ok := driverFixedDSNErrors[err.Error()]; ok {
		return what
	}
	for p := range strings.SplitSeq(params, "&") {
		if _, perr := mysql.ParseDSN("/?" + p); perr != nil {
			if key, _, _ := strings.Cut(p, "="); driverParams[key] {
				return fmt.Sprintf("parameter %s has an invalid value", key)
			}
			return "a parameter value is not URL-escaped (a '%' must start %XX)"
		}
	}
	if _, perr := mysql.ParseDSN("/" + db); perr != nil {
		return "the database name is not URL-escaped (a '%' must start %XX)"
	}
	if strings.HasPrefix(err.Error(), "default addr for network") {
		return "write the address as tcp(host:port); expected " + dsnFormat
	}
	return "not in " + dsnFormat
}

// isURL reports whether dsn starts with a URL scheme (mysql://…).
func isURL(dsn string) bool {
	scheme, _, ok := strings.Cut(dsn, "://")
	return ok && scheme != "" && isName(scheme) && !strings.ContainsAny(scheme, "@:/(")
}

// isName reports whether s is a plain name: letters, digits, '_', '-',
// '.', '+'.
func isName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("_-.+", r)) {
			return false
		}
	}
	return true
}

// connectError is a failure to get a working session from the server,
// which Open explains (refused, unreachable, interrupted).
type connectError struct{ err error }

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// explainConnect turns a failure to connect into Open's message. parent is
// Open's ctx (to tell an interruption from the connect timeout).
func explainConnect(parent context.Context, cfg *mysql.Config, o options, err error) error {
	where := fmt.Sprintf("pool: %s %s", cfg.Net, cfg.Addr)
	as := "pool: " + describe(cfg)
	var me *mysql.MySQLError
	var op *net.OpError
	switch {
	case errors.As(err, &me):
		switch me.Number {
		case 1045, 1698: // ER_ACCESS_DENIED_ERROR, ER_ACCESS_DENIED_NO_PASSWORD_ERROR
			how := "access denied"
			if cfg.Passwd == "" {
				how += "; the DSN gives no password"
			}
			return newOpenError([]error{ErrRefused, me}, "%s: the server refused the login for user %q (%s)", where, cfg.User, how)
		case 1049: // ER_BAD_DB_ERROR
			return newOpenError([]error{ErrRefused, me}, "%s: unknown database %q", as, cfg.DBName)
		case 1044: // ER_DBACCESS_DENIED_ERROR
			return newOpenError([]error{ErrRefused, me}, "%s: no access to database %q (access denied)", as, cfg.DBName)
		}
		return newOpenError([]error{ErrRefused, me}, "%s: the server refused the connection: %v", as, me)
	case parent.Err() != nil:
		return newOpenError([]error{err, context.Cause(parent)}, "%s: gave up: %v", as, context.Cause(parent))
	case errors.Is(err, context.DeadlineExceeded):
		return newOpenError([]error{ErrUnreachable, err}, "%s: cannot reach the server: no answer within %v (WithConnectTimeout)", as, o.connectTimeout)
	case errors.As(err, new(net.UnknownNetworkError)):
		return newOpenError([]error{ErrInvalidDSN, err}, "pool: invalid DSN: unknown network %q (tcp, unix, or one registered with mysql.RegisterDialContext)", cfg.Net)
	case errors.As(err, &op) && op.Op == "dial":
		return newOpenError([]error{ErrUnreachable, err}, "%s: cannot reach the server: %v", as, op.Err)
	case errors.As(err, new(net.Error)), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, mysql.ErrInvalidConn):
		return newOpenError([]error{ErrUnreachable, err}, "%s: cannot reach the server: %v", as, err)
	}
	return newOpenError([]error{ErrRefused, err}, "%s: cannot connect: %v", as, err)
}
