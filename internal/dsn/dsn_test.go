package dsn

import (
	"errors"
	"strings"
	"testing"
)

// TestParseNeverQuotes: for DSNs that the driver refuses, or would split
// inside the password, Parse's error is an *Error holding no piece of the
// password; a good DSN parses.
func TestParseNeverQuotes(t *testing.T) {
	pieces := []string{"Zx9qA1", "wR7tB2"}
	secret := strings.Join(pieces, "/")
	for _, dsn := range []string{
		"app:" + secret + "@tcp(h:3306)",
		"app:" + secret + "@tcp(h:3306)?timeout=1s",
		"app:" + secret + "@tcp(h:3306",
		"app:Zx9qA1@tcp(h:3306)/db?timeout=wR7tB2",
		"app:Zx9qA1@tcp(h:3306)/db?x=%zzwR7tB2",
		"mysql://app:Zx9qA1@h/wR7tB2",
		"",
	} {
		_, err := Parse(dsn)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, want an *Error", dsn, err)
			continue
		}
		for _, p := range pieces {
			if strings.Contains(err.Error(), p) {
				t.Errorf("Parse(%q): %q quotes %q", dsn, err, p)
			}
		}
	}
	cfg, err := Parse("app:" + secret + "@tcp(h:3306)/db")
	if err != nil || cfg.Passwd != secret || cfg.Addr != "h:3306" || cfg.DBName != "db" {
		t.Errorf("Parse of a good DSN = %+v, %v", cfg, err)
	}
}

// TestRedact: every occurrence of the password, as written or URL-escaped,
// goes; an empty password changes nothing.
func TestRedact(t *testing.T) {
	const pw = "p/w d"
	got := Redact("a p/w d b p%2Fw+d c p%2Fw%20d", pw)
	if strings.Contains(got, "p/w") || strings.Contains(got, "p%2F") {
		t.Errorf("Redact = %q", got)
	}
	if got := Redact("unchanged", ""); got != "unchanged" {
		t.Errorf("Redact with no password = %q", got)
	}
}
