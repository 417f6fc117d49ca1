package namedlock

import (
	"context"
	"database/sql"
)

// Merger runs requests for one key in groups: every request queued for the
// key in this process when its group forms is handed to fn at once, in one
// transaction on the fence's database, under the key's named lock, and
// committed once. Create it with [NewMerger]; it is safe for concurrent
// use, and lives as long as its Locker.
type Merger[Req, Res any] struct {
	l  *Locker
	db *sql.DB
	fn func(ctx context.Context, tx *sql.Tx, key string, reqs []Req) ([]Res, error)
}

// NewMerger returns a Merger whose groups fn handles: fn gets the requests
// of one key in queue order and returns one result per request, in the
// same order, having written what they ask for in tx — for a flash sale,
// one read of the stock, one write, one multi-row insert of the orders for
// the whole group, rather than one of each per request.
//
// A Merger is always fenced, as [Locker.DoBatch] is: without [WithFencing]
// on l, or with a db that is not the *sql.DB given there, NewMerger returns
// an error matching [ErrFencing]; a nil l, db or fn, one matching
// [ErrInvalidArgument]. The group's first statement mints one token per
// request ([TokenFromContext] in fn gives the first; request i has the
// first plus i). The groups are bounded by [WithBatchLimits] on l.
//
// fn runs in the goroutine of the group's first caller. Its ctx ends when
// the group must stop (the lock lost, Close), never when a caller's ctx
// ends: a statement whose ctx ends closes its connection. fn must not
// commit or roll back tx (see [Locker.DoBatch]), nor keep reqs or tx after
// it returns, nor take the lock of the same key through l, nor call Close
// on l (as for a section of DoBatch, such a call blocks until Close or a
// loss of the lock, or for ever).
//
// Before the group's COMMIT, the lock is proven held by a check on the
// lock's session that starts as fn starts and runs beside it (not at fn's
// last statement): a group whose check finds the lock lost is rolled back
// (its requests get an error matching [ErrLockLost]); a loss after the
// check does not fail the group, whose COMMIT is kept in order by the
// fence row, as a fenced [Locker.DoTx]'s is.
func NewMerger[Req, Res any](l *Locker, db *sql.DB, fn func(ctx context.Context, tx *sql.Tx, key string, reqs []Req) ([]Res, error)) (*Merger[Req, Res], error) {
	if l == nil {
		return nil, fail("", "", "invalid argument: NewMerger: nil *Locker", ErrInvalidArgument)
	}
	if err := l.groupArgs("NewMerger", "", db, fn == nil); err != nil {
		return nil, err
	}
	return &Merger[Req, Res]{l: l, db: db, fn: fn}, nil
}

// Do queues req for key and returns its result once its group committed,
// with a nil error exactly then. A ctx that ends before the group's fn
// starts takes req out (an error matching [ErrNotAcquired] and ctx.Err());
// once fn has started, Do waits for the group's outcome whatever ctx does.
// fn's error, a wrong number of results, a panic of fn (which goes on in
// the goroutine that ran it; the others get an error), or a COMMIT that
// failed fail every request of the group, and nothing of it is committed,
// except that a COMMIT that got no answer gives every request an error
// matching [ErrCommitUnknown] (the group may have committed); see
// [Locker.DoBatch] for the rest of the contract, which Do shares. An
// empty key returns an error matching [ErrInvalidKey].
func (m *Merger[Req, Res]) Do(ctx context.Context, key string, req Req) (Res, error) {
	var zero Res
	if ctx == nil {
		panic("namedlock: nil Context")
	}
	if key == "" {
		return zero, errEmptyKey
	}
	l := m.l
	if err := l.cfg.fence.verify(ctx); err != nil {
		return zero, err
	}
	if err := ctx.Err(); err != nil {
		return zero, notAcquired(ctx, key, nil)
	}
	gk := groupKey{owner: m, key: key}
	wctx, stop := waitCtx(ctx)
	defer stop()
	mb := newMember(wctx, key, req)
	if err := l.enqueue(gk, mb, groupRunner{db: m.db, call: "Merger", merge: true}); err != nil {
		return zero, err
	}
	g, err := l.await(gk, mb)
	if err != nil {
		return zero, err
	}
	if t := g.turn; t != nil {
		m.runGroup(key, mb, t)
		g = <-mb.ch
	}
	if g.err != nil {
		return zero, g.err
	}
	res, _ := g.res.(Res)
	return res, nil
}

// runGroup runs fn for the group whose turn came to mb, and reports how it
// ended to the worker; a panic of fn goes on after that.
func (m *Merger[Req, Res]) runGroup(key string, mb *member, t *groupTurn) {
	ended := false
	defer func() {
		if !ended {
			mb.back <- sectionEnd{panicked: true}
		}
	}()
	reqs := make([]Req, len(t.members))
	for i, x := range t.members {
		reqs[i], _ = x.req.(Req)
	}
	res, err := m.fn(t.ctx, t.tx, key, reqs)
	ended = true
	var out []any
	if err == nil {
		out = make([]any, len(res))
		for i, r := range res {
			out[i] = r
		}
	}
	mb.back <- sectionEnd{err: err, res: out}
}
