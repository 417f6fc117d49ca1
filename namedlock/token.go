package namedlock

import (
	"context"
	"slices"

	"github.com/namedlock/mysql/keyfmt"
)

// The fencing token of a section's lock reaches fn through its ctx.

// tokenKey is the context key under which fn's ctx carries its locks.
type tokenKey struct{}

// withLocks returns ctx carrying a copy of locks, then the locks ctx
// already carries (an enclosing section's), for TokenFromContext (a copy,
// so that the caller's slice stays on its stack without fencing).
func withLocks(ctx context.Context, locks []*Lock) context.Context {
	return context.WithValue(ctx, tokenKey{}, nestLocks(ctx, locks))
}

// nestLocks returns a new slice of locks followed by those ctx carries:
// a nested section's ctx carries its own locks first, then its enclosing
// sections'.
func nestLocks(ctx context.Context, locks []*Lock) []*Lock {
	outer, _ := ctx.Value(tokenKey{}).([]*Lock)
	return append(slices.Clip(slices.Clone(locks)), outer...)
}

// TokenFromContext returns the fencing token of the lock on key held by
// the Do, TryDo, DoTx or DoMulti whose fn received ctx (or a ctx derived
// from it), and true; in a [Locker.DoBatch] section, that section's own
// token, and in a [Merger]'s fn, the first of its group's tokens (request
// i has the first plus i). key is the key given to that call (for DoMulti, any
// one of its keys; a key with the same server name as one of them, see
// [keyfmt.Portable], names the same lock). It returns 0 and false without
// fencing ([WithFencing]), outside such a fn, when key is not one of the
// call's keys, and in a DoTx before its token is minted. Acquire's callers
// read [Lock.Token].
//
// Sections nest: when a fn passes its ctx (or one derived from it) to
// another Do, TryDo, DoTx, DoMulti or DoBatch, the inner fn's ctx carries the
// inner call's locks and then every enclosing call's, so TokenFromContext
// answers for the keys of the enclosing calls too (the innermost call's lock
// first, when two calls name the same key).
func TokenFromContext(ctx context.Context, key string) (uint64, bool) {
	locks, _ := ctx.Value(tokenKey{}).([]*Lock)
	if len(locks) == 0 {
		return 0, false
	}
	k := lockFor(locks, key)
	if k == nil {
		return 0, false
	}
	t := k.Token()
	return t, t != 0
}

// lockFor returns the lock of locks on key: the one acquired with key
// itself, else the one with key's server name; nil if there is none.
func lockFor(locks []*Lock, key string) *Lock {
	for _, k := range locks {
		if k.key == key {
			return k
		}
	}
	name := keyfmt.Portable(key)
	for _, k := range locks {
		if k.Name() == name {
			return k
		}
	}
	return nil
}
