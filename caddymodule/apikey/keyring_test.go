package apikey

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// lookup is the name of the key presented, as the handler reads it: Match,
// then Names.
func lookup(kr *Keyring, presented string) (string, bool) {
	i, ok := kr.Match(presented)
	if !ok {
		return "", false
	}
	return kr.names[i], true
}

func TestKeyringNamesAndLookup(t *testing.T) {
	kr, err := NewKeyring([]Key{
		{Secret: "first-secret-0123456789"},
		{Name: "discord-bot", Secret: Digest("bot-secret-0123456789")},
		{Secret: Digest("third-secret-0123456789")},
		{Name: "website", Secret: "web-secret-0123456789"},
		{Name: "upper", Secret: "sha256:" + strings.ToUpper(Digest("upper-secret-0123456789")[7:])},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"key-1", "discord-bot", "key-3", "website", "upper"}
	if got := kr.Names(); !slices.Equal(got, wantNames) {
		t.Fatalf("Names() = %q, want %q", got, wantNames)
	}
	if kr.Len() != 5 {
		t.Fatalf("Len() = %d", kr.Len())
	}
	for i, c := range []struct{ presented, name string }{
		{"first-secret-0123456789", "key-1"},
		{"bot-secret-0123456789", "discord-bot"},
		{"third-secret-0123456789", "key-3"},
		{"web-secret-0123456789", "website"},
		{"upper-secret-0123456789", "upper"},
	} {
		name, ok := lookup(kr, c.presented)
		if !ok || name != c.name {
			t.Errorf("lookup(%s) = %q, %v; want %q", c.presented, name, ok, c.name)
		}
		idx, ok := kr.Match(c.presented)
		if !ok || idx != i {
			t.Errorf("Match(%s) = %d, %v; want %d", c.presented, idx, ok, i)
		}
	}
	for _, presented := range []string{
		"", "first-secret-012345678", "first-secret-0123456789 ", "FIRST-SECRET-0123456789",
		Digest("bot-secret-0123456789"), // the digest is not the key
		"key-1", "discord-bot",          // nor is the name
	} {
		if name, ok := lookup(kr, presented); ok || name != "" {
			t.Errorf("lookup(%q) = %q, %v; want no match", presented, name, ok)
		}
		if idx, ok := kr.Match(presented); ok || idx != -1 {
			t.Errorf("Match(%q) = %d, %v; want -1, false", presented, idx, ok)
		}
	}
	// Names is a copy: changing it does not rename a key.
	kr.Names()[0] = "changed"
	if name, _ := lookup(kr, "first-secret-0123456789"); name != "key-1" {
		t.Errorf("Names() let the caller rename a key: %q", name)
	}
}

// Every position of a keyring of 64 is found, and found as itself: the
// branch-free selection picks the right index wherever the match is.
func TestKeyringEveryPosition(t *testing.T) {
	const n = 64
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{Secret: fmt.Sprintf("secret-%02d-0123456789", i)}
		if i%2 == 1 {
			keys[i].Secret = Digest(keys[i].Secret)
		}
	}
	kr, err := NewKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		idx, ok := kr.Match(fmt.Sprintf("secret-%02d-0123456789", i))
		if !ok || idx != i {
			t.Errorf("Match(secret %d) = %d, %v", i, idx, ok)
		}
		if name, ok := lookup(kr, fmt.Sprintf("secret-%02d-0123456789", i)); !ok || name != DefaultName(i+1) {
			t.Errorf("lookup(secret %d) = %q, %v", i, name, ok)
		}
	}
	if _, ok := kr.Match("secret-64-0123456789"); ok {
		t.Error("a key that is not configured matched")
	}
}

func TestKeyringEmpty(t *testing.T) {
	var nilRing *Keyring
	empty, err := NewKeyring(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kr := range []*Keyring{nilRing, empty} {
		if name, ok := lookup(kr, "anything"); ok || name != "" {
			t.Errorf("lookup on an empty keyring = %q, %v", name, ok)
		}
		if kr.Len() != 0 || len(kr.Names()) != 0 {
			t.Errorf("Len %d, Names %q", kr.Len(), kr.Names())
		}
	}
}

func TestKeyringErrors(t *testing.T) {
	const s1, s2 = "secret-one-0123456789", "secret-two-0123456789"
	for _, c := range []struct {
		keys []Key
		want string
	}{
		{[]Key{{Secret: s1}, {Secret: ""}}, "keys[1] 'key-2': empty key"},
		{[]Key{{Name: "bot", Secret: " "}}, "keys[0] 'bot': empty key"},
		{[]Key{{Name: "a b", Secret: s1}}, "keys[0]: invalid name (letters, digits, _ and -)"},
		// An explicit name may collide with a default one, either way round.
		{[]Key{{Secret: s1}, {Name: "key-1", Secret: s2}}, "keys[1] 'key-1': 'key-1' is the name of keys[1] and, by its position, of keys[0]; give keys[0] a name of its own"},
		{[]Key{{Name: "key-2", Secret: s1}, {Secret: s2}}, "keys[1] 'key-2': 'key-2' is the name of keys[0] and, by its position, of keys[1]; give keys[1] a name of its own"},
		{[]Key{{Secret: s1}, {Name: "bot", Secret: s1}}, "keys[1] 'bot' has the same secret as keys[0] 'key-1'"},
		{[]Key{{Name: "bot", Secret: s1}, {Name: "bot", Secret: s1}}, "keys[1] 'bot' has the same secret as keys[0] 'bot'"},
		// Plain and digest of the same secret, and digests differing in case only.
		{[]Key{{Name: "a", Secret: s1}, {Name: "b", Secret: Digest(s1)}}, "keys[1] 'b' has the same secret as keys[0] 'a'"},
		{[]Key{{Name: "a", Secret: Digest(s2)}, {Secret: s1}, {Name: "c", Secret: "sha256:" + strings.ToUpper(Digest(s2)[7:])}}, "keys[2] 'c' has the same secret as keys[0] 'a'"},
		{[]Key{{Secret: s1}, {Name: "bot", Secret: "sha256:12ab"}}, "keys[1] 'bot': malformed digest 'sha256:12ab' (want sha256: and 64 hex digits, got 4)"},
		// The secrets of one name agree on the key's scope and cap.
		{[]Key{{Name: "bot", Secret: s1, Endpoints: []string{"status"}}, {Name: "bot", Secret: s2}},
			"keys[1] 'bot': endpoints not the same as on keys[0] 'bot', another secret of the key: " + ErrRotationLimits.Error()},
		{[]Key{{Name: "bot", Secret: s1, Endpoints: []string{"status", "bans"}}, {Name: "bot", Secret: s2, Endpoints: []string{"status"}}},
			"keys[1] 'bot': endpoints not the same as on keys[0] 'bot', another secret of the key: " + ErrRotationLimits.Error()},
		{[]Key{{Name: "bot", Secret: s1, MaxInFlight: 2}, {Name: "web", Secret: Digest("w")}, {Name: "bot", Secret: s2, MaxInFlight: 3}},
			"keys[2] 'bot': max_in_flight not the same as on keys[0] 'bot', another secret of the key: " + ErrRotationLimits.Error()},
		// A name that is another key's secret, plain or as its digest,
		// before any error that would quote the name.
		{[]Key{{Secret: s1}, {Name: s1, Secret: s2}}, "keys[1]: the name is the secret of keys[0]; write the name, then the secret"},
		{[]Key{{Name: s2, Secret: Digest(s1)}, {Secret: s2}, {Secret: s2}}, "keys[0]: the name is the secret of keys[1]; write the name, then the secret"},
		{[]Key{{Name: s1, Secret: " "}, {Secret: s1}}, "keys[0]: the name is the secret of keys[1]; write the name, then the secret"},
		{[]Key{{Name: "sg_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", Secret: s1}}, "keys[0]: invalid name (it has the form of a secret from caddy statusgate-key)"},
	} {
		kr, err := NewKeyring(c.keys)
		if err == nil || err.Error() != c.want {
			t.Errorf("NewKeyring(%+v) = %v,\nwant %q", c.keys, err, c.want)
		}
		if kr != nil {
			t.Errorf("NewKeyring returned a keyring with an error")
		}
		if err != nil && (strings.Contains(err.Error(), s1) || strings.Contains(err.Error(), s2)) {
			t.Errorf("error shows a secret: %v", err)
		}
	}
}

// Match does not allocate: short keys, a generated one (46 bytes) and the
// longest.
func TestMatchAllocs(t *testing.T) {
	for _, length := range []int{8, 32, 33, 46, 129, MaxSecretLength} {
		keys := make([]Key, 8)
		for i := range keys {
			keys[i] = Key{Secret: fmt.Sprintf("%d%s", i, strings.Repeat("s", length-1))}
		}
		kr, err := NewKeyring(keys)
		if err != nil {
			t.Fatal(err)
		}
		hit, miss := keys[5].Secret, "9"+keys[5].Secret[1:]
		var ok1, ok2 bool
		allocs := testing.AllocsPerRun(200, func() {
			_, ok1 = lookup(kr, hit)
			_, ok2 = lookup(kr, miss)
		})
		if allocs != 0 {
			t.Errorf("length %d: Match allocates %.1f times per hit and miss", length, allocs)
		}
		if !ok1 || ok2 {
			t.Errorf("length %d: hit %v, miss %v", length, ok1, ok2)
		}
	}
}

// A secret longer than MaxSecretLength is refused in the config, and a
// presented key that long matches nothing, not even the digest of its own
// secret: it is not hashed at all.
func TestOverlongKeys(t *testing.T) {
	long := strings.Repeat("L", MaxSecretLength+1)
	kr, err := NewKeyring([]Key{{Name: "long", Secret: long}})
	if err == nil || kr != nil || strings.Contains(err.Error(), long) || !strings.Contains(err.Error(), "'long': longer than 256 bytes") {
		t.Errorf("NewKeyring(overlong secret) = %v, %v", kr, err)
	}
	kr, err = NewKeyring([]Key{{Secret: Digest(long)}, {Secret: long[:MaxSecretLength]}})
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := kr.Match(long); ok || i != -1 {
		t.Errorf("Match(overlong key) = %d, %v", i, ok)
	}
	if i, ok := kr.Match(long[:MaxSecretLength]); !ok || i != 1 {
		t.Errorf("Match(the longest key) = %d, %v", i, ok)
	}
	if allocs := testing.AllocsPerRun(100, func() { kr.Match(long) }); allocs != 0 {
		t.Errorf("Match(overlong key) allocates %.1f times", allocs)
	}
}

// BenchmarkLookup measures a lookup against N keys, hitting the last key and
// missing, with the keys configured as plain secrets and as their digests
// (the form the Caddyfile adapter writes). Hit and miss take the same time
// for a given N by construction, and so do the two forms, which both end up
// as digests in the keyring; the figures show the cost of one SHA-256 plus N
// constant-time comparisons of 32 bytes.
func BenchmarkLookup(b *testing.B) {
	for _, form := range []string{"plain", "digest"} {
		for _, n := range []int{1, 8, 64} {
			secrets := make([]string, n)
			keys := make([]Key, n)
			for i := range keys {
				secrets[i] = fmt.Sprintf("sg_benchmark-secret-%03d-abcdefghijklmnop", i)
				keys[i] = Key{Secret: secrets[i]}
				if form == "digest" {
					keys[i].Secret = Digest(secrets[i])
				}
			}
			kr, err := NewKeyring(keys)
			if err != nil {
				b.Fatal(err)
			}
			for _, c := range []struct {
				what      string
				presented string
				want      bool
			}{
				{"hit", secrets[n-1], true},
				{"miss", "sg_benchmark-secret-999-abcdefghijklmnop", false},
			} {
				b.Run(fmt.Sprintf("%s/keys=%d/%s", form, n, c.what), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if _, ok := lookup(kr, c.presented); ok != c.want {
							b.Fatal("wrong answer")
						}
					}
				})
			}
		}
	}
}

// TestKeyringRotation checks entries of one name: one key with several
// secrets, each of which Match gives as that key, while the keys around it
// keep their positions.
func TestKeyringRotation(t *testing.T) {
	kr, err := NewKeyring([]Key{
		{Name: "bot", Secret: "old-b0t-secret-0123456789", Endpoints: []string{"status", "bans"}, MaxInFlight: 2},
		{Secret: Digest("unnamed-0123456789")},
		{Name: "web", Secret: "web-s3cret-0123456789"},
		{Name: "bot", Secret: Digest("new-b0t-secret-0123456789"), Endpoints: []string{"bans", "status", "bans"}, MaxInFlight: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"bot", "key-2", "web"}; !slices.Equal(kr.Names(), want) || kr.Len() != 3 {
		t.Fatalf("Names() = %q, Len() = %d; want %q", kr.Names(), kr.Len(), want)
	}
	for _, c := range []struct {
		presented string
		key       int
	}{
		{"old-b0t-secret-0123456789", 0}, {"new-b0t-secret-0123456789", 0},
		{"unnamed-0123456789", 1}, {"web-s3cret-0123456789", 2},
	} {
		if i, ok := kr.Match(c.presented); !ok || i != c.key {
			t.Errorf("Match(%s) = %d, %v; want %d", c.presented, i, ok, c.key)
		}
	}
	if i, ok := kr.Match("bot"); ok {
		t.Errorf("the name matched as key %d", i)
	}
	for i, want := range []int{0, 1, 2} {
		if got := kr.First(i); got != want {
			t.Errorf("First(%d) = %d, want %d", i, got, want)
		}
	}
}
