package holders_test

import (
	"testing"

	"github.com/namedlock/mysql/internal/mariadbtest"
	"github.com/namedlock/mysql/internal/testdb"
)

// TestMain finds the test server once, removes the private servers'
// datadir template, and checks that no goroutine outlives the tests.
func TestMain(m *testing.M) { testdb.Main(m, mariadbtest.RemoveTemplate) }
