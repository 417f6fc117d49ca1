package schedlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Lock tries once to take the lock of the job cfg.Name, with ShedLock's
// statements: INSERT IGNORE of the job's row, and if the row exists, an
// UPDATE that succeeds only if its lock_until has passed (in database time);
// then it reads back the locked_at it wrote, which identifies the lease (see
// Leases in the package documentation).
//
// A Provider runs one Lock's statements at a time, whatever the job names
// (so the locked_at read back is the Lock's own): a Lock waits, within
// ctx, for the one in progress, and each Lock's statements (2 or 3 short
// ones) run within ctx and the Provider's lock timeout (WithLockTimeout).
// So a Lock waits at most the lock timeout for each Lock ahead of it, even
// if that one's connection hangs; the cost is that jobs due at the same
// tick take their locks one after another, each in 2 or 3 round trips to
// the server.
//
// A nil error means the lock is held until lock_until = now +
// cfg.LockAtMostFor (database time); release it with (*Lease).Unlock. If
// another instance holds it, the error matches ErrLocked and names the
// holder. Invalid configurations match ErrInvalidConfig without touching the
// database; a lease that would end past the TIMESTAMP column's range
// matches ErrLeaseOutOfRange, and nothing is written; a missing table
// matches ErrTableNotFound and a table without ShedLock's columns
// ErrBadTable. If the locked_at cannot be read back (a database error), the
// row is left locked until its lock_until and the error is returned.
//
// If cfg.KeepAlive is positive, the Lease extends itself in a goroutine that
// Unlock stops and waits for; Done and Err report a lost lease.
//
// Lock is the building block of Run; prefer Run, which cannot forget to
// unlock.
func (p *Provider) Lock(ctx context.Context, cfg Config) (*Lease, error) {
	return p.lock(ctx, cfg, nil)
}

func (p *Provider) lock(ctx context.Context, cfg Config, onLost func(error)) (*Lease, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var expiry *time.Timer
	if cfg.KeepAlive > 0 {
		// Started before the acquiring statement, so it fires no later
		// than the lock_until that statement writes.
		expiry = time.NewTimer(cfg.LockAtMostFor)
	}
	lockedAt, err := p.acquire(ctx, cfg)
	if err != nil {
		if expiry != nil {
			expiry.Stop()
		}
		return nil, err
	}
	l := newLease(p, cfg, lockedAt, onLost)
	if expiry != nil {
		l.stopKA = make(chan struct{})
		l.kaDone = make(chan struct{})
		go l.keepAlive(context.WithoutCancel(ctx), expiry)
	}
	return l, nil
}

// acquire runs ShedLock's lock statements. If this Provider now holds the
// lock, it returns the acquisition's locked_at (ms since the epoch), read
// back from the row.
func (p *Provider) acquire(ctx context.Context, cfg Config) (int64, error) {
	// One acquisition at a time per Provider, whatever the name: the
	// locked_at read back is then this acquisition's, since no other
	// acquisition of this Provider (the only writer of its locked_by) can
	// come between its write and its read-back, even for a name that
	// differs from cfg.Name but that the column's collation makes the same
	// row (case, accents, ß and ss, ...). The wait is bounded by ctx, the
	// turn by ctx and the lock timeout.
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("schedlock: lock of job %q: waiting for this Provider's Lock in progress: %w",
			cfg.Name, context.Cause(ctx))
	}
	defer func() { <-p.turn }()
	lctx, cancel := context.WithTimeout(ctx, p.lockTimeout)
	defer cancel()
	lockedAt, err := p.acquireRow(lctx, cfg)
	if err != nil && lctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w (the lock timeout, %v, passed)", err, p.lockTimeout)
	}
	return lockedAt, err
}

// acquireRow is acquire's statements, within the turn.
func (p *Provider) acquireRow(ctx context.Context, cfg Config) (int64, error) {
	atMost := cfg.LockAtMostFor.Microseconds()
	for attempt := 0; ; attempt++ {
		_, known := p.known.Load(cfg.Name)
		if !known {
			n, err := p.exec(ctx, "lock (insert)", p.stmt.insert, cfg.Name, atMost, p.lockedBy, atMost)
			if err != nil {
				return 0, err
			}
			if n == 1 {
				lockedAt, err := p.readBack(ctx, cfg.Name, true)
				if err != nil {
					return 0, err
				}
				p.known.Store(cfg.Name, struct{}{})
				return lockedAt, nil
			}
		}
		n, err := p.exec(ctx, "lock (update)", p.stmt.update, atMost, p.lockedBy, cfg.Name, atMost)
		if err != nil {
			return 0, err
		}
		if n == 1 {
			p.known.Store(cfg.Name, struct{}{})
			return p.readBack(ctx, cfg.Name, false)
		}
		// Not acquired. Tell "held by someone" from "the lease would end
		// past TIMESTAMP's range" and from "there is no row by this name",
		// which ShedLock cannot: a deleted row (insert it again) or a name
		// the column mangled (fail loudly).
		var holder sql.NullString
		var fits sql.NullInt64
		err = p.db.QueryRowContext(ctx, p.stmt.holder, cfg.Name, atMost).Scan(&holder, &fits)
		switch {
		case err != nil:
			return 0, p.classify("lock (holder)", err)
		case fits.Int64 != 1:
			return 0, outOfRange(cfg.Name, "LockAtMostFor", cfg.LockAtMostFor)
		case holder.Valid:
			p.known.Store(cfg.Name, struct{}{})
			return 0, fmt.Errorf("%w: job %q is held by %q", ErrLocked, cfg.Name, holder.String)
		case attempt == 0:
			p.known.Delete(cfg.Name)
			continue
		}
		return 0, fmt.Errorf("%w: job %q: after INSERT IGNORE no row of table %s has this name; "+
			"its name column is narrower than VARCHAR(64) or its character set cannot hold the name",
			ErrNameNotStorable, cfg.Name, p.table)
	}
}

// readBack reads the locked_at the acquisition just wrote: the lease's
// identity. After an insert it also checks that the row carries the name:
// INSERT IGNORE turns truncation and unconvertible characters into
// warnings, which is how ShedLock's users lost jobs.
func (p *Provider) readBack(ctx context.Context, name string, inserted bool) (int64, error) {
	var lockedAt int64
	err := p.db.QueryRowContext(ctx, p.stmt.acquired, name, p.lockedBy).Scan(&lockedAt)
	switch {
	case errors.Is(err, sql.ErrNoRows) && inserted:
		return 0, fmt.Errorf("%w: job %q: the row INSERT IGNORE wrote into table %s does not carry this name; "+
			"its name column is narrower than VARCHAR(64) or its character set cannot hold the name",
			ErrNameNotStorable, name, p.table)
	case errors.Is(err, sql.ErrNoRows):
		// LockAtMostFor ran out before the read, and another instance
		// took the row.
		return 0, fmt.Errorf("%w: job %q: taken by another instance after this one's lease of %s ran out, "+
			"before Lock could read the lease back", ErrLocked, name, p.table)
	case err != nil:
		// The row is held but cannot be handed out without its identity.
		// It is left to expire after LockAtMostFor, as a crash here would:
		// an unlock by name and locked_by alone could, landing late, end
		// a later lease of this Provider.
		return 0, p.classify("lock (read back)", err)
	}
	return lockedAt, nil
}

// unlock runs ShedLock's unlock statement: lock_until =
// max(locked_at + lockAtLeastFor, now), for the lease's row only, and only
// while it is unexpired.
func (p *Provider) unlock(ctx context.Context, name string, lockedAt int64, atLeast time.Duration) error {
	us := atLeast.Microseconds()
	n, err := p.exec(ctx, "unlock", p.stmt.unlock, us, us, name, p.lockedBy, lockedAt)
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	// 0 rows changed: the row is not this lease's any more, or its
	// lock_until had passed, or the new lock_until equals the old one
	// (MySQL counts changed rows, not matched ones; the last happens only
	// with lock_until = locked_at + lockAtLeastFor, still to come). Look:
	// a row still this lease's and unexpired now was so at the unlock too
	// (only an acquisition writes an expired row, and it changes
	// locked_at). The one case this reports wrongly as lost is the last
	// one, with that lock_until passing between the two statements.
	var held int
	if err := p.db.QueryRowContext(ctx, p.stmt.holds, name, p.lockedBy, lockedAt).Scan(&held); err != nil {
		return p.classify("unlock (check)", err)
	}
	if held == 0 {
		return fmt.Errorf("%w: job %q: at unlock the lease had run out (its lock_until had passed: the job ran "+
			"longer than LockAtMostFor or than its last extension), and the row of table %s may have been taken "+
			"again since (by another instance or by a newer lease of this one), or it was changed by hand; "+
			"it was left as it was", ErrLeaseLost, name, p.table)
	}
	return nil
}

// extend runs ShedLock's extend statement: lock_until = now + d, only while
// the row is the lease's and unexpired.
func (p *Provider) extend(ctx context.Context, name string, lockedAt int64, d time.Duration) error {
	us := d.Microseconds()
	n, err := p.exec(ctx, "extend", p.stmt.extend, us, name, p.lockedBy, lockedAt, us)
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	// 0 rows changed: lost, refused because now + d would be past
	// TIMESTAMP's range, or extended to the lock_until it already had
	// (twice within one millisecond). Look.
	var held, fits sql.NullInt64
	if err := p.db.QueryRowContext(ctx, p.stmt.owned, name, p.lockedBy, lockedAt, us).Scan(&held, &fits); err != nil {
		return p.classify("extend (check)", err)
	}
	switch {
	case held.Int64 == 0:
		return fmt.Errorf("%w: job %q: the row of table %s has expired, or was taken again "+
			"(by another instance or by a newer lease of this one)", ErrLeaseLost, name, p.table)
	case fits.Int64 != 1:
		return outOfRange(name, "the extension", d)
	}
	return nil
}

// outOfRange is the error of a lease refused because lock_until = now + d
// (database time) would be past the TIMESTAMP column's end.
func outOfRange(name, what string, d time.Duration) error {
	return fmt.Errorf("%w: job %q: now + %s (%v) would be past it; nothing was written "+
		"(ShedLock's statement would store a zero lock_until and let another instance take the job)",
		ErrLeaseOutOfRange, name, what, d)
}

func (p *Provider) exec(ctx context.Context, op, query string, args ...any) (int64, error) {
	res, err := p.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, p.classify(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, p.classify(op, err)
	}
	return n, nil
}
