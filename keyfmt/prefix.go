package keyfmt

import "strings"

// Prefix returns the prefix that [Key] joined into key: the text before its
// first ':', or "" when key has none. It never returns more of the key, so
// where keys are built with Key from a fixed set of prefixes it is a
// low-cardinality metric label (the metrics adapters' key-prefix option);
// Prefix(Key("product", 42)) is "product".
func Prefix(key string) string {
	p, _, ok := strings.Cut(key, ":")
	if !ok {
		return ""
	}
	return p
}
