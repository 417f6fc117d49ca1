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
)

// The statements of every acquisition and release (GET_LOCK, RELEASE_LOCK,
// the ownership check) answer one row of integers. They run directly on the
// driver's connection ([sql.Conn.Raw]) when the driver allows it —
// go-sql-driver/mysql with interpolateParams=true, as pool.Open sets: one
// round trip, no server-side prepare — and through database/sql otherwise.
// The direct path skips what database/sql adds to each query: a Rows, the
// argument conversions, and, when ctx can be cancelled (the bounded
// RELEASE_LOCK), a goroutine per query. Measured here, that goroutine alone
// cost about 10 % of an uncontended Do.

// stmtBuf is the scratch space of one direct statement, pooled: the driver
// keeps neither its arguments nor the row's values after the statement.
type stmtBuf struct {
	args [2]driver.NamedValue
	vals [3]driver.Value
}

var stmtBufs = sync.Pool{New: func() any { return new(stmtBuf) }}

// queryInts runs query with args on the pinned connection conn and stores
// its one row in dest, one element per column. Errors are the driver's, as
// database/sql returns them (sql.ErrNoRows when there is no row); a
// driver.ErrBadConn also makes database/sql discard the connection.
func queryInts(ctx context.Context, conn *sql.Conn, dest []sql.NullInt64, query string, args ...any) error {
	direct := false
	err := conn.Raw(func(dc any) error {
		q, ok := dc.(driver.QueryerContext)
		if !ok || len(args) > len(stmtBuf{}.args) || len(dest) > len(stmtBuf{}.vals) {
			return nil
		}
		b := stmtBufs.Get().(*stmtBuf)
		defer func() {
			*b = stmtBuf{}
			stmtBufs.Put(b)
		}()
		for i, a := range args {
			b.args[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
		}
		rows, err := q.QueryContext(ctx, query, b.args[:len(args)])
		if errors.Is(err, driver.ErrSkip) {
			return nil // the driver would prepare it: let database/sql do that
		}
		direct = true
		if err != nil {
			return err
		}
		err = scanInts(rows, b.vals[:len(dest)], dest)
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if direct || err != nil {
		return err
	}
	// Scanned through a copy: pointers into dest would move every caller's
	// dest to the heap, also on the direct path.
	row := make([]sql.NullInt64, len(dest))
	ptrs := make([]any, len(dest))
	for i := range row {
		ptrs[i] = &row[i]
	}
	err = conn.QueryRowContext(ctx, query, args...).Scan(ptrs...)
	copy(dest, row)
	return err
}

// queryIntsUntil is queryInts bounded by deadline, for the statements whose
// only bound is a timeout of the library's own: RELEASE_LOCK in Do, DoTx,
// DoMulti and Close, the keep-alive check and the ownership proof at a
// handoff. ctx ends the statement early if it can end (Locker.bg, for the
// checks), and is otherwise context.Background(). ended reports that the
// statement failed because the deadline passed or ctx ended.
//
// When nc, the connection's socket ([pool.NetConn]), is known, the bound is
// a deadline on nc and the driver runs the statement on a ctx that cannot be
// cancelled: go-sql-driver/mysql hands every statement whose ctx can be
// cancelled to the connection's watcher goroutine, two goroutine wake-ups
// per statement, about a fifth of an uncontended Do on a small machine. A
// deadline that passes makes the driver's read (or write) fail; the driver
// then closes the connection and the statement returns an error, as when a
// watched ctx ends. The deadline is cleared before returning: nc carries no
// other (pool.Open sets readTimeout=0 and NetConn is nil when the DSN sets
// writeTimeout). A ctx that can end moves the deadline to the past when it
// does (context.AfterFunc: no goroutine unless it fires). Without nc, the
// bound is a context.WithDeadline of ctx, as before.
func queryIntsUntil(ctx context.Context, deadline time.Time, nc net.Conn, conn *sql.Conn, dest []sql.NullInt64, query string, args ...any) (ended bool, err error) {
	// As the driver does for a ctx that has ended: nothing is sent.
	if err := ctx.Err(); err != nil {
		return true, err
	}
	if !time.Now().Before(deadline) {
		return true, context.DeadlineExceeded
	}
	if nc == nil || nc.SetDeadline(deadline) != nil {
		tctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		err = queryInts(tctx, conn, dest, query, args...)
		return err != nil && tctx.Err() != nil, err
	}
	var it *interrupter
	if ctx.Done() != nil {
		it = &interrupter{nc: nc}
		it.stop = context.AfterFunc(ctx, it.fire)
	}
	err = queryInts(context.Background(), conn, dest, query, args...)
	if it != nil {
		it.disarm()
	}
	_ = nc.SetDeadline(time.Time{})
	if err == nil {
		return false, nil
	}
	// The driver reports a deadline that passed as a broken connection
	// (mysql.ErrInvalidConn); say why, as the driver does for a ctx.
	if cerr := ctx.Err(); cerr != nil {
		return true, fmt.Errorf("%w: %w", cerr, err)
	}
	if !time.Now().Before(deadline) {
		return true, fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return false, err
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

// connIdentity returns conn's driver connection, to be used as a map key
// only (its methods must not be called outside [sql.Conn.Raw]).
func connIdentity(conn *sql.Conn) any {
	var dc any
	_ = conn.Raw(func(c any) error { dc = c; return nil })
	return dc
}

// knownConns remembers, for the lock connections a Locker has used, the
// session's CONNECTION_ID(), once the session is known to have the lease:
// later acquisitions on the connection then send GET_LOCK alone. It also
// keeps the connection's socket ([pool.NetConn], nil if unknown), looked up
// once. A driver connection is one server session for its whole life, and
// nothing resets its session variables, so an entry never goes stale;
// entries of connections closed by database/sql are dropped when the map
// reaches its bound.
type knownConns struct {
	mu  sync.Mutex
	ids map[any]knownConn // by driver connection
}

type knownConn struct {
	id int64
	nc net.Conn
}

// lookup returns what is known of driver connection dc.
func (c *knownConns) lookup(dc any) (knownConn, bool) {
	if dc == nil {
		return knownConn{}, false
	}
	c.mu.Lock()
	k, ok := c.ids[dc]
	c.mu.Unlock()
	return k, ok
}

// remember records dc's session id and socket. When the map holds more
// entries than twice the pool's limit (and at least 64), it starts over: an
// entry for a connection that is still open is simply learned again.
func (c *knownConns) remember(dc any, k knownConn, db *sql.DB) {
	if dc == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil || len(c.ids) >= max(64, 2*db.Stats().MaxOpenConnections) {
		c.ids = make(map[any]knownConn)
	}
	c.ids[dc] = k
}
