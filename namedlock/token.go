package namedlock

import (
	"context"
	"slices"
)

// The fencing token of a section's lock reaches fn through its ctx.

// tokenKey is the context key under which fn's ctx carries its locks.
type tokenKey struct{}

// withLocks returns ctx carrying a copy of locks, for TokenFromContext (a
// copy, so that the caller's slice stays on its stack without fencing).
func withLocks(ctx context.Context, locks []*Lock) context.Context {
	return context.WithValue(ctx, tokenKey{}, slices.Clone(locks))
}

// TokenFromContext returns the fencing token of the lock held by the Do,
// TryDo or DoTx whose fn received ctx (or a ctx derived from it), and true;
// 0 and false without fencing, outside such a fn, and in DoMulti with more
// than one key (use [KeyTokenFromContext]).
func TokenFromContext(ctx context.Context) (uint64, bool) {
	locks, _ := ctx.Value(tokenKey{}).([]*Lock)
	if len(locks) != 1 {
		return 0, false
	}
	t := locks[0].Token()
	return t, t != 0
}

// KeyTokenFromContext returns the fencing token of the lock on key held by
// the Do, TryDo, DoTx or DoMulti whose fn received ctx, and true; 0 and
// false without fencing or when key is not one of its keys.
func KeyTokenFromContext(ctx context.Context, key string) (uint64, bool) {
	locks, _ := ctx.Value(tokenKey{}).([]*Lock)
	for _, k := range locks {
		if k.key == key {
			t := k.Token()
			return t, t != 0
		}
	}
	return 0, false
}
