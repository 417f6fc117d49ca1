// Package sqlident checks and quotes the table names that the library's
// packages take from their callers (schedlock's lock table, namedlock's
// fence table), so that a name is accepted, and written into statements,
// by one rule.
package sqlident

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched by the errors of [Quote].
var ErrInvalid = errors.New("invalid table name")

// Quote checks that name is "table" or "database.table", each part 1 to 64
// characters of A-Z a-z 0-9 and _, and returns it quoted with backticks
// ("`database`.`table`"). Such a name needs no escaping and means the same
// table on every supported server.
func Quote(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w: %q: at most one dot (database.table)", ErrInvalid, name)
	}
	for i, p := range parts {
		if !valid(p) {
			return "", fmt.Errorf("%w: %q: each part must be 1 to 64 characters of A-Z a-z 0-9 _", ErrInvalid, name)
		}
		parts[i] = "`" + p + "`"
	}
	return strings.Join(parts, "."), nil
}

func valid(part string) bool {
	if len(part) == 0 || len(part) > 64 {
		return false
	}
	for _, c := range []byte(part) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
