package lockconn_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/lockconn"
)

// The driver accepts a DriverLog as its logger.
var _ mysql.Logger = (*lockconn.DriverLog)(nil)

// TestDriverLog: a DriverLog counts every line and keeps the last 8, oldest
// first, formatted as the driver's own logger would (fmt.Sprint), and is
// safe for concurrent use.
func TestDriverLog(t *testing.T) {
	t.Parallel()
	var l lockconn.DriverLog
	if n, last := l.Lines(); n != 0 || len(last) != 0 {
		t.Fatalf("empty log: %d, %q", n, last)
	}
	for i := range 10 {
		l.Print("packets.go:58 ", fmt.Errorf("line %d", i))
	}
	n, last := l.Lines()
	want := []string{}
	for i := 2; i < 10; i++ {
		want = append(want, fmt.Sprintf("packets.go:58 line %d", i))
	}
	if n != 10 || !slices.Equal(last, want) {
		t.Errorf("Lines() = %d, %q; want 10, %q", n, last, want)
	}
	last[0] = "changed"
	if _, again := l.Lines(); again[0] == "changed" {
		t.Error("Lines returns the log's own slice")
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				l.Print("x")
				_, _ = l.Lines()
			}
		})
	}
	wg.Wait()
	if n, _ := l.Lines(); n != 410 {
		t.Errorf("count after concurrent prints = %d, want 410", n)
	}
}
