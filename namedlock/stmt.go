package namedlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/namedlock/mysql/internal/lockconn"
)

// The statements of every acquisition and release (GET_LOCK, RELEASE_LOCK,
// the ownership check) answer one row of integers. They run directly on the
// driver's connection, inside [sql.Conn.Raw], when the driver allows it —
// go-sql-driver/mysql with interpolateParams=true, as pool.Open sets: one
// round trip, no server-side prepare — and through database/sql otherwise.
// The direct path skips what database/sql adds to each query: a Rows, the
// argument conversions, and, when ctx can be cancelled, a goroutine per
// query.
//
// A statement bounded by a deadline of the library's own (RELEASE_LOCK in
// Do, the ownership checks) is bounded, on a connection of pool.Open whose
// socket is known ([lockconn.Conn.Socket]), by a deadline on that socket,
// and the driver runs it on a ctx that cannot be cancelled: go-sql-driver
// hands every statement whose ctx can be cancelled to the connection's
// watcher goroutine, two goroutine wake-ups per statement, on the path of
// every Do. A deadline that passes makes the
// driver's read (or write) fail; the driver then marks the connection bad
// and the statement returns an error, as when a watched ctx ends. The
// deadline is set and cleared inside Raw, while the connection is ours.

// stmtBuf is the scratch space of one direct statement, pooled: the driver
// keeps neither its arguments nor the row's values after the statement.
type stmtBuf struct {
	args [4]driver.NamedValue
	vals [6]driver.Value
}

var stmtBufs sync.Pool // of *stmtBuf

// queryInts runs query with args on the pinned connection conn and stores
// its one row in dest, one element per column. A zero deadline leaves the
// statement bounded by ctx alone; otherwise it is bounded by deadline too,
// and ctx (if it can end) ends it early. ended reports that the statement
// failed because the deadline passed or ctx ended. Errors are the driver's,
// as database/sql returns them (sql.ErrNoRows when there is no row); a
// failed statement makes database/sql discard the connection when the
// driver says it is bad.
func queryInts(ctx context.Context, conn *sql.Conn, deadline time.Time, dest []sql.NullInt64, query string, args ...any) (ended bool, err error) {
	if !deadline.IsZero() {
		// As the driver does for a ctx that has ended: nothing is sent.
		if err := ctx.Err(); err != nil {
			return true, err
		}
		if !time.Now().Before(deadline) {
			return true, context.DeadlineExceeded
		}
	}
	direct, bySocket := false, false
	err = conn.Raw(func(dc any) error {
		var derr error
		direct, bySocket, derr = queryBounded(ctx, dc, deadline, dest, query, args)
		return derr
	})
	if !direct && err == nil {
		err = queryViaSQL(ctx, conn, deadline, dest, query, args)
	}
	if err == nil {
		return false, nil
	}
	return endedError(ctx, deadline, bySocket, err)
}

// queryBounded runs query directly on dc, the driver's connection inside
// [sql.Conn.Raw], bounded by deadline unless it is zero: on dc's socket when
// it is known (bySocket; ctx then ends the statement through an
// interrupter), on ctx otherwise. direct is false when the driver cannot
// run the statement directly, which then runs through database/sql.
func queryBounded(ctx context.Context, dc any, deadline time.Time, dest []sql.NullInt64, query string, args []any) (direct, bySocket bool, err error) {
	q, ok := dc.(driver.QueryerContext)
	if !ok || len(args) > len(stmtBuf{}.args) || len(dest) > len(stmtBuf{}.vals) {
		return false, false, nil
	}
	qctx := ctx
	if !deadline.IsZero() {
		var nc net.Conn
		if lc, ok := dc.(*lockconn.Conn); ok {
			nc = lc.Socket()
		}
		if nc != nil && nc.SetDeadline(deadline) == nil {
			bySocket = true
			defer nc.SetDeadline(time.Time{})
			if ctx.Done() != nil {
				it := &interrupter{nc: nc}
				it.stop = context.AfterFunc(ctx, it.fire)
				defer it.disarm()
			}
			qctx = context.Background()
		} else {
			var cancel context.CancelFunc
			qctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
	}
	direct, err = queryDirect(qctx, q, dest, query, args)
	return direct, bySocket, err
}

// endedError classifies err, the error of a failed statement: ended reports
// that ctx ended or the deadline passed. A deadline on the socket is
// reported by the driver as a broken connection (mysql.ErrInvalidConn); so
// when bySocket, the error says why, as the driver does for a ctx.
func endedError(ctx context.Context, deadline time.Time, bySocket bool, err error) (ended bool, _ error) {
	if cerr := ctx.Err(); cerr != nil {
		if bySocket {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return true, err
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		if bySocket {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		return true, err
	}
	return false, err
}

// queryDirect runs query on the driver connection q. ran is false when the
// driver would prepare it (driver.ErrSkip): database/sql must do that.
func queryDirect(ctx context.Context, q driver.QueryerContext, dest []sql.NullInt64, query string, args []any) (ran bool, err error) {
	b, _ := stmtBufs.Get().(*stmtBuf)
	if b == nil {
		b = new(stmtBuf)
	}
	defer func() {
		*b = stmtBuf{}
		stmtBufs.Put(b)
	}()
	for i, a := range args {
		b.args[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	rows, err := q.QueryContext(ctx, query, b.args[:len(args)])
	if errors.Is(err, driver.ErrSkip) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	err = scanInts(rows, b.vals[:len(dest)], dest)
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return true, err
}

// queryViaSQL is queryInts through database/sql, for drivers that cannot
// run the statement directly.
func queryViaSQL(ctx context.Context, conn *sql.Conn, deadline time.Time, dest []sql.NullInt64, query string, args []any) error {
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	// Scanned through a copy: pointers into dest would move every caller's
	// dest to the heap, also on the direct path.
	row := make([]sql.NullInt64, len(dest))
	ptrs := make([]any, len(dest))
	for i := range row {
		ptrs[i] = &row[i]
	}
	err := conn.QueryRowContext(ctx, query, args...).Scan(ptrs...)
	copy(dest, row)
	return err
}

// interrupter ends a statement bounded by a deadline on nc when a ctx ends:
// fire moves the deadline to the past, unless disarm ran first.
type interrupter struct {
	nc   net.Conn
	stop func() bool // the context.AfterFunc registration

	mu       sync.Mutex
	disarmed bool
}

// longAgo is a deadline in the past: I/O on a socket with it fails at once.
var longAgo = time.Unix(1, 0)

func (it *interrupter) fire() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.disarmed {
		_ = it.nc.SetDeadline(longAgo)
	}
}

// disarm makes sure fire sets no deadline after it returns (the caller then
// clears the deadline): a fire already started is waited for.
func (it *interrupter) disarm() {
	if it.stop() {
		return // fire will never run
	}
	it.mu.Lock()
	it.disarmed = true
	it.mu.Unlock()
}

// scanInts reads the first row of rows into dest, through vals.
func scanInts(rows driver.Rows, vals []driver.Value, dest []sql.NullInt64) error {
	if n := len(rows.Columns()); n != len(dest) {
		return fmt.Errorf("namedlock: the statement answered %d columns, want %d", n, len(dest))
	}
	if err := rows.Next(vals); err != nil {
		if errors.Is(err, io.EOF) {
			return sql.ErrNoRows
		}
		return err
	}
	for i, v := range vals {
		switch v := v.(type) {
		case int64:
			dest[i] = sql.NullInt64{Int64: v, Valid: true}
		case nil:
			dest[i] = sql.NullInt64{}
		default:
			var n sql.NullInt64 // not dest[i]: that would move dest to the heap
			if err := n.Scan(v); err != nil {
				return fmt.Errorf("namedlock: column %d of the answer: %w", i+1, err)
			}
			dest[i] = n
		}
	}
	return nil
}
