package keyfmt

import (
	"math/rand/v2"
	"testing"
)

// portableV0 is main's Portable (before idempotence): a plain name as it
// is, every other string mapped.
func portableV0(name string) string {
	if isPlain(name) {
		return name
	}
	return mapped([]byte(name))
}

// TestReviewR3PortableNaturalIDs: the server name is a contract across
// versions (a v0 and a v1 process must take the same lock for one key
// during a rolling upgrade). Keys of the form "<kind>#<id>" where id is a
// 20-character lowercase base32hex ID (github.com/rs/xid's format: 0-9,
// a-v) are ordinary application keys; about 7% of such IDs contain no 0,
// 1, 8 or 9, and the key then has the mapped shape: v1 returns it
// unchanged while v0 mapped it. That is inherent in idempotency and
// documented (package doc, "Which keys changed name with idempotency";
// CHANGELOG): exactly the keys of the mapped shape changed name, every
// other key kept its v0 name. The test asserts exactly that, on such IDs
// and on a mix of other keys.
func TestReviewR3PortableNaturalIDs(t *testing.T) {
	const b32hex = "0123456789abcdefghijklmnopqrstuv"
	r := rand.New(rand.NewPCG(1, 2))
	check := func(key string) bool {
		t.Helper()
		v0, v1 := portableV0(key), Portable(key)
		shaped := isMapped(key)
		switch {
		case shaped && v1 != key:
			t.Errorf("Portable(%q) = %q: a key of the mapped shape must be its own name", key, v1)
		case shaped && v0 == v1:
			t.Errorf("Portable(%q) = %q, as v0: a key of the mapped shape was expected to differ from v0", key, v1)
		case !shaped && v0 != v1:
			t.Errorf("Portable(%q) = %q, v0 %q: a key not of the mapped shape changed name", key, v1, v0)
		}
		return shaped
	}
	differ, total := 0, 2000
	for i := 0; i < total; i++ {
		id := make([]byte, 20)
		for j := range id {
			id[j] = b32hex[r.IntN(len(b32hex))]
		}
		if check("invoice#" + string(id)) {
			differ++
		}
	}
	// The documented share of xid-like IDs of the shape: (28/32)^20, about 7%.
	if differ == 0 || differ > total/5 {
		t.Errorf("%d of %d xid-like keys have the mapped shape; want about 7%%", differ, total)
	}
	t.Logf("%d of %d keys \"invoice#<xid-like id>\" have the mapped shape and changed name; the others kept theirs", differ, total)
	for _, key := range []string{
		"", "job", "product:42", "Product:42", "invoice#", "invoice#abc", "#abcdefghijklmnopqrst",
		"invoice#abcdefghijklmnopqrs", "invoice#abcdefghijklmnopqrstu", "INVOICE#abcdefghijklmnopqrst",
		"invoice#ABCDEFGHIJKLMNOPQRST", "invoice#abcdefghijklmnopqrs8", "a#b#abcdefghijklmnopqrst",
		"product:42#4kbjxyi65uadq45vjbmj", "日本語#abcdefghijklmnopqrst",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa#abcdefghijklmnopqrst",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa#abcdefghijklmnopqrst",
	} {
		check(key)
	}
	for i := 0; i < 2000; i++ {
		b := make([]byte, r.IntN(70))
		for j := range b {
			b[j] = byte(r.IntN(128))
		}
		check(string(b))
		check(Portable(string(b)))
	}
}
