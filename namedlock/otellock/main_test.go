package otellock_test

import (
	"testing"

	"github.com/namedlock/mysql/internal/testdb"
)

// TestMain finds the test server once, and checks that no goroutine
// outlives the tests.
func TestMain(m *testing.M) { testdb.Main(m) }
