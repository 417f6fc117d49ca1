package namedlock_test

import (
	"testing"

	"github.com/namedlock/mysql/internal/testdb"
)

// TestMain finds the test server once (named in every test's output by
// testdb.Get) and stops whatever it had to start.
func TestMain(m *testing.M) {
	testdb.Main(m)
}
