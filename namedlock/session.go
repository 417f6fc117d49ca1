package namedlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/namedlock/mysql/pool"
)

// Statements run on a pinned lock connection. Parameters are interpolated
// by the driver (pool.Open sets interpolateParams=true): one round trip each.
const (
	// sqlTryLock takes the lock without waiting and, in the same round trip,
	// learns the session's id (needed to end a cancelled wait) and its
	// wait_timeout (the lease): on the first use of a connection only, then
	// sqlTryLockKnown (see knownConns).
	sqlTryLock      = "SELECT GET_LOCK(?, 0), CONNECTION_ID(), @@session.wait_timeout"
	sqlTryLockKnown = "SELECT GET_LOCK(?, 0)"
	sqlWaitLock     = "SELECT GET_LOCK(?, ?)"
	sqlRelease      = "SELECT RELEASE_LOCK(?)"
	sqlOwnership    = "SELECT IS_USED_LOCK(?) = CONNECTION_ID()"
	sqlVersion      = "SELECT VERSION(), @@version_comment"
)

// longestWait is the timeout sent to GET_LOCK when ctx has no deadline: one
// year, the largest MySQL accepts. The server answers 0 after that and the
// wait is simply renewed.
const longestWait = 365 * 24 * 3600

// waitGrace is how long past ctx's deadline the driver keeps waiting for the
// server's own timeout answer, so a wait that times out normally keeps its
// connection.
const waitGrace = 500 * time.Millisecond

// server flavors, detected once per Locker.
const (
	flavorUnknown  int32 = iota
	flavorMariaDB        // fractional GET_LOCK timeouts
	flavorWhole          // MySQL and others: whole seconds
	flavorEmbedded       // go-mysql-server: whole seconds, waits deaf to cancellation and KILL
)

// session is a server-side lock held on a pinned connection. Its statements
// run one at a time under mu; the other fields are guarded by Locker.mu.
type session struct {
	name string
	arg  any // name as a statement argument, converted once
	conn *sql.Conn
	nc   net.Conn // conn's socket (pool.NetConn), nil if unknown: see queryIntsUntil
	id   int64    // CONNECTION_ID() of conn

	mu      sync.Mutex
	gone    bool  // conn released or discarded (under mu)
	lostErr error // why a check or release discarded conn (under mu)

	pmu       sync.Mutex    // never held across a statement
	provedAt  time.Time     // when the last statement that showed ownership was sent (under pmu)
	proofDone chan struct{} // closed when prove's check in flight ends (under pmu)

	holder     *Lock
	acquiredAt time.Time
	handoffs   int
	proving    int // holders that let go of it and wait in prove
	nextCheck  time.Time
	checking   bool
	lost       bool
}

// discard closes conn so that database/sql never reuses it: the driver is
// told the connection is bad. The server ends the session, and with it every
// lock it holds, when it sees the socket close.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// serverAcquire takes the named lock on a connection of its own. ctx is the
// caller's ctx, also ended by Close, for everything that may wait (for a pool
// connection, in GET_LOCK with a timeout). The first GET_LOCK never waits at
// the server and runs on callerCtx, the caller's own: the driver watches a
// cancellable ctx with a goroutine handshake per statement, which an
// uncontended acquisition with a ctx that cannot be cancelled need not pay.
func (l *Locker) serverAcquire(callerCtx, ctx context.Context, key, name string, try bool) (*session, error) {
	conn, err := l.db.Conn(ctx)
	if err != nil {
		if ended(ctx) {
			return nil, notAcquired(ctx, key, nil)
		}
		return nil, fmt.Errorf("namedlock: lock connection for %q: %w", key, err)
	}
	dc := connIdentity(conn)
	kc, known := l.conns.lookup(dc)
	var row [3]sql.NullInt64
	arg := any(name)
	if known {
		err = queryInts(callerCtx, conn, row[:1], sqlTryLockKnown, arg)
	} else {
		err = queryInts(callerCtx, conn, row[:], sqlTryLock, arg)
		kc = knownConn{id: row[1].Int64, nc: pool.NetConn(dc)}
	}
	id := kc.id
	if err != nil {
		discard(conn)
		return nil, l.getLockError(ctx, key, err)
	}
	got, waitTimeout := row[0], row[2].Int64
	if !got.Valid {
		_ = conn.Close()
		return nil, fmt.Errorf("namedlock: GET_LOCK(%q) answered NULL", name)
	}
	if got.Int64 != 1 {
		if try {
			_ = conn.Close()
			return nil, notAcquired(ctx, key, nil)
		}
		if err := l.wait(ctx, conn, key, name, id); err != nil {
			return nil, err
		}
	}
	s := &session{name: name, arg: arg, conn: conn, nc: kc.nc, id: id}
	if !known {
		// Once per connection: later acquisitions on it skip this.
		if waitTimeout != l.lease {
			if _, err := conn.ExecContext(ctx, "SET SESSION wait_timeout = "+strconv.FormatInt(l.lease, 10)); err != nil {
				discard(conn)
				return nil, fmt.Errorf("namedlock: set the lease on the lock connection for %q: %w", key, err)
			}
		}
		l.conns.remember(dc, kc, l.db)
	}
	return s, nil
}

// wait blocks in GET_LOCK on conn until the lock is granted (nil), the
// server's timeout for ctx's deadline passes, or ctx ends. On failure conn
// is closed; when ctx ended mid-wait, the session is killed as well.
func (l *Locker) wait(ctx context.Context, conn *sql.Conn, key, name string, id int64) error {
	flavor, err := l.detectFlavor(ctx, conn)
	if err != nil {
		discard(conn)
		return l.getLockError(ctx, key, err)
	}
	for {
		timeout, hard, expired := waitTimeout(ctx, flavor)
		if expired {
			_ = conn.Close()
			// The clock is past the deadline, but ctx's timer may not have
			// fired yet; wait for it (it is due) so that the error matches
			// ctx.Err() (context.DeadlineExceeded), as documented.
			<-ctx.Done()
			return notAcquired(ctx, key, nil)
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if !hard {
			wctx, cancel = graceContext(ctx)
		}
		var answer [1]sql.NullInt64
		err := queryInts(wctx, conn, answer[:], sqlWaitLock, name, timeout)
		cancel()
		got := answer[0]
		switch {
		case err != nil && (ctx.Err() != nil || wctx.Err() != nil):
			// The driver closed the socket; the server session may still
			// be waiting, or may just have been granted the lock. End it.
			l.stats.cancelledWaits.Add(1)
			l.killer.kill(id)
			discard(conn)
			return notAcquired(ctx, key, nil)
		case err != nil:
			discard(conn)
			return l.getLockError(ctx, key, err)
		case !got.Valid:
			// MariaDB answers NULL to a wait ended by KILL QUERY.
			discard(conn)
			return fmt.Errorf("%w: %q: GET_LOCK answered NULL (wait killed?)", ErrNotAcquired, key)
		case got.Int64 == 1:
			return nil
		}
		// 0: the server's timeout passed; loop to renew or to report it.
	}
}

// ended reports whether ctx has ended, counting a deadline that the clock
// has passed before ctx's timer fired: a dial fails with "i/o timeout" at
// the deadline itself, while ctx.Err() may still be nil for a moment. It
// then waits for the (due) ctx.Done, so that ctx.Err() is set.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		<-ctx.Done()
		return true
	}
	return false
}

// getLockError classifies a failed GET_LOCK.
func (l *Locker) getLockError(ctx context.Context, key string, err error) error {
	if ended(ctx) {
		return notAcquired(ctx, key, err)
	}
	if isDeadlock(err) {
		return errors.Join(fmt.Errorf("%w: %w: %q", ErrNotAcquired, ErrDeadlock, key), err)
	}
	return fmt.Errorf("namedlock: GET_LOCK for %q: %w", key, err)
}

// detectFlavor learns, once per Locker, whether the server takes fractional
// GET_LOCK timeouts (MariaDB) or whole seconds (MySQL, the embedded server).
func (l *Locker) detectFlavor(ctx context.Context, conn *sql.Conn) (int32, error) {
	if f := l.flavor.Load(); f != flavorUnknown {
		return f, nil
	}
	var version, comment string
	if err := conn.QueryRowContext(ctx, sqlVersion).Scan(&version, &comment); err != nil {
		return flavorUnknown, err
	}
	f := flavorWhole
	switch {
	case strings.Contains(strings.ToLower(version), "mariadb"):
		f = flavorMariaDB
	case comment == "Dolt":
		f = flavorEmbedded
	}
	l.flavor.Store(f)
	return f, nil
}

// waitTimeout computes the GET_LOCK timeout for ctx: the time left, as the
// server can express it. hard means the server's timeout would pass after
// ctx's deadline, so ctx itself must cut the wait (and the session be
// killed); expired means the deadline has passed.
func waitTimeout(ctx context.Context, flavor int32) (timeout any, hard, expired bool) {
	// The embedded server's waits ignore cancellation and KILL, so a
	// cancelled wait lingers until its own timeout: keep that at 1 s there.
	longest := int64(longestWait)
	if flavor == flavorEmbedded {
		longest = 1
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return longest, false, false
	}
	left := time.Until(deadline)
	if left <= 0 {
		return nil, false, true
	}
	if flavor == flavorMariaDB {
		secs := math.Ceil(left.Seconds()*1000) / 1000
		return secs, false, false
	}
	if left >= time.Second {
		return min(int64(left/time.Second), longest), false, false
	}
	return int64(1), true, false
}

// graceContext returns a context that ends when parent is cancelled, but
// only waitGrace after parent's deadline passes, so the server's own timeout
// answer can arrive first.
func graceContext(parent context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := parent.Deadline()
	if !ok {
		return parent, func() {}
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(parent), deadline.Add(waitGrace))
	stop := context.AfterFunc(parent, func() {
		if !errors.Is(parent.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return ctx, func() { stop(); cancel() }
}

// release runs RELEASE_LOCK on the pinned connection. Only an answer of 1
// returns the connection to the pool; anything else discards it, so a
// connection is never pooled while it may still hold the lock.
//
// A timeout of 0 runs it within ctx alone (Lock.Release's own ctx, as the
// caller gave it). Otherwise it is bounded by timeout from now, and ctx
// should be one that cannot end (context.Background()): the statement is
// then bounded by a deadline on the socket when it is known (see
// queryIntsUntil), which spares the driver's per-statement goroutine
// handshake on every Do.
func (s *session) release(ctx context.Context, timeout time.Duration) error {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout) // counting any wait for s.mu
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		// Only a failed ownership check discards conn before its release.
		return s.lostErr
	}
	s.gone = true
	sent := time.Now()
	var row [1]sql.NullInt64
	var err error
	var ended bool // the statement failed because its bound passed or ctx ended
	if timeout > 0 {
		ended, err = queryIntsUntil(ctx, deadline, s.nc, s.conn, row[:], sqlRelease, s.arg)
	} else {
		err = queryInts(ctx, s.conn, row[:], sqlRelease, s.arg)
		ended = err != nil && ctx.Err() != nil
	}
	got := row[0]
	if err == nil && got.Valid && got.Int64 == 1 {
		s.proved(sent) // held until now: earlier holders (handoffs) are covered
		_ = s.conn.Close()
		return nil
	}
	discard(s.conn)
	switch {
	case err != nil && !ended:
		// The session that held the lock is gone (KILL, restart, network):
		// the lock went with it, possibly while it was still being used.
		s.lostErr = fmt.Errorf("%w: %q: RELEASE_LOCK failed, the session that held it is gone: %w", ErrLockLost, s.name, err)
		return s.lostErr
	case err != nil:
		s.lostErr = lostError(s.name, "RELEASE_LOCK not confirmed: "+err.Error())
		return fmt.Errorf("namedlock: RELEASE_LOCK(%q) not confirmed, its connection was discarded so the server frees the lock when the session ends: %w", s.name, err)
	}
	answer := "NULL"
	if got.Valid {
		answer = strconv.FormatInt(got.Int64, 10)
	}
	s.lostErr = lostError(s.name, "RELEASE_LOCK answered "+answer+": the session no longer held it")
	return s.lostErr
}
