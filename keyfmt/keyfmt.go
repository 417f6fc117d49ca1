package keyfmt

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strconv"
)

// MaxLen is the length in bytes of the longest name that [Portable]
// returns. Every name it returns is ASCII, so MaxLen is also its length in
// characters, which is MySQL 8's limit for lock names. ([Key] only joins,
// so its result may be longer.)
const MaxLen = 64

const (
	// sep separates the readable prefix of a mapped name from its hash. It is
	// not in the plain alphabet, so a mapped name never equals a plain one.
	sep = '#'
	// hashLen is the number of base32 characters of the hash: 100 bits.
	hashLen = 20
	// maxPrefix is the longest readable prefix of a mapped name.
	maxPrefix = MaxLen - 1 - hashLen
)

// b32 is lowercase base32 (RFC 4648 alphabet, lowercased) without padding.
var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// allowed reports whether c is in the plain alphabet a-z 0-9 - _ . : /.
func allowed(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	case c == '-', c == '_', c == '.', c == ':', c == '/':
		return true
	}
	return false
}

// inBase32 reports whether c is a character of the hash's lowercase base32.
func inBase32(c byte) bool {
	return 'a' <= c && c <= 'z' || '2' <= c && c <= '7'
}

// IsPortable reports whether name is a server name as it is, the same on
// every supported server: whether [Portable] returns it unchanged. That is
// a plain name, 1 to [MaxLen] bytes each one of a-z, 0-9, '-', '_', '.',
// ':' or '/', or a name of the shape Portable maps other strings to: at
// most 43 bytes of that alphabet, '#' and 20 characters of lowercase
// base32 (a-z, 2-7). Every name Portable returns is portable.
func IsPortable(name string) bool {
	return isPlain(name) || isMapped(name)
}

// isPlain reports whether name is 1 to MaxLen bytes of the plain alphabet.
func isPlain(name string) bool {
	if len(name) == 0 || len(name) > MaxLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !allowed(name[i]) {
			return false
		}
	}
	return true
}

// isMapped reports whether name has the shape of a mapped name: at most
// maxPrefix bytes of the plain alphabet, sep, and hashLen characters of
// lowercase base32.
func isMapped(name string) bool {
	if len(name) < 1+hashLen || len(name) > MaxLen {
		return false
	}
	at := len(name) - hashLen - 1
	if name[at] != sep {
		return false
	}
	for i := 0; i < at; i++ {
		if !allowed(name[i]) {
			return false
		}
	}
	for i := at + 1; i < len(name); i++ {
		if !inBase32(name[i]) {
			return false
		}
	}
	return true
}

// Portable returns a lock name for name that every supported server treats
// the same way. It is idempotent: Portable(Portable(s)) == Portable(s).
//
// If [IsPortable](name) is true (a plain name, or one Portable returned),
// Portable returns name itself and allocates nothing. Otherwise it returns
// name mapped to "prefix#hash": prefix is name with A-Z lowercased and
// every other byte outside the plain alphabet replaced by '_', cut to fit,
// and hash is the first 20 characters of the lowercase unpadded base32
// encoding of SHA-256(name). The result is deterministic, at most [MaxLen]
// bytes, ASCII and lowercase. Two inputs share a result only when one of
// them is that result itself (a string of the mapped shape, returned
// unchanged) or their hashes collide in 100 bits; the package
// documentation says why that is the chosen trade.
//
// Portable("") returns a mapped name; callers that must reject empty keys
// should do so before calling it.
func Portable(name string) string {
	if isPlain(name) || isMapped(name) {
		return name
	}
	// Copy into a stack buffer: unlike []byte(name), this does not allocate
	// for names up to len(buf) bytes.
	var buf [128]byte
	return mapped(append(buf[:0], name...))
}

// mapped returns the "prefix#hash" form of name. It does not retain name.
func mapped(name []byte) string {
	sum := sha256.Sum256(name)
	var enc [52]byte // b32.EncodedLen(sha256.Size)
	b32.Encode(enc[:], sum[:])

	var out [MaxLen]byte
	n := min(len(name), maxPrefix)
	for i := 0; i < n; i++ {
		c := name[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case !allowed(c):
			c = '_'
		}
		out[i] = c
	}
	out[n] = sep
	n++
	n += copy(out[n:], enc[:hashLen])
	return string(out[:n])
}

// Key returns the key prefix + ":" + s, where s is id formatted as follows.
// A string is used as is, a []byte as its contents, any int or uint kind
// (including uintptr) in decimal, a [fmt.Stringer] by calling its String
// method (directly: unlike fmt, Key does not recover from a String method
// that panics on a nil receiver), and anything else with [fmt.Sprint].
//
// Key joins; the Locker maps: Key never changes a character and never
// shortens, whatever prefix and id contain, and the server name of a key is
// Portable(key), computed once by namedlock's Locker. Key("product", 42)
// returns "product:42", which is portable, so it is also the server name.
// Key("Product", 42) returns "Product:42", whose server name is
// Portable("Product:42"), "product:42#4kbjxyi65uadq45vjbmj". A program that
// takes the same lock with raw SQL must use Portable(Key(...)):
//
//	SELECT GET_LOCK('product:42#4kbjxyi65uadq45vjbmj', 10)
//
// Since Portable is idempotent, a Locker given that server name as a key
// takes the same lock.
//
// For string, []byte and integer ids whose joined key is at most 128 bytes
// long, Key allocates only its result.
func Key(prefix string, id any) string {
	var buf [128]byte
	b := append(buf[:0], prefix...)
	b = append(b, ':')
	switch v := id.(type) {
	case string:
		b = append(b, v...)
	case []byte:
		b = append(b, v...)
	case int:
		b = strconv.AppendInt(b, int64(v), 10)
	case int8:
		b = strconv.AppendInt(b, int64(v), 10)
	case int16:
		b = strconv.AppendInt(b, int64(v), 10)
	case int32:
		b = strconv.AppendInt(b, int64(v), 10)
	case int64:
		b = strconv.AppendInt(b, v, 10)
	case uint:
		b = strconv.AppendUint(b, uint64(v), 10)
	case uint8:
		b = strconv.AppendUint(b, uint64(v), 10)
	case uint16:
		b = strconv.AppendUint(b, uint64(v), 10)
	case uint32:
		b = strconv.AppendUint(b, uint64(v), 10)
	case uint64:
		b = strconv.AppendUint(b, v, 10)
	case uintptr:
		b = strconv.AppendUint(b, uint64(v), 10)
	case fmt.Stringer:
		b = append(b, v.String()...)
	default:
		b = append(b, fmt.Sprint(v)...)
	}
	return string(b)
}
