package namedlock_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// metricsModules are the module path prefixes that the core package must
// not import: the metrics adapters (promlock, otellock) bring them.
var metricsModules = []string{"github.com/prometheus/", "go.opentelemetry.io/"}

// TestCoreImportsNoMetrics: `go list -deps` of namedlock names no package of
// Prometheus or OpenTelemetry, while those of promlock and otellock do (so
// the check sees them where they are).
func TestCoreImportsNoMetrics(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	deps := func(pkg string) []string {
		out, err := exec.Command(goBin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	metrics := func(pkgs []string) []string {
		var found []string
		for _, p := range pkgs {
			if slices.ContainsFunc(metricsModules, func(m string) bool { return strings.HasPrefix(p, m) }) {
				found = append(found, p)
			}
		}
		return found
	}
	if found := metrics(deps(".")); len(found) > 0 {
		t.Errorf("namedlock depends on %v", found)
	}
	for _, adapter := range []string{"./promlock", "./otellock"} {
		if found := metrics(deps(adapter)); len(found) == 0 {
			t.Errorf("go list -deps %s names no metrics package: the check would see nothing", adapter)
		}
	}
}
