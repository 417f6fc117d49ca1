package testdb

import (
	"database/sql"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// MaxNameLen is the longest name UniqueName returns: within MySQL's 64
// characters for a lock name.
const MaxNameLen = 60

var nameCounter atomic.Uint64

// UniqueName returns a lock or job name unique to this call, this test binary
// and this process: "t-<test name>-<counter>-<pid>", lowercased, with every
// run of characters other than [a-z0-9] turned into one "-", and the test
// name shortened so that the whole is at most MaxNameLen characters.
func UniqueName(tb testing.TB) string {
	suffix := "-" + strconv.FormatUint(nameCounter.Add(1), 10) + "-" + strconv.Itoa(os.Getpid())
	base := sanitize(tb.Name())
	if room := MaxNameLen - len("t-") - len(suffix); len(base) > room {
		base = strings.TrimRight(base[:max(room, 0)], "-")
	}
	if base == "" {
		return "t" + suffix
	}
	return "t-" + base + suffix
}

// sanitize lowercases s and replaces each run of characters other than
// [a-z0-9] by one "-", trimming "-" at both ends.
func sanitize(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	return b.String()
}

// OpenDB opens a plain *sql.DB on dsn with interpolateParams=true (one round
// trip per query with arguments, as the library's pools use), closed in
// tb.Cleanup. It does not connect: the first query does.
func OpenDB(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatalf("testdb: parse DSN %q: %v", dsn, err)
	}
	cfg.InterpolateParams = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatalf("testdb: %v", err)
	}
	db := sql.OpenDB(connector)
	tb.Cleanup(func() { _ = db.Close() })
	return db
}
