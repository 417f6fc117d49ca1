package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/dsn"
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
	// ErrInvalidDSN: the DSN (or OpenConfig's *mysql.Config) is not one
	// the driver can use (not its format, a URL, a parameter with an
	// invalid value, a nil *mysql.Config). Nothing was dialed.
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

// invalidDSN is the ErrInvalidDSN error of e, the shared parser's: its
// text says what is wrong, with the driver's error in the chain only if e
// kept it (its text is then one of the fixed ones).
func invalidDSN(e *dsn.Error) error {
	return newOpenError([]error{ErrInvalidDSN, e.Driver}, "pool: invalid DSN: %s", e.What)
}

// refusedDSN is the ErrInvalidDSN error of a Config that the driver
// refused to make a connector of (an unsafe collation with
// interpolateParams).
func refusedDSN(driverErr error) error { return invalidDSN(dsn.Refused(driverErr)) }

// parseDSN parses s with the module's one DSN parser (internal/dsn), whose
// errors say what is wrong without quoting the DSN. It also refuses what
// the driver accepts but has evidently parsed otherwise than meant (a
// password with a '/' in a DSN without /dbname), since the fields it would
// name could then be pieces of the password.
func parseDSN(s string) (*mysql.Config, error) {
	cfg, err := dsn.Parse(s)
	if err != nil {
		return nil, invalidDSN(err.(*dsn.Error))
	}
	return cfg, nil
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
			sent := strings.Contains(me.Message, "using password: YES")
			switch {
			case cfg.Passwd == "" && sent:
				// Only a BeforeConnect callback sets a password on a
				// Config with none.
				how += "; the password set by the BeforeConnect callback (an auth token?) was refused: wrong or expired"
			case cfg.Passwd == "" && o.fromConfig:
				how += "; the configuration gives no password"
			case cfg.Passwd == "":
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
		return o.reword(newOpenError([]error{ErrInvalidDSN, err}, "pool: invalid DSN: unknown network %q (tcp, unix, or one registered with mysql.RegisterDialContext)", cfg.Net))
	case errors.As(err, &op) && op.Op == "dial":
		return newOpenError([]error{ErrUnreachable, err}, "%s: cannot reach the server: %v", as, op.Err)
	case errors.As(err, new(net.Error)), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, mysql.ErrInvalidConn):
		return newOpenError([]error{ErrUnreachable, err}, "%s: cannot reach the server: %v", as, err)
	}
	return newOpenError([]error{ErrRefused, err}, "%s: cannot connect: %v", as, err)
}
