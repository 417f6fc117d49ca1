package pool_test

import (
	"context"
	"database/sql"

	"testing"
	"time"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/pool"
)

// TestOpenSessionSettingsWhateverTheDSN: a DSN that sets wait_timeout or
// the statement time limit under another spelling the server accepts (case,
// @@, @@session., @@local., SESSION, back-quotes), or inside the value of
// another parameter (the driver sends the DSN's parameters as one SET,
// verbatim), does not change them: every connection of the pool, each of
// the eight open at once, has the lease as its wait_timeout and no
// statement time limit. The driver sends the DSN's assignments in map
// order, so a pool that let them through would show the DSN's value on
// about half of its connections.
func TestOpenSessionSettingsWhateverTheDSN(t *testing.T) {
	t.Parallel()
	srv := testdb.RequireReal(t)
	limitVar := srv.Flavor.StatementTimeVar()
	if limitVar == "" {
		t.Skipf("%s has no statement time limit", srv.Name)
	}
	limit := "1" // max_statement_time: seconds
	if limitVar == "max_execution_time" {
		limit = "1000" // milliseconds
	}
	const lease, conns = 30 * time.Second, 8
	for _, tc := range []struct {
		name   string
		params map[string]string
	}{
		{"upper case", map[string]string{"WAIT_TIMEOUT": "28800", upper(limitVar): limit}},
		{"@@", map[string]string{"@@wait_timeout": "28801", "@@" + limitVar: limit}},
		{"@@session.", map[string]string{"@@session.wait_timeout": "28802", "@@SESSION." + upper(limitVar): limit}},
		{"@@local.", map[string]string{"@@local.Wait_Timeout": "28803", "@@local." + limitVar: limit}},
		{"SESSION", map[string]string{"SESSION wait_timeout": "28804", "session " + limitVar: limit}},
		{"back-quoted", map[string]string{"`wait_timeout`": "28805", "@@session.`" + limitVar + "`": limit}},
		{"in another value", map[string]string{"time_zone": "'+00:00', wait_timeout = 28806, " + limitVar + " = " + limit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := open(t, withParams(t, srv.DSN, tc.params, nil), pool.WithLease(lease), pool.WithMaxConns(conns))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var pinned []*sql.Conn
			defer func() {
				for _, c := range pinned {
					_ = c.Close()
				}
			}()
			bad := 0
			for i := range conns {
				c, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				pinned = append(pinned, c)
				var wait int
				var lim float64
				if err := c.QueryRowContext(ctx, "SELECT @@session.wait_timeout, @@session."+limitVar).Scan(&wait, &lim); err != nil {
					t.Fatal(err)
				}
				if wait != int(lease/time.Second) || lim != 0 {
					bad++
					t.Errorf("%s: connection %d: wait_timeout = %d, %s = %v; want %d and 0", srv.Name, i+1, wait, limitVar, lim, int(lease/time.Second))
				}
			}
			t.Logf("%s: DSN parameters %v: %d of %d connections with the lease's wait_timeout and no limit", srv.Name, tc.params, conns-bad, conns)
		})
	}
}

// upper is s in upper case (ASCII).
func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
