// Package dsn is the one parser of go-sql-driver/mysql DSNs for every place
// of the module that shows an error derived from one (pool.Open, the
// commands), and the one redaction of a password from a message.
//
// [Parse] refuses, besides what the driver refuses, what the driver accepts
// but has evidently parsed otherwise than meant: a password with a '/' in a
// DSN without /dbname, which the driver splits at its last '/', so that the
// fields it would name (network, address, user) could be pieces of the
// password. Its errors say what is wrong without quoting the DSN.
package dsn

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Format is what a DSN looks like, for messages.
const Format = "the go-sql-driver format user:password@tcp(host:port)/dbname"

// Error is a DSN that cannot be used. Its text, "invalid DSN: " and What,
// never quotes the DSN.
type Error struct {
	What   string // what is wrong, from fixed text and the names of driver parameters
	Driver error  // the driver's error, only when its text is one of the fixed ones (no DSN text); else nil
}

// Error returns "invalid DSN: " and what is wrong.
func (e *Error) Error() string { return "invalid DSN: " + e.What }

// Unwrap returns the driver's error, when it is kept.
func (e *Error) Unwrap() error { return e.Driver }

// Texts of the driver's DSN errors that hold no DSN text: such an error is
// kept in the chain. Any other parse error is replaced, not wrapped.
var driverFixedDSNErrors = map[string]string{
	"invalid DSN: missing the slash separating the database name":           "no '/' before the database name (write /dbname after the address, or a bare / for none); expected " + Format,
	"invalid DSN: network address not terminated (missing closing brace)":   "the address has no closing ')'; expected " + Format,
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

// invalid returns the Error saying what, keeping driverErr only if its text
// is one of the fixed ones.
func invalid(what string, driverErr error) *Error {
	e := &Error{What: what}
	if driverErr != nil {
		if _, fixed := driverFixedDSNErrors[driverErr.Error()]; fixed {
			e.Driver = driverErr
		}
	}
	return e
}

// Parse parses dsn with the driver's parser. Its error, an *Error, says
// what is wrong without quoting the DSN.
func Parse(dsn string) (*mysql.Config, error) {
	if dsn == "" {
		return nil, invalid("empty; expected "+Format, nil)
	}
	if isURL(dsn) {
		return nil, invalid("a URL (scheme://…) is not accepted; expected "+Format, nil)
	}
	// The driver splits at the last '/': what follows is the database
	// name and the parameters.
	db, params := "", ""
	if slash := strings.LastIndexByte(dsn, '/'); slash >= 0 {
		db, params, _ = strings.Cut(dsn[slash+1:], "?")
	}
	if strings.ContainsAny(db, "@()") {
		return nil, invalid("the database name holds '@', '(' or ')': is /dbname missing after the address? "+
			"(a '/' in the password needs it); expected "+Format, nil)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, invalid(whatIsWrong(err, db, params), err)
	}
	if !isName(cfg.Net) {
		return nil, invalid("the network before the address is not a name; expected "+Format, nil)
	}
	return cfg, nil
}

// Refused is the Error of a Config that the driver refused to make a
// connector of (mysql.NewConnector: an unsafe collation with
// interpolateParams).
func Refused(driverErr error) *Error {
	return invalid(whatIsWrong(driverErr, "", ""), driverErr)
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
	if strings.HasPrefix(err.Error(), "invalid value / unknown config name") {
		return "the TLS config name (tls parameter, Config.TLSConfig) is unknown: it must be true, false, skip-verify, preferred, or a name registered with mysql.RegisterTLSConfig"
	}
	if strings.HasPrefix(err.Error(), "default addr for network") {
		return "write the address as tcp(host:port); expected " + Format
	}
	return "not in " + Format
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

// Redact replaces, in msg, every occurrence of password, and of its
// URL-escaped forms, with "xxxxx": for the text of an error that the module
// did not compose (the driver's, the server's), which could quote it. An
// empty password changes nothing.
func Redact(msg, password string) string {
	if password == "" {
		return msg
	}
	for _, p := range []string{password, url.QueryEscape(password), url.PathEscape(password)} {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return msg
}
