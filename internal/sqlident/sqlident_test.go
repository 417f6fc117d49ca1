package sqlident

import (
	"errors"
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"shedlock", "`shedlock`"},
		{"jobs.shedlock", "`jobs`.`shedlock`"},
		{"A_1", "`A_1`"},
		{strings.Repeat("t", 64), "`" + strings.Repeat("t", 64) + "`"},
	} {
		if got, err := Quote(tc.in); err != nil || got != tc.want {
			t.Errorf("Quote(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", ".", "a.", ".a", "a.b.c", "a b", "a`b", "a;DROP", "a-b", "a$b", "é", strings.Repeat("t", 65)} {
		if got, err := Quote(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("Quote(%q) = %q, %v; want ErrInvalid", in, got, err)
		}
	}
}
