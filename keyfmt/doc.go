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
// The '#' is deliberately outside the portable alphabet, so a mapped name
// never equals a portable one. Mapped names are still ASCII, lowercase and
// at most MaxLen bytes, so every server treats them identically. They are
// not themselves portable, but Portable is idempotent: it returns a mapped
// name unchanged, so applying it to a name it returned is harmless. Two
// distinct inputs therefore share a lock name only when one is the other's
// mapped name (the same lock, on purpose) or their hashes collide in those
// 100 bits.
//
// The mapping is a stable format, not an implementation detail: processes
// that lock the same key must compute the same name, even when they run
// different versions of this package. The tests pin exact outputs.
//
// # Keys and server names
//
// [Key] builds a key from a prefix and an identifier by joining them with
// ':', for example Key("product", 42) == "product:42" and
// Key("Product", 42) == "Product:42". It never maps. Key joins; the Locker
// maps: namedlock's Locker applies Portable exactly once to every key it is
// given, so the name the server sees for key k (in IS_USED_LOCK,
// SHOW PROCESSLIST, performance_schema.metadata_locks, and as Lock.Name) is
// always Portable(k):
//
//	key "product:42"  server name "product:42"
//	key "Product:42"  server name "product:42#4kbjxyi65uadq45vjbmj"
//
// A portable key is its own server name, so another program's plain
// SELECT GET_LOCK('product:42', ...) excludes a Locker holding the key
// "product:42". A program that takes the same lock with raw SQL must in
// general use Portable(Key(...)) as the name.
//
// Portable does not reject anything. In particular Portable("") returns a
// mapped name ("#" followed by the hash); callers that consider an empty key
// an error must check for it themselves before calling Portable.
package keyfmt
