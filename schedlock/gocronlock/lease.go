package gocronlock

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-co-op/gocron/v2"

	"github.com/namedlock/mysql/schedlock"
)

// NewLeaseLocker returns a gocron.Locker that takes each run's lock in p's
// ShedLock table: Lock is (*schedlock.Provider).Lock with the job's name
// (mapped by LeaseName) and the given durations, and fails with an error
// matching schedlock.ErrLocked while another instance holds the job, so
// gocron skips the run; Unlock is ShedLock's unlock (lock_until =
// max(locked_at + lockAtLeastFor, now)).
//
// It panics if p is nil or the durations are invalid (lockAtMostFor at
// least 1ms, 0 <= lockAtLeastFor <= lockAtMostFor), as they are fixed by
// the program.
func NewLeaseLocker(p *schedlock.Provider, lockAtMostFor, lockAtLeastFor time.Duration) gocron.Locker {
	if p == nil {
		panic("gocronlock: NewLeaseLocker with a nil *schedlock.Provider")
	}
	cfg := schedlock.Config{Name: "gocron", LockAtMostFor: lockAtMostFor, LockAtLeastFor: lockAtLeastFor}
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("gocronlock: NewLeaseLocker: %v", err))
	}
	return &leaseLocker{p: p, atMost: lockAtMostFor, atLeast: lockAtLeastFor}
}

type leaseLocker struct {
	p               *schedlock.Provider
	atMost, atLeast time.Duration
}

// Lock implements gocron.Locker.
func (l *leaseLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	lease, err := l.p.Lock(ctx, schedlock.Config{
		Name:           LeaseName(key),
		LockAtMostFor:  l.atMost,
		LockAtLeastFor: l.atLeast,
	})
	if err != nil {
		return nil, err
	}
	return leaseLock{lease}, nil
}

type leaseLock struct{ lease *schedlock.Lease }

// Unlock implements gocron.Lock. It is not cut short by ctx's cancellation
// (gocron passes the job's context, cancelled at shutdown); the Provider's
// unlock timeout bounds it.
func (l leaseLock) Unlock(ctx context.Context) error { return l.lease.Unlock(ctx) }

const hashLen = 20 // base32 characters: 100 bits of SHA-256

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// LeaseName returns the row name the lease locker uses for a gocron job
// name: key itself if it has at most schedlock.MaxNameLength characters,
// otherwise its first characters, '#' and 20 base32 characters of its
// SHA-256, 64 characters in all.
func LeaseName(key string) string {
	if utf8.RuneCountInString(key) <= schedlock.MaxNameLength {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	hash := strings.ToLower(b32.EncodeToString(sum[:]))[:hashLen]
	keep := schedlock.MaxNameLength - 1 - hashLen
	var b strings.Builder
	for rest := key; keep > 0 && rest != ""; keep-- {
		r, size := utf8.DecodeRuneInString(rest)
		if r == utf8.RuneError && size == 1 {
			r = '_' // invalid UTF-8: the hash keeps the names apart
		}
		b.WriteRune(r)
		rest = rest[size:]
	}
	return b.String() + "#" + hash
}
