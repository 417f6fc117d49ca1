package pool

import (
	"errors"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// redact returns err with every occurrence of password replaced. When the
// message contains the password, the chain is cut too, so that no wrapped
// error can print it; sentinels of this package are kept.
func redact(err error, password string) error {
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	msg := strings.ReplaceAll(err.Error(), password, "xxxxx")
	if errors.Is(err, ErrUnsupportedServer) {
		return &redactedError{msg: msg, sentinel: ErrUnsupportedServer}
	}
	return &redactedError{msg: msg}
}

type redactedError struct {
	msg      string
	sentinel error
}

// Error returns the redacted message.
func (e *redactedError) Error() string { return e.msg }

// Unwrap returns the package sentinel the original error matched, if any.
func (e *redactedError) Unwrap() error { return e.sentinel }

// passwordIn extracts the password from a DSN the driver could not parse,
// best effort: the text between the first ':' and the last '@' before the
// first '/'.
func passwordIn(dsn string) string {
	if cfg, err := mysql.ParseDSN(dsn); err == nil {
		return cfg.Passwd
	}
	slash := strings.Index(dsn, "/")
	if slash < 0 {
		slash = len(dsn)
	}
	at := strings.LastIndex(dsn[:slash], "@")
	if at < 0 {
		return ""
	}
	colon := strings.Index(dsn[:at], ":")
	if colon < 0 {
		return ""
	}
	return dsn[colon+1 : at]
}
