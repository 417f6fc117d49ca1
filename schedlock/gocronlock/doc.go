// Package gocronlock adapts this module's locks to gocron v2's distributed
// Locker (github.com/go-co-op/gocron/v2), so that a job every instance's
// scheduler fires runs on one instance per tick:
//
//	locker, err := gocronlock.NewLeaseLocker(provider, gocronlock.LeaseOptions{
//		LockAtMostFor:  10 * time.Minute,
//		LockAtLeastFor: 30 * time.Second,
//	})
//	...
//	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
//
// gocron calls Lock(ctx, jobName) before each run and skips the run if Lock
// returns an error (the error goes to the job's AfterLockError listener);
// it calls Unlock after the run and ignores its error.
//
// # Which one
//
// NewLeaseLocker (a schedlock.Provider, ShedLock's lease table) is the one
// for "run once per tick":
//
//   - LockAtLeastFor keeps a fast job locked after it finished, so an
//     instance whose tick fires a little later (clock skew, GC pause, busy
//     executor) does not run it again. Set it a bit shorter than the job's
//     interval and longer than the skew between instances.
//   - A crashed holder blocks the job until LockAtMostFor has passed, no
//     longer, and never forever.
//   - Times are the database's, so skewed application clocks do not matter
//     to the lock (they still shift when each scheduler fires).
//   - It needs the table (schedlock.Provider.CreateTable), is shared with
//     Java services using ShedLock's usingDbTime(), and costs two or three
//     short statements per tick and instance.
//   - LockAtMostFor must exceed the job's longest run, or LeaseOptions
//     must set KeepAlive: a run that outlives its lease may overlap with
//     another instance's next run, and gocron drops the Unlock error that
//     would say so. Each run's Unlock acts on that run's lease only, so a
//     late Unlock never ends a later run's lease.
//   - On one instance, a run that outlives the job's period makes the next
//     tick skip (Lock refuses while the Locker's previous run of the job
//     has not been unlocked), whatever gocron's mode. gocron's own
//     gocron.WithSingletonMode(gocron.LimitModeReschedule) on jobs that
//     may outlive their period does the same before the Locker is asked,
//     and says so in gocron's terms; it is recommended.
//
// NewNamedLocker (a namedlock.Locker, GET_LOCK) holds the lock exactly while
// the job runs:
//
//   - It needs no table, and the lock is freed the moment the holder's
//     session ends (process crash, network loss), with no LockAtMostFor to
//     choose; a job may run as long as it likes.
//   - It gives "never two runs at once", not "one run per tick": once a fast
//     job is done the lock is free, and an instance whose tick fires after
//     that runs the job again. Use it for jobs that take longer than the
//     skew between instances' ticks, or where an extra run is harmless.
//   - A try that takes longer than 500 ms skips the run: on TiDB, for a
//     user without the privileges of the Locker's fast try (SELECT and
//     UPDATE on mysql.advisory_locks), TryAcquire waits 1 s for a held lock
//     and would get it when another instance's run of the same tick ends.
//   - Named locks live in one server's memory: not replicated, lost on
//     failover, node-local on Galera. Keys are namespaced as
//     keyfmt.Key("gocron", jobName), so they do not collide with the
//     application's own named locks; the server name is
//     keyfmt.Portable of that key (see NamedKeyPrefix).
//
// # Job names
//
// gocron's lock key is the job's name, which defaults to the Go function's
// full name and is often longer than the 64 characters of ShedLock's name
// column. The lease locker keeps names of up to 64 characters unchanged
// (a Java service can share a job by naming it the same) and maps longer ones
// to a 64-character name ending in a hash (see LeaseName), so they neither
// fail nor collide. Give jobs short, stable names with gocron.WithName:
// the default changes when the code is refactored.
package gocronlock
