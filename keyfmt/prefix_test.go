package keyfmt_test

import (
	"testing"

	"github.com/namedlock/mysql/keyfmt"
)

func TestPrefix(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{keyfmt.Key("product", 42), "product"},
		{"order:7:line:2", "order"},
		{":42", ""},
		{"nightly-report", ""}, // no ':': never the key itself
		{"", ""},
	} {
		if got := keyfmt.Prefix(c.key); got != c.want {
			t.Errorf("Prefix(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}
