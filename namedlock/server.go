package namedlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/internal/lockconn"
	"github.com/namedlock/mysql/pool"
)

// backend takes named locks at the server: the Locker's only way to it.
// server (below) is the real one; the tests of the queue and handoff logic
// use a fake.
type backend interface {
	// take takes the lock name (the server name of key) on a connection of
	// its own and returns that connection pinned. ctx is the caller's ctx
	// also ended by Close, for every statement; callerCtx is the caller's
	// own, which says whether the caller's ctx is what ended one (and the
	// probe of a try on TiDB). try: do not wait for a holder.
	take(callerCtx, ctx context.Context, key, name string, try bool) (link, error)
	// used reports whether any session holds the lock name (the server
	// name of key), on a connection borrowed for that one question.
	used(ctx context.Context, key, name string) (bool, error)
	// close stops what the backend runs and waits for it.
	close()
}

// Statements run on a pinned lock connection. Parameters are interpolated
// by the driver (pool.Open sets interpolateParams=true): one round trip each.
const (
	// sqlTryLock takes the lock without waiting and, in the same round trip,
	// learns its wait_timeout (the lease) and the session's id (needed to
	// end a cancelled wait). The id is CONNECTION_ID() only once the server
	// has shown it to be the session's own: on a lock name of the
	// statement's own (sessionProbeName), taken, named held by the session
	// (IS_USED_LOCK), and released. A session whose pseudo_thread_id was
	// set answers another session's id to CONNECTION_ID(); IS_USED_LOCK
	// never does. (Not IS_USED_LOCK of the lock itself: TiDB answers it for
	// a lock held elsewhere only after a wait of 1 s, and with 1.) A
	// connection of pool.Open learns its id once (kept on its
	// lockconn.Conn) and then sends sqlTryLockKnown.
	sqlTryLock      = "SELECT GET_LOCK(?, 0), @@session.wait_timeout, CONNECTION_ID(), GET_LOCK(?, 0), IS_USED_LOCK(?), RELEASE_LOCK(?)"
	sqlTryLockKnown = "SELECT GET_LOCK(?, 0)"
	sqlWaitLock     = "SELECT GET_LOCK(?, ?)"
	sqlRelease      = "SELECT RELEASE_LOCK(?)"
	sqlOwnership    = "SELECT IS_USED_LOCK(?) = CONNECTION_ID()"
	sqlIsUsed       = "SELECT IS_USED_LOCK(?)"
)

// waitGrace is how long past ctx's deadline the driver keeps waiting for the
// server's own timeout answer, so a wait that times out normally keeps its
// connection.
const waitGrace = 500 * time.Millisecond

// server is the real backend: GET_LOCK and RELEASE_LOCK on connections of a
// lock pool.
type server struct {
	db *sql.DB
	// pooled: db comes from pool.Open, so every connection was opened with
	// the lease as its wait_timeout and keeps its session id once learned.
	pooled bool
	// lease is the session wait_timeout every lock connection has: the one
	// pool.Open was given ([pool.WithLease]), or [pool.DefaultLease] for any
	// other pool, whose connections get it by a SET SESSION the first time.
	lease  time.Duration
	flavor atomic.Int32 // flavor.Flavor, learned at the first acquisition
	// holdLimit (a time.Duration, set before flavor) is how long after its
	// GET_LOCK was sent a lock is reported lost, on a server that lets a
	// lock live only so long (TiDB: holdLimitFor its max-txn-ttl); 0: no
	// limit.
	holdLimit atomic.Int64
	// noProbe: TiDB refused the fast try's probe (TryProbe: no privilege
	// on mysql.advisory_locks); tries use GET_LOCK(name, 0), which waits
	// 1 s there for a held lock.
	noProbe atomic.Bool
	killer  killer // ends the server sessions of cancelled waits
}

func newServer(db *sql.DB) *server {
	s := &server{db: db, lease: pool.DefaultLease, killer: killer{db: db}}
	if c := lockconn.Of(db); c != nil {
		s.pooled, s.lease = true, c.Lease()
	}
	return s
}

func (s *server) close() { s.killer.close() }

// used implements backend.
func (s *server) used(ctx context.Context, key, name string) (bool, error) {
	var id sql.NullInt64
	if err := s.db.QueryRowContext(ctx, sqlIsUsed, name).Scan(&id); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			c := context.Cause(ctx)
			if c == ctxErr {
				c = nil
			}
			return false, fail(key, "", ctxWords("asking whether it is held", ctxErr, c), ctxErr, c)
		}
		return false, fail(key, "", "asking whether it is held (IS_USED_LOCK): "+err.Error(), err)
	}
	return id.Valid && id.Int64 != 0, nil
}

// take implements backend: a connection of the lock pool (connect); for a
// try where GET_LOCK(name, 0) waits for a holder, the probe (probeFree);
// the first GET_LOCK, which does not wait (getLockNow); unless it granted
// the lock or the caller only tries, the wait (wait); then the lock's
// expiry and, on a pool not from pool.Open, its lease (setLease).
func (s *server) take(callerCtx, ctx context.Context, key, name string, try bool) (link, error) {
	conn, f, err := s.connect(callerCtx, ctx, key)
	if err != nil {
		return nil, err
	}
	p := &pinned{conn: conn, name: name, arg: name}
	if try && f.TryWaits() && !s.noProbe.Load() {
		if err := s.probeFree(callerCtx, ctx, conn, key, name); err != nil {
			return nil, err
		}
	}
	var row [6]sql.NullInt64
	id, sent, err := s.getLockNow(callerCtx, ctx, conn, f, key, p.arg, &row, try)
	if err != nil {
		return nil, err
	}
	got, waitTimeout := row[0], row[1].Int64
	if !got.Valid {
		_ = conn.Close()
		return nil, fail(key, "not acquired", "GET_LOCK answered NULL (the server ended the statement: KILL QUERY or a statement time limit)", ErrNotAcquired)
	}
	if got.Int64 != 1 {
		if try {
			_ = conn.Close()
			return nil, heldElsewhere(key, false)
		}
		if sent, err = s.wait(ctx, conn, f, key, name, id); err != nil {
			return nil, err
		}
	}
	if limit := time.Duration(s.holdLimit.Load()); limit > 0 {
		p.expiry = sent.Add(limit)
	}
	p.id = id
	if err := s.setLease(ctx, conn, key, waitTimeout); err != nil {
		return nil, err
	}
	return p, nil
}

// connect returns a connection of the lock pool for an acquisition of key
// (see backend.take for callerCtx and ctx), and the kind of server it is
// on (detect).
func (s *server) connect(callerCtx, ctx context.Context, key string) (*sql.Conn, flavor.Flavor, error) {
	conn, err := lockConn(callerCtx, ctx, s.db, key)
	if err != nil {
		if f, ok := err.(*failure); ok { // a DoMulti that must not wait
			return nil, flavor.Unknown, f
		}
		if ctxEnded(ctx) {
			return nil, flavor.Unknown, notAcquired(ctx, key, nil)
		}
		return nil, flavor.Unknown, fail(key, "", "no connection from the lock pool: "+err.Error(), err)
	}
	f, err := s.detect(ctx, conn)
	if err != nil {
		discardConn(conn)
		var hl errHoldLimit
		if errors.As(err, &hl) && !ctxEnded(ctx) {
			return nil, flavor.Unknown, fail(key, "not acquired", hl.Error(), ErrNotAcquired, hl.err)
		}
		return nil, flavor.Unknown, s.getLockError(ctx, key, err)
	}
	return conn, f, nil
}

// probeFree is a try's probe on TiDB (probe), before its GET_LOCK: nil
// when name looks free; otherwise, with conn closed, heldElsewhere when
// another session holds it, or the probe's error.
func (s *server) probeFree(callerCtx, ctx context.Context, conn *sql.Conn, key, name string) error {
	held, err := s.probe(callerCtx, conn, name)
	if err != nil {
		discardConn(conn)
		return s.getLockError(ctx, key, err)
	}
	if held {
		_ = conn.Close()
		return heldElsewhere(key, false)
	}
	return nil
}

// getLockNow runs an acquisition's first GET_LOCK, which does not wait for
// a holder (tryLock), on conn, on a server of kind f, with arg the lock's
// name; row receives the answer (row[0] GET_LOCK's, row[1] wait_timeout's
// when the statement asked it). It returns the session's id when known (0
// otherwise) and when the statement was sent. On error conn is closed:
// the session's id was not the session's own, the GET_LOCK of a try was
// cut, by tryAnswer or by ctx, where it waits for a holder (cutGetLock),
// or it failed.
func (s *server) getLockNow(callerCtx, ctx context.Context, conn *sql.Conn, f flavor.Flavor, key string, arg any, row *[6]sql.NullInt64, try bool) (id int64, sent time.Time, err error) {
	// The first GET_LOCK runs on ctx, so that Close, which waits for it,
	// cuts it too; what cut it is told by callerCtx (cutGetLock).
	tctx, cancelTry := ctx, context.CancelFunc(func() {})
	if try && f.TryWaits() {
		// GET_LOCK(name, 0) waits 1 s there for a held lock: a try is cut
		// after tryAnswer (the probe found the lock free, but someone took
		// it since, or the probe is refused).
		tctx, cancelTry = context.WithTimeout(ctx, tryAnswer)
	}
	sent = time.Now()
	id, err = tryLock(tctx, conn, arg, row, f.NeedsInterpolation())
	var bad errSessionID
	if errors.As(err, &bad) {
		cancelTry()
		// A session that CONNECTION_ID() does not name: give back what it
		// was granted (the RELEASE_LOCK is the session's own), and take
		// nothing.
		if row[0].Valid && row[0].Int64 == 1 {
			var rel [1]sql.NullInt64
			_, _ = queryInts(ctx, conn, time.Now().Add(killTimeout), rel[:], sqlRelease, arg)
		}
		discardConn(conn)
		return 0, sent, bad.failure(key)
	}
	cut := err != nil && tctx.Err() != nil
	cancelTry()
	if flavor.IsRetryLimit(err) {
		// TiDB gave up retrying its lock under contention: not granted.
		row[0], err = sql.NullInt64{Valid: true}, nil
	}
	switch {
	case cut && f.TryWaits():
		return 0, sent, s.cutGetLock(callerCtx, conn, key, id, try)
	case err != nil && errors.Is(err, errPrepared):
		discardConn(conn)
		return 0, sent, fail(key, "not acquired", "on "+f.String()+" the lock pool must set interpolateParams=true (pool.Open does): server-side prepared GET_LOCK statements miscount the lock's references", ErrNeedsInterpolation, ErrNotAcquired)
	case err != nil:
		discardConn(conn)
		return 0, sent, s.getLockError(ctx, key, err)
	}
	return id, sent, nil
}

// cutGetLock ends an acquisition whose first GET_LOCK waited, on a server
// where GET_LOCK(name, 0) waits for a held lock (1 s), and was cut, by
// tryAnswer or by ctx: the server may still grant the lock to this
// session (id, 0 if not known), so it is ended, as for any cancelled
// wait, and conn discarded. A try whose callerCtx has not ended finds the
// lock held elsewhere.
func (s *server) cutGetLock(callerCtx context.Context, conn *sql.Conn, key string, id int64, try bool) error {
	if id != 0 {
		s.killer.kill(id)
	}
	discardConn(conn)
	if try && callerCtx.Err() == nil {
		return heldElsewhere(key, false)
	}
	// callerCtx ended, or Close did (takeAtServer then says ErrClosed);
	// ctx, derived from callerCtx, may show the caller's cancel only just
	// after it: callerCtx tells it.
	return errCancelledWait{notAcquired(callerCtx, key, nil)}
}

// setLease gives conn's session the lease as its wait_timeout, on a pool
// not from pool.Open, when its wait_timeout (waitTimeout, in seconds) is
// another. On error conn is discarded.
func (s *server) setLease(ctx context.Context, conn *sql.Conn, key string, waitTimeout int64) error {
	if s.pooled {
		return nil
	}
	if secs := int64((s.lease + time.Second - 1) / time.Second); waitTimeout != secs {
		if _, err := conn.ExecContext(ctx, "SET SESSION wait_timeout = "+strconv.FormatInt(secs, 10)); err != nil {
			discardConn(conn)
			return fmt.Errorf("namedlock: set the lease on the lock connection for %q: %w", key, err)
		}
	}
	return nil
}

// probe asks TiDB, without waiting, whether another session holds name
// (flavor.TryProbe, in a transaction of its own on conn, always rolled
// back). When the server refuses the probe (no privilege on
// mysql.advisory_locks), it remembers that tries must use GET_LOCK and
// answers held=false. An error leaves conn in an unknown state.
func (s *server) probe(ctx context.Context, conn *sql.Conn, name string) (held bool, err error) {
	if _, err := conn.ExecContext(ctx, flavor.TryProbeBegin); err != nil {
		return false, err
	}
	var n [1]sql.NullInt64
	_, err = queryInts(ctx, conn, time.Time{}, n[:], flavor.TryProbe, flavor.TryProbeName(name))
	_, rerr := conn.ExecContext(ctx, flavor.TryProbeEnd)
	switch {
	case flavor.IsLockedNowait(err):
		held, err = true, nil
	case flavor.IsProbeRefused(err):
		s.noProbe.Store(true)
		err = nil
	}
	if err == nil {
		err = rerr
	}
	return held, err
}

// tryAnswer bounds the GET_LOCK of a try on a server where GET_LOCK(name,
// 0) waits for a held lock (TiDB: 1 s): an uncontended one answers in a few
// milliseconds there, so one that has not answered by then waits for a
// holder.
const tryAnswer = 100 * time.Millisecond

// holdLimitFor is how long after its GET_LOCK was sent a lock is reported
// lost on a server that lets it live maxHold (flavor.MaxHold; 0: no
// limit): maxHold less a margin of a tenth of it, at least 1 s and at most
// 1 min, and at most half of maxHold. The margin covers the keep-alive's
// tick (at most 250 ms) and the difference between the clocks that count
// (ours, and the one of the server's transaction).
func holdLimitFor(maxHold time.Duration) time.Duration {
	if maxHold <= 0 {
		return 0
	}
	margin := min(max(maxHold/10, time.Second), time.Minute, maxHold/2)
	return maxHold - margin
}

// errPrepared: the driver would run GET_LOCK as a server-side prepared
// statement on a server that miscounts it (flavor.NeedsInterpolation).
var errPrepared = errors.New("namedlock: prepared GET_LOCK refused")

// tryLock runs the first GET_LOCK of an acquisition, which never waits, on
// conn, in one round trip and one [sql.Conn.Raw]: GET_LOCK alone on a
// connection of pool.Open whose session id is known (lockconn.Conn), and
// otherwise sqlTryLock, which also answers wait_timeout and the session's
// id (then recorded on a lockconn.Conn: see sessionID). row receives
// GET_LOCK's answer and, on the full statement, the others. id is the
// session's id at the server when known, 0 otherwise (the statement did
// not run, or the server did not show it). An errSessionID: CONNECTION_ID()
// does not name the session (row[0] says whether the lock was granted).
// direct: the server must not get it as a prepared statement
// (flavor.NeedsInterpolation); errPrepared when the driver would prepare
// it.
func tryLock(ctx context.Context, conn *sql.Conn, arg any, row *[6]sql.NullInt64, direct bool) (id int64, err error) {
	ran := false
	err = conn.Raw(func(dc any) error {
		q, ok := dc.(driver.QueryerContext)
		if !ok {
			return nil
		}
		lc, _ := dc.(*lockconn.Conn)
		if lc != nil && lc.SessionID() != 0 {
			id = lc.SessionID()
			ran, err = queryDirect(ctx, q, row[:1], sqlTryLockKnown, []any{arg})
			return err
		}
		probe := sessionProbeName()
		ran, err = queryDirect(ctx, q, row[:], sqlTryLock, []any{arg, probe, probe, probe})
		if ran && err == nil {
			id, err = sessionID(row)
			if id != 0 && lc != nil {
				lc.SetSessionID(id) // one server session for the connection's life
			}
		}
		return err
	})
	if !ran && err == nil && direct {
		return 0, errPrepared
	}
	if !ran && err == nil {
		probe := sessionProbeName()
		if err = queryViaSQL(ctx, conn, time.Time{}, row[:], sqlTryLock, []any{arg, probe, probe, probe}); err == nil {
			id, err = sessionID(row)
		}
	}
	return id, err
}

// sessionID is the session id that sqlTryLock's answer row shows: its
// CONNECTION_ID() once IS_USED_LOCK named it the holder of the statement's
// own lock; 0 when that lock was not granted (no one else uses its name:
// so never, but then a cancelled wait closes its socket without a KILL).
// An errSessionID when IS_USED_LOCK names another session; an error when
// the statement's own lock was not released (the connection must then go).
func sessionID(row *[6]sql.NullInt64) (int64, error) {
	cid, got, holder, released := row[2], row[3], row[4], row[5]
	switch {
	case !got.Valid || got.Int64 != 1:
		return 0, nil
	case !released.Valid || released.Int64 != 1:
		return 0, fmt.Errorf("namedlock: RELEASE_LOCK of the session id probe's lock answered %s, want 1", nullID(released))
	case !cid.Valid || !holder.Valid || cid.Int64 != holder.Int64:
		return 0, errSessionID{cid, holder}
	}
	return cid.Int64, nil
}

// sessionProbeName is a lock name no other session uses, for sqlTryLock.
func sessionProbeName() string {
	return "namedlock:session:" + strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64(), 36)
}

// errSessionID: CONNECTION_ID() answered cid, but the server names holder
// as the session that holds the lock this one just took. A session's
// pseudo_thread_id (a DSN parameter can set it) makes CONNECTION_ID()
// answer it instead of the session's id: the ownership check
// (IS_USED_LOCK(name) = CONNECTION_ID()) would then find every lock lost,
// and the KILL that ends a cancelled wait would end another session.
type errSessionID struct{ cid, holder sql.NullInt64 }

func (e errSessionID) Error() string {
	return fmt.Sprintf("CONNECTION_ID() answers %s on the lock pool's connection, but the server names its session %s (IS_USED_LOCK of a lock it had just taken): the session's pseudo_thread_id is set (a DSN parameter pseudo_thread_id?), so CONNECTION_ID() does not name it; no lock is taken on such a pool, since its ownership checks would find every lock lost and the KILL that ends a cancelled wait would end another session", nullID(e.cid), nullID(e.holder))
}

// failure is e as the error of an acquisition of key.
func (e errSessionID) failure(key string) *failure {
	return fail(key, "not acquired", e.Error(), ErrNotAcquired)
}

// nullID formats a session id as the server answered it.
func nullID(n sql.NullInt64) string {
	if !n.Valid {
		return "NULL"
	}
	return strconv.FormatInt(n.Int64, 10)
}

// wait blocks in GET_LOCK on conn, on a server of kind f, until the lock
// is granted (nil, and when the GET_LOCK that got it was sent), the
// server's timeout for ctx's deadline passes, or ctx ends. On failure conn
// is closed; when ctx ended mid-wait, the session is killed as well (id 0:
// not known). On a server whose waits ignore cancellation (Embedded, TiDB)
// the wait goes in slices of 1 s (flavor.WaitArg), so that a wait given up
// on lingers there at most a slice.
func (s *server) wait(ctx context.Context, conn *sql.Conn, f flavor.Flavor, key, name string, id int64) (time.Time, error) {
	if err := s.noStatementLimit(ctx, conn, f, key); err != nil {
		return time.Time{}, err
	}
	for {
		deadline, hasDeadline := ctx.Deadline()
		left := time.Until(deadline)
		if hasDeadline && left <= 0 {
			_ = conn.Close()
			// The clock is past the deadline, but ctx's timer may not have
			// fired yet; wait for it (it is due) so that the error matches
			// ctx.Err() (context.DeadlineExceeded), as documented.
			<-ctx.Done()
			return time.Time{}, notAcquired(ctx, key, nil)
		}
		timeout, hard := f.WaitArg(left, hasDeadline)
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if !hard {
			wctx, cancel = graceContext(ctx)
		}
		var answer [1]sql.NullInt64
		sent := time.Now()
		_, err := queryInts(wctx, conn, time.Time{}, answer[:], sqlWaitLock, name, timeout)
		// Looked at before cancel, which ends wctx: an error of the server's
		// own (a deadlock, a KILL QUERY) is not a cancelled wait.
		cancelled := err != nil && (ctx.Err() != nil || wctx.Err() != nil)
		cancel()
		got := answer[0]
		switch {
		case cancelled:
			// The driver closed the socket; the server session may still
			// be waiting, or may just have been granted the lock. End it.
			if id != 0 {
				s.killer.kill(id)
			}
			discardConn(conn)
			return time.Time{}, errCancelledWait{notAcquired(ctx, key, nil)}
		case flavor.IsRetryLimit(err):
			// TiDB gave up retrying its lock under contention before the
			// slice's timeout: as if it had timed out.
			continue
		case err != nil:
			discardConn(conn)
			return time.Time{}, s.getLockError(ctx, key, err)
		case !got.Valid:
			// MariaDB answers NULL to a wait ended by KILL QUERY or by
			// the session's max_statement_time.
			discardConn(conn)
			return time.Time{}, fail(key, "not acquired", waitKilled+" (GET_LOCK answered NULL)", ErrNotAcquired)
		case got.Int64 == 1:
			return sent, nil
		}
		// 0: the server's timeout passed; loop to renew or to report it.
	}
}

// noStatementLimit switches the server's statement time limit off in
// conn's session, which would end a wait, on a pool not from pool.Open
// (pool.Open switched it off in its sessions). Not remembered per
// connection: once per wait. On error conn is discarded.
func (s *server) noStatementLimit(ctx context.Context, conn *sql.Conn, f flavor.Flavor, key string) error {
	if s.pooled {
		return nil
	}
	if stmt := f.NoStatementLimit(); stmt != "" {
		if _, err := conn.ExecContext(ctx, stmt); err != nil && !flavor.IsUnknownVariable(err) {
			discardConn(conn)
			return s.getLockError(ctx, key, err)
		}
	}
	return nil
}

// errCancelledWait marks a wait at the server that ctx ended (its session
// killed), for the Locker's counters. It unwraps to the error returned.
type errCancelledWait struct{ error }

func (e errCancelledWait) Unwrap() error { return e.error }

// detect learns, once per server (at the first acquisition: one round
// trip, two on TiDB), which kind of server it is and how long it lets a
// lock live (flavor.MaxHold). Nothing is remembered until both are known:
// when TiDB's max-txn-ttl could not be read (a broken connection, a
// timeout), detect fails with errHoldLimit, no lock is taken, and the next
// acquisition reads it again. Only a server that answers but refuses to say
// (flavor.ErrMaxHoldRefused) is assumed to have TiDB's default of 1 h.
func (s *server) detect(ctx context.Context, conn *sql.Conn) (flavor.Flavor, error) {
	if f := flavor.Flavor(s.flavor.Load()); f != flavor.Unknown {
		return f, nil
	}
	f, _, err := flavor.Detect(ctx, conn)
	if err != nil {
		return flavor.Unknown, err
	}
	maxHold, err := f.MaxHold(ctx, conn)
	if err != nil && !errors.Is(err, flavor.ErrMaxHoldRefused) {
		return flavor.Unknown, errHoldLimit{err}
	}
	s.holdLimit.Store(int64(holdLimitFor(maxHold)))
	s.flavor.Store(int32(f))
	return f, nil
}

// errHoldLimit: detect could not learn how long TiDB lets a lock live, so
// no lock is taken (see detect).
type errHoldLimit struct{ err error }

func (e errHoldLimit) Error() string {
	return "TiDB's hold limit (performance.max-txn-ttl) is not known, so no lock is taken until it is: " + e.err.Error()
}

func (e errHoldLimit) Unwrap() error { return e.err }

// waitKilled is the reason given for a wait that the server ended itself.
const waitKilled = "the wait was killed by the server: KILL QUERY or a statement time limit"

// getLockError classifies a failed GET_LOCK: ctx ended, a deadlock, a wait
// the server ended itself (an operator's KILL QUERY, MySQL error 1317, or a
// statement time limit, 3024 / MariaDB 1969: ErrNotAcquired with the
// reason), a name the server refused, a session closed under the wait (an
// operator's KILL, a restart: ErrNotAcquired), or any other failure.
func (s *server) getLockError(ctx context.Context, key string, err error) error {
	switch {
	case ctxEnded(ctx):
		return notAcquired(ctx, key, err)
	case flavor.IsDeadlock(err):
		return fail(key, "not acquired", "the server refused the wait, which would deadlock ("+err.Error()+")", ErrNotAcquired, ErrDeadlock, err)
	case flavor.IsWaitKilled(err):
		return fail(key, "not acquired", waitKilled+" ("+err.Error()+")", ErrNotAcquired, err)
	case flavor.IsBadLockName(err):
		return fail(key, "not acquired", "the server refused the lock name ("+err.Error()+")", err)
	case isConnClosed(err):
		// An operator's KILL of the waiting session (the server closes it
		// without a word), a restart: the session, and any grant it got,
		// is gone. The driver's own words ("invalid connection") say
		// nothing to a person; they stay matchable.
		return fail(key, "not acquired", connClosed+" before GET_LOCK answered", ErrNotAcquired, err)
	}
	return fail(key, "not acquired", "GET_LOCK failed ("+err.Error()+")", err)
}

// ctxEnded reports whether ctx has ended, counting a deadline that the clock
// has passed before ctx's timer fired: a dial fails with "i/o timeout" at
// the deadline itself, while ctx.Err() may still be nil for a moment. It
// then waits for the (due) ctx.Done, so that ctx.Err() is set.
func ctxEnded(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		<-ctx.Done()
		return true
	}
	return false
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

// pinned is the real link: a connection of the lock pool, pinned by
// [sql.Conn], whose session holds the lock name.
type pinned struct {
	conn   *sql.Conn
	name   string
	arg    any       // name as a statement argument, converted once
	expiry time.Time // see link.expires; zero: none
	id     int64     // see link.sessionID; 0: not known
}

func (p *pinned) expires() time.Time { return p.expiry }

func (p *pinned) sessionID() int64 { return p.id }

func (p *pinned) owns(ctx context.Context, deadline time.Time) (bool, error) {
	var answer [1]sql.NullInt64
	_, err := queryInts(ctx, p.conn, deadline, answer[:], sqlOwnership, p.arg)
	return err == nil && answer[0].Valid && answer[0].Int64 == 1, err
}

func (p *pinned) release(ctx context.Context, deadline time.Time) error {
	var row [1]sql.NullInt64
	ended, err := queryInts(ctx, p.conn, deadline, row[:], sqlRelease, p.arg)
	got := row[0]
	if err == nil && got.Valid && got.Int64 == 1 {
		_ = p.conn.Close()
		return nil
	}
	discardConn(p.conn)
	switch {
	case err != nil && !ended && isConnClosed(err):
		// The session that held the lock is gone (KILL, restart, network):
		// the lock went with it, possibly while it was still being used.
		return lost(connClosed, err)
	case err != nil && !ended:
		return lost("RELEASE_LOCK failed: "+err.Error(), err)
	case err != nil:
		return fail("", "", "release not confirmed: "+releaseEnded(err)+"; its connection was closed, so the server frees the lock when it sees the session end", err)
	}
	answer := "NULL"
	if got.Valid {
		answer = strconv.FormatInt(got.Int64, 10)
	}
	return lost("the server says its session no longer held it (RELEASE_LOCK answered "+answer+")", nil)
}

// releaseEnded says why a RELEASE_LOCK ended (its ctx or deadline) before
// the server's answer.
func releaseEnded(err error) string {
	if errors.Is(err, context.Canceled) {
		return "cancelled before the server answered (" + context.Canceled.Error() + ")"
	}
	return "no answer in time (" + context.DeadlineExceeded.Error() + ")"
}

func (p *pinned) discard() { discardConn(p.conn) }

// discardConn closes conn so that database/sql never reuses it: the driver is
// told the connection is bad. The server ends the session, and with it every
// lock it holds, when it sees the socket close.
func discardConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
