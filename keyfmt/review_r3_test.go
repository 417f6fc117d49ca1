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
// a-v) are ordinary application keys, not crafted ones; about 7% of such
// IDs contain no 0, 1, 8 or 9, and the key then has the "mapped shape":
// v1 returns it unchanged while v0 mapped it to "<kind>_<id>#<hash>". The
// two versions then lock different names for the same key, and both run
// the job at once.
func TestReviewR3PortableNaturalIDs(t *testing.T) {
	const b32hex = "0123456789abcdefghijklmnopqrstuv"
	r := rand.New(rand.NewPCG(1, 2))
	differ, total := 0, 2000
	var example string
	for i := 0; i < total; i++ {
		id := make([]byte, 20)
		for j := range id {
			id[j] = b32hex[r.IntN(len(b32hex))]
		}
		key := "invoice#" + string(id)
		if Portable(key) != portableV0(key) {
			differ++
			if example == "" {
				example = key
			}
		}
	}
	if differ > 0 {
		t.Errorf("%d of %d keys \"invoice#<xid-like id>\" now have another server name than in v0 (e.g. %q: v1 %q, v0 %q)",
			differ, total, example, Portable(example), portableV0(example))
	}
}
