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
// A plain name is 1 to [MaxLen] bytes drawn from the alphabet
//
//	a-z 0-9 - _ . : /
//
// Such a name is ASCII, valid utf8mb3 and lowercase, so MySQL's case folding
// and MariaDB's byte comparison agree on it. [Portable] returns plain names
// unchanged and maps every other string to a deterministic name of the
// form
//
//	readable-prefix#hash
//
// where the readable prefix is the input with A-Z lowercased and any byte
// outside the alphabet replaced by '_', truncated so that the whole name fits
// in MaxLen bytes, and hash is the first 20 characters (100 bits) of the
// lowercase, unpadded base32 encoding of the SHA-256 of the raw input bytes.
// The '#' is outside the plain alphabet, so a mapped name never equals a
// plain one. Mapped names are ASCII, lowercase and at most MaxLen bytes, so
// every server treats them identically.
//
// A name is portable ([IsPortable]) when Portable returns it unchanged: a
// plain name, or one of the mapped shape (at most 43 bytes of the alphabet,
// '#', 20 characters of a-z and 2-7). Every name Portable returns is
// portable, so Portable is idempotent: Portable(Portable(s)) ==
// Portable(s). A server name copied from the process list, IS_USED_LOCK or
// Lock.Name and used as a key names the same lock.
//
// # Idempotent, not collision-proof against crafted keys
//
// Idempotency has a price: a string that already has the mapped shape is
// its own name, so a key crafted as "product:42#4kbjxyi65uadq45vjbmj" takes
// the lock of the key "Product:42". Both cannot hold at once — a fixed point
// of Portable is such a crafted key — and this package chooses idempotency.
// The server's lock name space is shared by every session, and any client
// may call GET_LOCK on any name with raw SQL, so the mapping was never a
// boundary between keys: it keeps apart keys that servers would otherwise
// fold together (case, length, encoding), not keys chosen to meet. Keys
// that do not have the mapped shape never share a name unless their
// 100-bit hashes collide. Where keys come from untrusted input, refuse a
// '#' in it (no key without '#' has the mapped shape), or join it under a
// fixed prefix with [Key], so that a crafted key can meet only keys under
// the same prefix.
//
// # Which keys changed name with idempotency
//
// Before Portable became idempotent, it mapped every non-plain string,
// including one of the mapped shape. Exactly the keys of the mapped shape
// (at most 43 bytes of the plain alphabet, '#', then 20 characters of a-z
// and 2-7) now lock a different server name than before: themselves, where
// they locked "prefix#hash" of themselves. Every other key keeps its server
// name. Such keys are not only crafted ones: "<kind>#<id>" with a
// 20-character lowercase ID of that alphabet has the shape, for instance a
// base32hex ID (github.com/rs/xid's format) that happens to contain no 0,
// 1, 8 or 9 (about 7% of them). Do not run versions of this package from
// before and after the change side by side on such keys: they would lock
// different names for the same key and both hold it. Stop the old version
// before the new one takes those keys (or give such keys a character
// outside the shape, such as an upper-case letter, ahead of the upgrade).
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
// maps: namedlock's Locker applies Portable to every key it is given, so
// the name the server sees for key k (in IS_USED_LOCK,
// SHOW PROCESSLIST, performance_schema.metadata_locks, and as Lock.Name) is
// always Portable(k):
//
//	key "product:42"  server name "product:42"
//	key "Product:42"  server name "product:42#4kbjxyi65uadq45vjbmj"
//
// A portable key is its own server name, so another program's plain
// SELECT GET_LOCK('product:42', ...) excludes a Locker holding the key
// "product:42". A program that takes the same lock with raw SQL must in
// general use Portable(Key(...)) as the name; a Locker given that name as
// its key takes the same lock.
//
// Portable does not reject anything. In particular Portable("") returns a
// mapped name ("#" followed by the hash); callers that consider an empty key
// an error must check for it themselves before calling Portable.
package keyfmt
