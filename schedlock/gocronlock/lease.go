package gocronlock

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-co-op/gocron/v2"

	"github.com/namedlock/mysql/schedlock"
)

// LeaseOptions are the durations, with ShedLock's meanings, of the lease
// that NewLeaseLocker's Lock takes for each run. Name the fields
// (go vet flags a literal of this type that does not): two durations in a
// row are easy to swap.
type LeaseOptions struct {
	// LockAtMostFor is how long the lease lasts if its holder never
	// unlocks it (it crashed): the longest a crashed holder blocks the job.
	// It must be at least 1ms, and longer than the job's longest run unless
	// KeepAlive is set (gocron drops the Unlock error that would report an
	// overlap).
	LockAtMostFor time.Duration
	// LockAtLeastFor is how long, from the start of the run, the job stays
	// locked after a fast run: a little less than the job's interval and
	// more than the skew between instances' ticks, so that an instance
	// whose tick fires late skips it. 0 unlocks at the end of the run; it
	// must not exceed LockAtMostFor.
	LockAtLeastFor time.Duration
	// KeepAlive, if positive, extends the lease every KeepAlive while the
	// run goes on (schedlock.Config.KeepAlive), so a run may outlive
	// LockAtMostFor and other instances still skip the job until it ends;
	// a crashed holder still frees it after LockAtMostFor. It must be
	// shorter than LockAtMostFor (LockAtMostFor/3 is a good value); 0
	// disables it. gocron gives the Locker no way to stop a run whose
	// lease was lost: the run goes on, and its Unlock error, which says so,
	// is dropped by gocron.
	KeepAlive time.Duration
}

// NewLeaseLocker returns a gocron.Locker that takes each run's lock in p's
// ShedLock table: Lock is (*schedlock.Provider).Lock with the job's name
// (mapped by LeaseName) and o's durations, and fails with an error matching
// schedlock.ErrLocked while another instance holds the job, so gocron skips
// the run; Unlock is ShedLock's unlock (lock_until =
// max(locked_at + LockAtLeastFor, now)) of that run's lease only.
//
// Lock also fails with an error matching schedlock.ErrLocked while this
// Locker's previous run of the job has not been unlocked: a run that
// outlives the job's period makes the next tick on the same instance skip,
// as gocron.WithSingletonMode(gocron.LimitModeReschedule) does, instead of
// running beside it once LockAtMostFor has passed. Runs on other instances
// are kept out by the lease alone, so give a job that may run longer than
// LockAtMostFor a KeepAlive.
//
//	locker, err := gocronlock.NewLeaseLocker(provider, gocronlock.LeaseOptions{
//		LockAtMostFor:  10 * time.Minute,
//		LockAtLeastFor: 30 * time.Second,
//	})
//
// It returns an error matching schedlock.ErrInvalidArgument if p is nil,
// and one matching schedlock.ErrInvalidConfig if o is out of range
// (LockAtMostFor at least 1ms, 0 <= LockAtLeastFor <= LockAtMostFor,
// 0 <= KeepAlive < LockAtMostFor; a zero LeaseOptions is out of range).
func NewLeaseLocker(p *schedlock.Provider, o LeaseOptions) (gocron.Locker, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: gocronlock: NewLeaseLocker: nil *schedlock.Provider", schedlock.ErrInvalidArgument)
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("%w: gocronlock: NewLeaseLocker: %v", schedlock.ErrInvalidConfig, err)
	}
	return &leaseLocker{p: p, o: o, running: map[string]bool{}}, nil
}

// validate checks o by the rules of schedlock.Config.Validate, which each
// Lock applies again with the job's name.
func (o LeaseOptions) validate() error {
	switch {
	case o.LockAtMostFor < time.Millisecond:
		return fmt.Errorf("LeaseOptions.LockAtMostFor must be at least 1ms, got %v", o.LockAtMostFor)
	case o.LockAtLeastFor < 0:
		return fmt.Errorf("LeaseOptions.LockAtLeastFor must not be negative, got %v", o.LockAtLeastFor)
	case o.LockAtLeastFor > o.LockAtMostFor:
		return fmt.Errorf("LeaseOptions.LockAtLeastFor (%v) must not exceed LockAtMostFor (%v)", o.LockAtLeastFor, o.LockAtMostFor)
	case o.KeepAlive < 0:
		return fmt.Errorf("LeaseOptions.KeepAlive must not be negative, got %v", o.KeepAlive)
	case o.KeepAlive > 0 && o.KeepAlive >= o.LockAtMostFor:
		return fmt.Errorf("LeaseOptions.KeepAlive (%v) must be shorter than LockAtMostFor (%v)", o.KeepAlive, o.LockAtMostFor)
	}
	return nil
}

type leaseLocker struct {
	p *schedlock.Provider
	o LeaseOptions

	mu      sync.Mutex
	running map[string]bool // row names whose run has not been unlocked
}

// Lock implements gocron.Locker.
func (l *leaseLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	name := LeaseName(key)
	l.mu.Lock()
	if l.running[name] {
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: gocronlock: job %q: this instance's previous run has not ended; this run is skipped "+
			"(see NewLeaseLocker)", schedlock.ErrLocked, key)
	}
	l.running[name] = true
	l.mu.Unlock()
	lease, err := l.p.Lock(ctx, schedlock.Config{
		Name:           name,
		LockAtMostFor:  l.o.LockAtMostFor,
		LockAtLeastFor: l.o.LockAtLeastFor,
		KeepAlive:      l.o.KeepAlive,
	})
	if err != nil {
		l.ended(name)
		return nil, err
	}
	return &leaseLock{lease: lease, ended: func() { l.ended(name) }}, nil
}

func (l *leaseLocker) ended(name string) {
	l.mu.Lock()
	delete(l.running, name)
	l.mu.Unlock()
}

type leaseLock struct {
	lease *schedlock.Lease
	once  sync.Once
	ended func()
}

// Unlock implements gocron.Lock. It is not cut short by ctx's cancellation
// (gocron passes the job's context, cancelled at shutdown); the Provider's
// unlock timeout bounds it. It unlocks this run's lease only, and only
// while it has not run out: a lease that ran out (whether or not it was
// taken again since, by another instance or by this one) is left as it is,
// with an error matching schedlock.ErrLeaseLost.
func (l *leaseLock) Unlock(ctx context.Context) error {
	err := l.lease.Unlock(ctx)
	l.once.Do(l.ended)
	return err
}

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
