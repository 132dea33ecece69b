package apikey

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Keyring is the set of accepted keys, held as SHA-256 digests with their
// names. It is immutable once built and safe for concurrent use.
//
// A key may have several secrets: entries of the config with one name are
// one key being rotated (the new secret added beside the old one, the old
// one removed once no client uses it), and Match gives the same key for
// each of them, so that logs, metrics, caps and scopes carry on across a
// rotation.
//
// Match hashes the presented key once and compares the digest with every
// configured digest, all of them, in constant time (crypto/subtle): the time
// it takes depends only on the number of secrets, never on which one matched,
// how much of a key matched or whether any did. Comparing fixed-size digests
// rather than the keys also hides the keys' lengths. A presented key longer
// than MaxSecretLength is refused before it is hashed, so that the work is
// bounded whatever a caller sends.
type Keyring struct {
	digests [][sha256.Size]byte
	owners  []int    // for each digest, the position of its key in names
	names   []string // the keys' names, each once, in order of first appearance
	firsts  []int    // for each key, the position of its first entry in the config
}

// MaxSecretLength is the longest secret a key may have, in bytes: far more
// than a generated key (46 bytes) or a 256-bit secret in any encoding. A
// presented key that is longer cannot be one of the keyring's; Match refuses
// it without hashing, so that a 20 000-byte key costs no more than a short
// one. A plain secret that is longer is a configuration error; a digest
// cannot tell, and the digest of a longer secret simply never matches.
const MaxSecretLength = 256

// NewKeyring builds a keyring from keys whose secrets are already expanded
// (the handler expands placeholders and trims white space first). A secret
// starting with "sha256:" is a digest. The n-th entry without a name is
// called DefaultName(n); entries with the same name are one key with several
// secrets, and must agree on its scope and cap (SameLimits).
//
// Errors name an entry by its position in keys as a JSON path relative to
// the list's object, keys[i] counting from 0 (the handler puts "auth." in
// front), and by its name when it is a valid one; never by its secret. These
// are errors: an entry's name that is another's default name (name one of
// them otherwise), since logs and metrics could not tell them apart;
// entries of one name whose scopes or caps differ; a secret given twice
// (written twice, or once plain and once as its digest), since a caller
// presenting it would be two keys at once, and it is almost always a
// copy-paste mistake that leaves the intended second key unconfigured; and
// a name that is another entry's secret (two keys pasted as
// `key <secret> <secret>`), which logs and metrics would publish.
func NewKeyring(keys []Key) (*Keyring, error) {
	kr := &Keyring{
		digests: make([][sha256.Size]byte, 0, len(keys)),
		owners:  make([]int, 0, len(keys)),
	}
	// A name that is another key's secret first, before an error below
	// quotes the name.
	bySecret := make(map[[sha256.Size]byte]int, len(keys))
	for i, k := range keys {
		d, err := digestOf(k.Secret)
		if _, seen := bySecret[d]; err == nil && !seen {
			bySecret[d] = i
		}
	}
	for i, k := range keys {
		if k.Name == "" {
			continue
		}
		if prev, ok := bySecret[sha256.Sum256([]byte(k.Name))]; ok {
			return nil, fmt.Errorf("%s: the name is the secret of %s; write the name, then the secret", EntryPath(i, ""), EntryPath(prev, ""))
		}
	}
	type named struct{ key, entry int }
	byName := make(map[string]named, len(keys))
	byDigest := make(map[[sha256.Size]byte]int, len(keys))
	for i, k := range keys {
		name := k.Name
		if name == "" {
			name = DefaultName(i + 1)
		} else if err := ValidateName(name); err != nil {
			return nil, fmt.Errorf("%s: %v", EntryPath(i, ""), err)
		}
		at := EntryPath(i, name)
		if strings.TrimSpace(k.Secret) == "" {
			return nil, fmt.Errorf("%s: empty key", at)
		}
		d, err := digestOf(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", at, err)
		}
		if prev, dup := byDigest[d]; dup {
			return nil, fmt.Errorf("%s has the same secret as %s", at, EntryPath(prev, kr.names[kr.owners[prev]]))
		}
		prev, seen := byName[name]
		switch {
		case seen && (k.Name == "" || keys[prev.entry].Name == ""):
			// One of them is named by its position: a coincidence, not a
			// key being rotated.
			unnamed, other := i, prev.entry
			if k.Name != "" {
				unnamed, other = prev.entry, i
			}
			return nil, fmt.Errorf("%s: '%s' is the name of %s and, by its position, of %s; give %s a name of its own",
				at, name, EntryPath(other, ""), EntryPath(unnamed, ""), EntryPath(unnamed, ""))
		case seen:
			if what, same := SameLimits(keys[prev.entry], k); !same {
				return nil, fmt.Errorf("%s: %s not the same as on %s, another secret of the key: %w", at, what, EntryPath(prev.entry, name), ErrRotationLimits)
			}
		default:
			prev = named{key: len(kr.names), entry: i}
			byName[name] = prev
			kr.names = append(kr.names, name)
			kr.firsts = append(kr.firsts, i)
		}
		byDigest[d] = i
		kr.digests = append(kr.digests, d)
		kr.owners = append(kr.owners, prev.key)
	}
	return kr, nil
}

// ErrRotationLimits says why the entries of one name must agree on the key's
// scope and cap, and what to do.
var ErrRotationLimits = errors.New("the secrets of one name are one key (a key being rotated), with one scope and one cap; give each the same endpoints, max_in_flight and max_held")

// EntryPath names the i-th entry of a key list (from 0) in errors: keys[i],
// and its name in quotes when name is not empty. A name is shown only once
// it passed ValidateName: a name that did not may be a secret.
func EntryPath(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("keys[%d]", i)
	}
	return fmt.Sprintf("keys[%d] '%s'", i, name)
}

// SameLimits reports whether two entries of one name, two secrets of one
// key, give it the same scope, cap and share of held bytes, and if not, the
// option that differs.
// Endpoints are compared as sets: their order and repeats mean nothing.
func SameLimits(a, b Key) (differs string, same bool) {
	if (a.Endpoints == nil) != (b.Endpoints == nil) || !sameSet(a.Endpoints, b.Endpoints) {
		return "endpoints", false
	}
	if a.MaxInFlight != b.MaxInFlight {
		return "max_in_flight", false
	}
	if a.MaxHeld != b.MaxHeld {
		return "max_held", false
	}
	return "", true
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	in := func(s string, list []string) bool { return slices.Contains(list, s) }
	for _, s := range a {
		if !in(s, b) {
			return false
		}
	}
	for _, s := range b {
		if !in(s, a) {
			return false
		}
	}
	return true
}

// digestOf is the digest an expanded secret stands for: the digest written
// as "sha256:…", or the SHA-256 of the secret.
func digestOf(secret string) ([sha256.Size]byte, error) {
	switch {
	case strings.HasPrefix(secret, DigestPrefix):
		return ParseDigest(secret)
	case len(secret) > MaxSecretLength:
		// Match never hashes a presented key this long: it could not match.
		return [sha256.Size]byte{}, fmt.Errorf("longer than %d bytes", MaxSecretLength)
	}
	return sha256.Sum256([]byte(secret)), nil
}

// Len reports the number of keys: of names, however many secrets each has.
func (kr *Keyring) Len() int {
	if kr == nil {
		return 0
	}
	return len(kr.names)
}

// Names returns the keys' names, each once, in the order of their first
// entry in the config: the order of the positions Match returns.
func (kr *Keyring) Names() []string {
	if kr == nil {
		return nil
	}
	return append([]string(nil), kr.names...)
}

// First returns the position in the config of the first entry of the key at
// position i of Names: where its scope and cap are written.
func (kr *Keyring) First(i int) int {
	return kr.firsts[i]
}

// Match reports the position (from 0, in the order of Names) of the key
// whose secret was presented, if it is one of the keyring's; see Keyring
// for why it takes the same time whatever matched. It does not allocate. An
// empty or nil keyring matches nothing, and nothing longer than
// MaxSecretLength is hashed.
func (kr *Keyring) Match(presented string) (index int, ok bool) {
	if kr == nil || len(kr.digests) == 0 || len(presented) > MaxSecretLength {
		return -1, false
	}
	var buf [MaxSecretLength]byte // a []byte(presented) would allocate
	sum := sha256.Sum256(buf[:copy(buf[:], presented)])
	found, at := 0, -1
	for i := range kr.digests {
		eq := subtle.ConstantTimeCompare(sum[:], kr.digests[i][:])
		at = subtle.ConstantTimeSelect(eq, i, at)
		found |= eq
	}
	// The digests are distinct (NewKeyring refuses duplicates), so at most one
	// matched and at is its position.
	if found != 1 {
		return -1, false
	}
	return kr.owners[at], true
}
