package keyfmt

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// checkMapped fails t unless out is a well-formed mapped name for in.
func checkMapped(t testing.TB, in, out string) {
	t.Helper()
	if len(out) > MaxLen {
		t.Fatalf("Portable(%q) = %q: %d bytes, want <= %d", in, out, len(out), MaxLen)
	}
	i := strings.IndexByte(out, sep)
	if i < 0 || strings.Count(out, "#") != 1 {
		t.Fatalf("Portable(%q) = %q: want exactly one %q", in, out, sep)
	}
	prefix, hash := out[:i], out[i+1:]
	if prefix != "" && !IsPortable(prefix) {
		t.Errorf("Portable(%q) = %q: prefix %q is not portable", in, out, prefix)
	}
	if want := min(len(in), maxPrefix); len(prefix) != want {
		t.Errorf("Portable(%q) = %q: prefix has %d bytes, want %d", in, out, len(prefix), want)
	}
	if want := refHash(in); hash != want {
		t.Errorf("Portable(%q) = %q: hash %q, want %q", in, out, hash, want)
	}
	if !IsPortable(out) || Portable(out) != out {
		t.Errorf("Portable(%q) = %q: a mapped name must be portable, its own name", in, out)
	}
}

// refHash is an independent, allocating implementation of the hash part.
func refHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:hashLen]
}

func TestIsPortable(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"a", true},
		{"product:42", true},
		{"jobs/nightly-report_v2.1", true},
		{"-_.:/", true},
		{"0123456789", true},
		{strings.Repeat("x", MaxLen), true},
		{"", false},
		{strings.Repeat("x", MaxLen+1), false},
		{"A", false},
		{"product:42 ", false},
		{"a#b", false},
		{"a\x00b", false},
		{"café", false},
		{"lock🔒", false},
		{"a'b", false},
		{"a\\b", false},
		{"a\nb", false},
		{"a%b", false},
		{"\xff", false},
		// The mapped shape: at most 43 bytes of the alphabet, '#', 20
		// characters of lowercase base32.
		{"product:42#4kbjxyi65uadq45vjbmj", true},
		{"#4oymiquy7qobjgx36tej", true},
		{strings.Repeat("x", maxPrefix) + "#4oymiquy7qobjgx36tej", true},    // 64 bytes
		{strings.Repeat("x", maxPrefix+1) + "#4oymiquy7qobjgx36tej", false}, // 65 bytes
		{"product:42#4KBJXYI65UADQ45VJBMJ", false},                          // upper-case hash
		{"Product:42#4kbjxyi65uadq45vjbmj", false},                          // upper-case prefix
		{"product 42#4kbjxyi65uadq45vjbmj", false},                          // space in the prefix
		{"product:42#4kbjxyi65uadq45vjbm", false},                           // 19 hash characters
		{"product:42#4kbjxyi65uadq45vjbmjj", false},                         // 21
		{"product:42#4kbjxyi65uadq45vjbm1", false},                          // '1' is not base32
		{"product:42#4kbjxyi65uadq45vjbm8", false},                          // nor '8'
		{"a#b#4kbjxyi65uadq45vjbmj", false},                                 // '#' in the prefix
		{"product:42#4kbjxyi65uadq45vjbmj#", false},                         // '#' at the end
		{"4kbjxyi65uadq45vjbmj#", false},                                    // hash before '#'
	}
	for _, tt := range tests {
		if got := IsPortable(tt.name); got != tt.want {
			t.Errorf("IsPortable(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	// Every byte value: only the 41 alphabet bytes are portable alone.
	n := 0
	for c := 0; c < 256; c++ {
		if IsPortable(string([]byte{byte(c)})) {
			n++
		}
	}
	if n != 26+10+5 {
		t.Errorf("%d single-byte names are portable, want 41", n)
	}
}

func TestPortableUnchanged(t *testing.T) {
	for _, name := range []string{
		"a",
		"product:42",
		"tenant/7/invoice-2024.03_final",
		strings.Repeat("z", MaxLen),
		strings.Repeat("0", MaxLen),
	} {
		if got := Portable(name); got != name {
			t.Errorf("Portable(%q) = %q, want it unchanged", name, got)
		}
	}
}

func TestPortableMapped(t *testing.T) {
	tests := []struct {
		desc string
		in   string
		want string // exact expected output; "" to check only the shape
	}{
		{"upper case", "Product:42", "product:42#4kbjxyi65uadq45vjbmj"},
		{"empty", "", "#4oymiquy7qobjgx36tej"},
		{"sql metacharacters", "'; DROP TABLE x; --", "___drop_table_x__--#vesmh73cdyk7lnqfvfhh"},
		{"2- and 4-byte utf-8", "café 🔒", "caf_______#4pp6an2mtcxxo7cpgopq"},
		{"emoji only", "🔒🔑", ""},
		{"nul byte", "a\x00b", ""},
		{"only nul", "\x00", ""},
		{"invalid utf-8", "\xff\xfe", ""},
		{"space", "my lock", ""},
		{"trailing space", "job ", ""},
		{"hash sign", "a#b", ""},
		{"looks mapped, upper-case hash", "product:42#4KBJXYI65UADQ45VJBMJ", ""},
		{"looks mapped, short hash", "product:42#4kbjxyi65uadq45vjbm", ""},
		{"looks mapped, 65 bytes", strings.Repeat("x", maxPrefix+1) + "#4oymiquy7qobjgx36tej", ""},
		{"65 bytes", strings.Repeat("x", MaxLen+1), ""},
		{"1000 bytes", strings.Repeat("ab", 500), ""},
		{"long upper", strings.Repeat("AB", 100), ""},
		{"long unicode", strings.Repeat("ü", 100), ""},
		{"backslash quote", `a\'b"c`, ""},
		{"percent underscore", "100%_done", ""},
		{"newline tab", "a\nb\tc", ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := Portable(tt.in)
			checkMapped(t, tt.in, got)
			if tt.want != "" && got != tt.want {
				t.Errorf("Portable(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if !isASCIILower(got) {
				t.Errorf("Portable(%q) = %q: not lowercase ASCII", tt.in, got)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Portable(%q) = %q: not valid UTF-8", tt.in, got)
			}
			if again := Portable(tt.in); again != got {
				t.Errorf("Portable(%q) not deterministic: %q then %q", tt.in, got, again)
			}
		})
	}
}

func TestPortableReadablePrefix(t *testing.T) {
	got := Portable("Orders/EU:Invoice 7")
	if want := "orders/eu:invoice_7#"; !strings.HasPrefix(got, want) {
		t.Errorf("got %q, want prefix %q", got, want)
	}
	long := strings.Repeat("a", 100)
	got = Portable(long)
	if want := strings.Repeat("a", maxPrefix) + "#"; !strings.HasPrefix(got, want) || len(got) != MaxLen {
		t.Errorf("Portable(100×a) = %q (%d bytes), want prefix %q and %d bytes", got, len(got), want, MaxLen)
	}
}

func TestPortableDistinct(t *testing.T) {
	pairs := [][2]string{
		{"A", "a"},           // MySQL would fold these together
		{"Job", "job"},       // likewise
		{"job ", "job"},      // trailing space
		{"a_b", "a b"},       // same readable prefix
		{"a\x00", "a_"},      // NUL maps to '_'
		{"é", "__"},          // 2-byte char maps to "__"
		{"", "#"},            // both mapped
		{"a#b", "a_b"},       // '#' is not portable
		{Portable("X"), "x"}, // mapped output vs its own prefix
		{strings.Repeat("k", 100) + "1", strings.Repeat("k", 100) + "2"}, // differ only in the tail
		{strings.Repeat("k", 65), strings.Repeat("k", 66)},               // differ only in length
		{strings.Repeat("k", MaxLen), strings.Repeat("k", MaxLen+1)},     // portable vs mapped
	}
	for _, p := range pairs {
		a, b := Portable(p[0]), Portable(p[1])
		if a == b {
			t.Errorf("Portable(%q) == Portable(%q) == %q", p[0], p[1], a)
		}
	}
}

// TestPortableIdempotent: a mapped name is its own name, and so is any
// string of the mapped shape; portable names are unchanged.
func TestPortableIdempotent(t *testing.T) {
	for _, in := range []string{"Upper", "", "café 🔒", strings.Repeat("Ab", 100), "a#b", "#", "Product:42"} {
		once := Portable(in)
		if twice := Portable(once); twice != once {
			t.Errorf("Portable(Portable(%q)) = %q, want %q", in, twice, once)
		}
	}
	for _, name := range []string{
		"lower",
		"product:42#4kbjxyi65uadq45vjbmj", // Portable("Product:42")
		"anything:at-all#aaaaaaaaaaaaaaaaaaaa",
		"#22222222222222222222",
	} {
		if got := Portable(name); got != name {
			t.Errorf("Portable(%q) = %q, want it unchanged", name, got)
		}
	}
}

type stringer struct{ s string }

func (s stringer) String() string { return s.s }

type myInt int // no String method: formatted by fmt.Sprint

type point struct{ X, Y int }

func TestKey(t *testing.T) {
	tests := []struct {
		prefix string
		id     any
		want   string
	}{
		{"product", 42, "product:42"},
		{"product", -42, "product:-42"},
		{"product", "abc", "product:abc"},
		{"product", []byte("abc"), "product:abc"},
		{"product", []byte(nil), "product:"},
		{"product", "", "product:"},
		{"n", int8(-128), "n:-128"},
		{"n", int16(-32768), "n:-32768"},
		{"n", int32(-2147483648), "n:-2147483648"},
		{"n", int64(-9223372036854775808), "n:-9223372036854775808"},
		{"n", uint(7), "n:7"},
		{"n", uint8(255), "n:255"},
		{"n", uint16(65535), "n:65535"},
		{"n", uint32(4294967295), "n:4294967295"},
		{"n", uint64(18446744073709551615), "n:18446744073709551615"},
		{"n", uintptr(9), "n:9"},
		{"n", myInt(5), "n:5"},
		{"s", stringer{"tenant/7"}, "s:tenant/7"},
		{"month", time.March, "month:March"},
		{"s", stringer{"Upper"}, "s:Upper"},
		{"Product", 42, "Product:42"},
		{"p", point{1, 2}, "p:{1 2}"},
		{"p", nil, "p:<nil>"},
		{"p", 1.5, "p:1.5"},
		{"p", true, "p:true"},
		{"", 1, ":1"},
		{strings.Repeat("x", 70), 1, strings.Repeat("x", 70) + ":1"},
		{"x", strings.Repeat("y", 200), "x:" + strings.Repeat("y", 200)},
	}
	for _, tt := range tests {
		if got := Key(tt.prefix, tt.id); got != tt.want {
			t.Errorf("Key(%q, %#v) = %q, want %q", tt.prefix, tt.id, got, tt.want)
		}
	}
}

// TestKeyNeverMaps: Key only joins prefix, ':' and the formatted id, byte for
// byte, whatever they contain and however long the result is. Mapping is
// the Locker's job (Portable, applied once).
func TestKeyNeverMaps(t *testing.T) {
	long := strings.Repeat("Ab", 100) // 200 bytes
	tests := []struct {
		desc   string
		prefix string
		id     any
		want   string
	}{
		{"upper prefix", "Product", 42, "Product:42"},
		{"upper id", "product", "ABC", "product:ABC"},
		{"space", "my lock", "a b", "my lock:a b"},
		{"trailing space", "job", "x ", "job:x "},
		{"hash sign", "a#b", "c#d", "a#b:c#d"},
		{"looks mapped", "product", "42#4kbjxyi65uadq45vjbmj", "product:42#4kbjxyi65uadq45vjbmj"},
		{"mapped id", "p", Portable("Product:42"), "p:product:42#4kbjxyi65uadq45vjbmj"},
		{"sql metacharacters", "'; DROP TABLE x; --", `\'"`, `'; DROP TABLE x; --:\'"`},
		{"nul", "a\x00", []byte("b\x00"), "a\x00:b\x00"},
		{"invalid utf-8", "\xff", []byte{0xfe}, "\xff:\xfe"},
		{"empty", "", "", ":"},
		{"2- and 4-byte utf-8", "café", "🔒", "café:🔒"},
		{"non-ascii stringer", "s", stringer{"ключ 商品"}, "s:ключ 商品"},
		{"fmt.Sprint", "P", point{-1, 2}, "P:{-1 2}"},
		{"65 bytes", strings.Repeat("k", 62), 1, strings.Repeat("k", 62) + ":1"},
		{"200-char string id", "x", long, "x:" + long},
		{"200-char []byte id", "x", []byte(long), "x:" + long},
		{"200-char stringer id", "x", stringer{long}, "x:" + long},
		{"200-char prefix", long, 7, long + ":7"},
		{"200-char non-ascii id", "u", strings.Repeat("ü", 100), "u:" + strings.Repeat("ü", 100)},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := Key(tt.prefix, tt.id); got != tt.want {
				t.Errorf("Key(%q, %#v) = %q, want the plain join %q", tt.prefix, tt.id, got, tt.want)
			}
		})
	}
}

// TestKeyNonASCII: Key keeps non-ASCII bytes as they are (valid UTF-8 stays
// valid, and its length is the sum of its parts); Portable of it is a
// mapped, ASCII, lowercase name of at most MaxLen bytes.
func TestKeyNonASCII(t *testing.T) {
	for _, tc := range [][2]string{
		{"商品", "café 🔒"},
		{"Ключ", "Ü"},
		{"emoji", "🔒🔑🚀"},
		{"é", strings.Repeat("é", 100)},
	} {
		k := Key(tc[0], tc[1])
		if k != tc[0]+":"+tc[1] || len(k) != len(tc[0])+1+len(tc[1]) || !utf8.ValidString(k) {
			t.Errorf("Key(%q, %q) = %q, want %q", tc[0], tc[1], k, tc[0]+":"+tc[1])
		}
		name := Portable(k)
		checkMapped(t, k, name)
		if !isASCIILower(name) {
			t.Errorf("Portable(Key(%q, %q)) = %q: not lowercase ASCII", tc[0], tc[1], name)
		}
	}
}

// TestKey200CharIDs: Key of a 200-character id is the whole 202-byte join;
// Portable maps it to MaxLen bytes, keeping a readable prefix, and ids
// that differ only in their last character stay apart.
func TestKey200CharIDs(t *testing.T) {
	id := strings.Repeat("y", 200)
	k := Key("x", id)
	if k != "x:"+id || len(k) != 202 {
		t.Fatalf("Key(x, 200×y) = %q (%d bytes), want %q", k, len(k), "x:"+id)
	}
	name := Portable(k)
	checkMapped(t, k, name)
	if len(name) != MaxLen || !strings.HasPrefix(name, "x:yyyy") {
		t.Errorf("Portable(Key(x, 200×y)) = %q (%d bytes)", name, len(name))
	}
	other := Portable(Key("x", id[:199]+"z"))
	if other == name {
		t.Errorf("200-char ids differing in the last character share the server name %q", name)
	}
	for _, tc := range []struct {
		id   any
		want string
	}{
		{[]byte(id), "x:" + id},
		{stringer{id}, "x:" + id},
		{strings.Repeat("Y", 200), "x:" + strings.Repeat("Y", 200)},
		{strings.Repeat("ß", 200), "x:" + strings.Repeat("ß", 200)},
		{[200]byte{}, "x:" + fmt.Sprint([200]byte{})},
	} {
		if k := Key("x", tc.id); k != tc.want {
			t.Errorf("Key(x, %T of 200) = %q, want %q", tc.id, k, tc.want)
		}
	}
}

// TestPortableOfKey: the server name of Key(p, id) is Portable of the plain
// join, computed once: exact values for the documented examples, the shape
// for others, and never the old double mapping.
func TestPortableOfKey(t *testing.T) {
	tests := []struct {
		prefix string
		id     any
		joined string
		want   string // exact server name; "" to check only the shape
	}{
		{"product", 42, "product:42", "product:42"},
		{"tenant/7/invoice", "2024-03", "tenant/7/invoice:2024-03", "tenant/7/invoice:2024-03"},
		{"Product", 42, "Product:42", "product:42#4kbjxyi65uadq45vjbmj"},
		{"Product", int64(42), "Product:42", "product:42#4kbjxyi65uadq45vjbmj"},
		{"Product", []byte("42"), "Product:42", "product:42#4kbjxyi65uadq45vjbmj"},
		{"Product", stringer{"42"}, "Product:42", "product:42#4kbjxyi65uadq45vjbmj"},
		{"café", "🔒", "café:🔒", ""},
		{"p", point{1, 2}, "p:{1 2}", ""},
		{"month", time.March, "month:March", ""},
		{"p", "a b", "p:a b", ""},
		{"x", strings.Repeat("y", 200), "x:" + strings.Repeat("y", 200), ""},
		{strings.Repeat("x", 70), 1, strings.Repeat("x", 70) + ":1", ""},
		{"", "", ":", ":"},
	}
	for _, tt := range tests {
		k := Key(tt.prefix, tt.id)
		if k != tt.joined {
			t.Errorf("Key(%q, %#v) = %q, want %q", tt.prefix, tt.id, k, tt.joined)
			continue
		}
		name := Portable(k)
		if tt.want != "" && name != tt.want {
			t.Errorf("Portable(Key(%q, %#v)) = %q, want %q", tt.prefix, tt.id, name, tt.want)
		}
		if IsPortable(tt.joined) {
			if name != k {
				t.Errorf("Portable(Key(%q, %#v)) = %q: a portable key must be its own server name", tt.prefix, tt.id, name)
			}
			continue
		}
		checkMapped(t, tt.joined, name)
		if twice := Portable(name); twice != name {
			t.Errorf("Portable(Portable(Key(%q, %#v))) = %q, want %q", tt.prefix, tt.id, twice, name)
		}
	}
	// A double mapping cannot give another name.
	if name, double := Portable(Key("Product", 42)), "product:42_4kbjxyi65uadq45vjbmj#ax4333x3fi7sejltphkk"; name == double || Portable(name) != name {
		t.Errorf("Portable(Key(Product, 42)) = %q, Portable of it %q", name, Portable(name))
	}
}

func TestAllocs(t *testing.T) {
	long := strings.Repeat("Ab", 200)
	// Box the ids up front: converting a []byte or a large integer to any
	// allocates in the caller, not in Key.
	var bytesID, bigID any = []byte("abc"), 1 << 40
	tests := []struct {
		desc string
		max  float64
		f    func()
	}{
		{"Portable portable", 0, func() { _ = Portable("tenant/7/invoice:42") }},
		{"Portable mapped", 1, func() { _ = Portable("Tenant/7/Invoice:42") }},
		{"Portable mapped 100 bytes", 1, func() { _ = Portable(long[:100]) }},
		{"Key int", 1, func() { _ = Key("product", 42) }},
		{"Key int64 upper", 1, func() { _ = Key("Product", int64(42)) }},
		{"Key non-ascii string", 1, func() { _ = Key("café", "ключ 🔒") }},
		// Past the 128-byte stack buffer, append grows into the heap first.
		{"Key 200-byte string", 3, func() { _ = Key("x", long[:200]) }},
		{"Key string", 1, func() { _ = Key("product", "abc") }},
		{"Key []byte", 1, func() { _ = Key("product", bytesID) }},
		{"Key big int", 1, func() { _ = Key("product", bigID) }},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(100, tt.f); got > tt.max {
			t.Errorf("%s: %v allocs, want <= %v", tt.desc, got, tt.max)
		}
	}
}

func isASCIILower(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// FuzzPortable checks, for any pair of inputs, that Portable is
// deterministic, returns short lowercase ASCII names of the documented
// shape, and is injective but for fixed points: Portable(a) == Portable(b)
// for a != b only when one of them is that name itself.
func FuzzPortable(f *testing.F) {
	seeds := [][2]string{
		{"", ""},
		{"a", "A"},
		{"product:42", "Product:42"},
		{"job", "job "},
		{"a_b", "a b"},
		{"a\x00b", "a_b"},
		{"café", "cafe"},
		{"🔒", "____"},
		{"'; DROP TABLE x; --", "___drop_table_x__--"},
		{strings.Repeat("x", MaxLen), strings.Repeat("x", MaxLen+1)},
		{strings.Repeat("k", 100) + "1", strings.Repeat("k", 100) + "2"},
		{"product:42#4kbjxyi65uadq45vjbmj", "Product:42"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		pa, pb := Portable(a), Portable(b)
		if again := Portable(a); again != pa {
			t.Fatalf("Portable(%q) not deterministic: %q then %q", a, pa, again)
		}
		for _, c := range [][2]string{{a, pa}, {b, pb}} {
			in, out := c[0], c[1]
			if len(out) == 0 || len(out) > MaxLen {
				t.Fatalf("Portable(%q) = %q: length %d", in, out, len(out))
			}
			if !isASCIILower(out) {
				t.Fatalf("Portable(%q) = %q: not lowercase ASCII", in, out)
			}
			if IsPortable(in) {
				if out != in {
					t.Fatalf("Portable(%q) = %q: portable input changed", in, out)
				}
			} else {
				checkMapped(t, in, out)
			}
			if re := Portable(out); re != out {
				t.Fatalf("Portable(Portable(%q)) = %q, want %q", in, re, out)
			}
		}
		if a == b && pa != pb || a != b && pa == pb && pa != a && pb != b {
			t.Fatalf("a == b is %v but Portable(%q) = %q, Portable(%q) = %q", a == b, a, pa, b, pb)
		}
		// Key only joins; its server name is Portable of the join.
		k := Key(a, b)
		if want := a + ":" + b; k != want {
			t.Fatalf("Key(%q, %q) = %q, want the plain join %q", a, b, k, want)
		}
		if got, want := Portable(k), Portable(a+":"+b); got != want {
			t.Fatalf("Portable(Key(%q, %q)) = %q, want %q", a, b, got, want)
		}
	})
}

// FuzzPortableIdempotent: Portable(Portable(s)) == Portable(s) for every s;
// a portable s is returned unchanged, and any other is mapped to a name of
// the documented shape with s's hash.
func FuzzPortableIdempotent(f *testing.F) {
	for _, s := range []string{
		"",
		"#",
		"##",
		"a#",
		"#a",
		"a#b",
		"a##b",
		"product:42",
		"Product:42",
		"PRODUCT:42",
		"product:42#4kbjxyi65uadq45vjbmj", // a mapped name
		"product:42#4KBJXYI65UADQ45VJBMJ", // upper-case hash
		"Product:42#4kbjxyi65uadq45vjbmj", // upper-case prefix
		"#4oymiquy7qobjgx36tej",           // Portable("")
		"product:42_4kbjxyi65uadq45vjbmj#ax4333x3fi7sejltphkk",
		"caf_______#4pp6an2mtcxxo7cpgopq",
		"product:42#4kbjxyi65uadq45vjbm",   // 19 hash characters
		"product:42#4kbjxyi65uadq45vjbmjj", // 21
		"product:42#4kbjxyi65uadq45vjbm1",  // not base32
		"#" + strings.Repeat("a", hashLen) + "#",
		strings.Repeat("x", MaxLen),
		strings.Repeat("x", MaxLen+1),
		strings.Repeat("X", MaxLen),
		strings.Repeat("x", maxPrefix) + "#" + strings.Repeat("a", hashLen),   // 64 bytes, mapped shape
		strings.Repeat("x", maxPrefix+1) + "#" + strings.Repeat("a", hashLen), // 65 bytes
		strings.Repeat("x", maxPrefix-1) + "#" + strings.Repeat("a", hashLen+1),
		strings.Repeat("x", MaxLen-1) + "#",
		"café 🔒",
		"a\x00b",
		"\xff\xfe",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := Portable(s)
		if twice := Portable(once); twice != once {
			t.Fatalf("Portable(Portable(%q)) = %q, want %q", s, twice, once)
		}
		if !IsPortable(once) {
			t.Fatalf("Portable(%q) = %q is not portable", s, once)
		}
		if IsPortable(s) != (once == s) {
			t.Fatalf("IsPortable(%q) = %v but Portable returns %q", s, IsPortable(s), once)
		}
		if IsPortable(s) {
			return
		}
		checkMapped(t, s, once)
		if want := Portable(strings.Clone(s)); want != once {
			t.Fatalf("Portable(%q) not deterministic: %q then %q", s, once, want)
		}
	})
}
