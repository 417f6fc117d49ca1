// Package keyfmt turns arbitrary strings into MySQL named-lock names that
// mean the same thing on every server this module supports.
//
// The servers disagree about lock names. MySQL 8 converts the name to
// utf8mb3 (rejecting 4-byte characters), lowercases it and allows at most 64
// characters; MariaDB compares raw bytes case-sensitively and allows 192
// bytes; go-mysql-server compares raw strings and has no limit. So "Job" and
// "job" are one lock on MySQL and two on MariaDB, and a 70-character name
// works on MariaDB but fails on MySQL.
//
// A name is portable (see [IsPortable]) when it is 1 to [MaxLen] bytes drawn
// from the alphabet
//
//	a-z 0-9 - _ . : /
//
// Such a name is ASCII, valid utf8mb3 and lowercase, so MySQL's case folding
// and MariaDB's byte comparison agree on it. [Portable] returns portable
// names unchanged and maps every other string to a deterministic name of the
// form
//
//	readable-prefix#hash
//
// where the readable prefix is the input with A-Z lowercased and any byte
// outside the alphabet replaced by '_', truncated so that the whole name fits
// in MaxLen bytes, and hash is the first 20 characters (100 bits) of the
// lowercase, unpadded base32 encoding of the SHA-256 of the raw input bytes.
// The '#' is deliberately outside the portable alphabet: a mapped name can
// never equal a name returned unchanged, so two distinct inputs never share a
// lock name unless their hashes collide in those 100 bits. Mapped names are
// still ASCII, lowercase and at most MaxLen bytes, so every server treats them
// identically; they are not themselves portable, and calling Portable on a
// mapped name maps it again to a different name. Apply Portable exactly once,
// to the original key.
//
// The mapping is a stable format, not an implementation detail: processes
// that lock the same key must compute the same name, even when they run
// different versions of this package. The tests pin exact outputs.
//
// [Key] builds a name from a prefix and an identifier, for example
// Key("product", 42) == "product:42".
//
// Portable does not reject anything. In particular Portable("") returns a
// mapped name ("#" followed by the hash); callers that consider an empty key
// an error must check for it themselves before calling Portable or Key.
package keyfmt
