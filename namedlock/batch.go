package namedlock

import (
	"context"
	"database/sql"
)

// DoBatch runs fn, one section of a group, under the lock named by key: the
// sections of the callers of DoBatch queued for key in this process run one
// after another, in queue order, in a single transaction on db, each in its
// own savepoint, and the transaction is committed once for all of them.
// Each section sees what the sections before it wrote. Across processes,
// the named lock orders the groups and the fence row orders their
// COMMITs. DoBatch is always fenced: a Locker without [WithFencing], or a
// db that is not the *sql.DB given there, returns an error matching
// [ErrFencing] before anything runs; a nil db or fn, one matching
// [ErrInvalidArgument].
//
// The group's first statement mints one fencing token per section, in one
// statement ([TokenFromContext] in fn gives the section's own; tokens
// strictly increase in commit order, with gaps). The lock goes to no one
// else before the group's COMMIT has returned. A group takes at most
// [DefaultBatchMaxSections] callers and starts no section later than
// [DefaultBatchMaxTime] after its first ([WithBatchLimits]); the callers it
// did not reach are first in the next group.
//
// DoBatch returns nil exactly when its section's work was committed:
//   - fn's error: its section is rolled back to its savepoint and DoBatch
//     returns that error at once; the other sections go on. A panic of fn
//     (or runtime.Goexit) rolls back its section the same way and goes on
//     in the caller's goroutine, where fn runs.
//   - A ctx that ends before the section starts: the caller leaves the
//     queue, and DoBatch returns an error matching [ErrNotAcquired] and
//     ctx.Err().
//   - fn's ctx is not the caller's: it ends only when the group must stop
//     (its lock lost, Close), and carries ctx's values. A statement whose
//     ctx ends closes its connection, which would end the whole group's
//     transaction; so fn must not run statements on a ctx of its own. A
//     ctx that ends during the section makes the section fail once fn has
//     returned: it is rolled back to its savepoint and DoBatch returns an
//     error matching ctx.Err(). A wait of this library that fn starts on
//     fn's ctx (for a lock, or for a group) ends also when ctx ends.
//   - Once fn has returned nil, DoBatch waits for the group's COMMIT, even
//     if ctx ends meanwhile.
//   - If the group cannot commit (its connection lost, a failed COMMIT),
//     every caller still waiting in it gets an error and nothing of the
//     group was committed — except for a COMMIT that got no answer (the
//     connection broke after it was sent, or the server ended the session
//     during it): then every caller waiting in the group gets an error
//     matching [ErrCommitUnknown], as [Locker.DoTx] does, and the group may
//     have committed. An error of a COMMIT that proves it was not applied
//     (the server refused it, or it was never sent) is an ordinary error.
//   - When the lock is lost during a group, fn's ctx ends (its cause says
//     why), no further section of the group starts (those callers get an
//     error matching ErrNotAcquired), and the group is rolled back: before
//     its COMMIT a group proves, beside the RELEASE SAVEPOINT of its last
//     section, that its lock is still held, and every caller waiting in a
//     group found without it gets an error matching [ErrLockLost]. A loss
//     after that proof does not fail the group: its COMMIT is kept in
//     order by the fence row, as a fenced [Locker.DoTx]'s is.
//   - When Close takes the lock during a group, fn's ctx ends the same way
//     and no further section starts (those callers get an error matching
//     ErrNotAcquired), but the lock stays with its session until the group
//     has ended: the group commits the sections that succeeded, as usual.
//     Close waits for the section running and for that COMMIT.
//
// What fn must not do: commit or roll back the transaction (tx.Commit,
// tx.Rollback, or a COMMIT, ROLLBACK or statement that commits
// implicitly, such as DDL), which database/sql cannot refuse; swallow an
// error of a statement that makes the server end the transaction (a
// deadlock, ER_LOCK_DEADLOCK): return it. The group detects either right
// after the section (its savepoint is gone: the group releases each
// section's savepoint once it succeeded, or rolls back to it once it
// failed) and stops there: no later section of the group runs, and every
// caller still waiting — the offending section's, those of the sections
// before it, and those of the sections not run — gets an error matching
// [ErrSectionEndedTx]. What the offending section and the sections before
// it wrote may have been committed (by the section's own COMMIT or DDL);
// the sections not run wrote nothing. Nor must fn leave session state that
// the next section would inherit (user variables, temporary tables, SET
// SESSION); use db rather than tx (that would not be in the group, and
// could wait for the group's own row locks); take the lock of the same
// key through the same Locker (Do, DoTx, Acquire, DoBatch, a Merger: a
// Locker is not re-entrant, so such a call waits for the group, which
// waits for fn, until ctx ends, Close or a loss of the lock ends fn's
// ctx, and then fails); or call Close on the Locker (Close waits for the
// group, which waits for fn: they block each other for ever).
//
// DoBatch needs no change to a critical section written for
// [Locker.DoTx]: it saves one COMMIT per section at the price of a
// SAVEPOINT and a RELEASE SAVEPOINT. A [Merger], whose fn handles a whole
// group at once (one read, one write, one multi-row insert for many
// requests), is where
// the large gains are. Both pay off only on a key many callers of one
// process want at once; a caller alone pays the round trips of the
// group (a token mint, a savepoint and its release) on top of its
// transaction.
//
// The callers of a key wait without a connection; the group's worker
// holds one of the lock pool (the lock) and one of db.
func (l *Locker) DoBatch(ctx context.Context, key string, db *sql.DB, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if ctx == nil {
		panic("namedlock: nil Context")
	}
	if key == "" {
		return errEmptyKey
	}
	if err := l.groupArgs("DoBatch", key, db, fn == nil); err != nil {
		return err
	}
	if err := l.cfg.fence.verify(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return notAcquired(ctx, key, nil)
	}
	gk := groupKey{key: key}
	wctx, stop := waitCtx(ctx)
	defer stop()
	m := newMember(wctx, key, nil)
	if err := l.enqueue(gk, m, groupRunner{db: db, call: "DoBatch"}); err != nil {
		return err
	}
	g, err := l.await(gk, m)
	if err != nil || g.turn == nil {
		if err == nil {
			err = g.err
		}
		return err
	}
	if ctx.Err() != nil {
		m.back <- sectionEnd{skipped: true}
		return notAcquired(ctx, key, nil)
	}
	ended := false
	defer func() {
		if !ended { // fn panicked or called runtime.Goexit: the panic goes on
			m.back <- sectionEnd{panicked: true}
		}
	}()
	err = fn(g.turn.ctx, g.turn.tx)
	ended = true
	if err == nil && ctx.Err() != nil {
		err = fail(key, "", ctxWords("the caller's ctx", ctx.Err(), nil)+" during its section, which was rolled back", ctx.Err())
	}
	m.back <- sectionEnd{err: err}
	if err != nil {
		return err
	}
	return (<-m.ch).err
}

// groupArgs checks what DoBatch and NewMerger (named by call) are given
// before anything runs.
func (l *Locker) groupArgs(call, key string, db *sql.DB, nilFunc bool) error {
	switch {
	case db == nil:
		return fail("", "", "invalid argument: "+call+": nil *sql.DB", ErrInvalidArgument)
	case nilFunc:
		return nilFn(call)
	case l.cfg.fence == nil:
		return fail(key, "", call+" is always fenced: the Locker needs WithFencing", ErrFencing)
	case db != l.cfg.fence.db:
		return fail(key, "", call+": db is not the *sql.DB given to WithFencing, which holds the fence table "+l.cfg.fence.quoted+": its transactions could not be fenced", ErrFencing)
	}
	return nil
}
