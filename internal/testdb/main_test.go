package testdb

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain is Main plus a goroutine-leak check after Stop: nothing testdb
// starts may outlive it.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: %v\n", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
