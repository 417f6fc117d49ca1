package namedlock

// BatchPending counts the callers of l's DoBatch and Mergers queued for a
// group (not yet taken into one): for tests that line callers up.
func BatchPending(l *Locker) int {
	l.batch.mu.Lock()
	defer l.batch.mu.Unlock()
	n := 0
	for _, gq := range l.batch.queues {
		n += len(gq.pending)
	}
	return n
}
