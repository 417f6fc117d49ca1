package testdb

import (
	"testing"
)

// TestMain runs Main: nothing testdb starts may outlive Stop.
func TestMain(m *testing.M) { Main(m) }
