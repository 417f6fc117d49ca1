package lockconn

import (
	"fmt"
	"sync"
)

// keptLines is how many of the driver's last log lines a DriverLog keeps.
const keptLines = 8

// DriverLog takes the place of the driver's logger for the connections of
// one lock pool: pool.Open sets it as the driver's Config.Logger (whose
// interface, Print, it implements) and gives it to the pool's [Connector].
// go-sql-driver/mysql logs, by default to the process's stderr, a
// connection that broke under a statement ("packets.go:58 unexpected EOF")
// and then returns an error for it, which namedlock reports in words (a
// lost lock) or database/sql retries on another connection: a lock pool
// must not write to the application's stderr, whose log is the
// application's own. A DriverLog keeps only the count and the last few
// lines. It is safe for concurrent use.
type DriverLog struct {
	mu    sync.Mutex
	count int64
	last  []string // at most keptLines, oldest first
}

// Print records one line of the driver's log.
func (l *DriverLog) Print(v ...any) {
	line := fmt.Sprint(v...)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count++
	if len(l.last) == keptLines {
		copy(l.last, l.last[1:])
		l.last = l.last[:keptLines-1]
	}
	l.last = append(l.last, line)
}

// Lines returns how many lines the driver logged, and the last of them
// (at most 8, oldest first).
func (l *DriverLog) Lines() (count int64, last []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count, append([]string(nil), l.last...)
}
