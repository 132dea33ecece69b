package apikey

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"
)

// Keyring is the set of accepted keys, held as SHA-256 digests with their
// names. It is immutable once built and safe for concurrent use.
//
// Match hashes the presented key once and compares the digest with every
// configured digest, all of them, in constant time (crypto/subtle): the time
// it takes depends only on the number of keys, never on which key matched,
// how much of a key matched or whether any did. Comparing fixed-size digests
// rather than the keys also hides the keys' lengths. A presented key longer
// than MaxSecretLength is refused before it is hashed, so that the work is
// bounded whatever a caller sends.
type Keyring struct {
	digests [][sha256.Size]byte
	names   []string
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
// starting with "sha256:" is a digest. The n-th key without a name is called
// DefaultName(n).
//
// Errors name the key by position (counting from 1, as the default names do)
// and valid name, never by its secret. Two keys with the same name are an
// error, since logs and metrics could not tell them apart; so are two keys
// with the same secret (written twice, or once plain and once as its
// digest): a caller presenting it would be two keys at once, and it is
// almost always a copy-paste mistake that leaves the intended second key
// unconfigured. So is a name that is another key's secret (two keys pasted
// as `key <secret> <secret>`), which logs and metrics would publish.
func NewKeyring(keys []Key) (*Keyring, error) {
	kr := &Keyring{
		digests: make([][sha256.Size]byte, 0, len(keys)),
		names:   make([]string, 0, len(keys)),
	}
	// A name that is another key's secret first, before an error below
	// quotes the name.
	bySecret := make(map[[sha256.Size]byte]int, len(keys))
	for i, k := range keys {
		d, err := digestOf(k.Secret)
		if _, seen := bySecret[d]; err == nil && !seen {
			bySecret[d] = i + 1
		}
	}
	for i, k := range keys {
		if k.Name == "" {
			continue
		}
		if prev, ok := bySecret[sha256.Sum256([]byte(k.Name))]; ok {
			return nil, fmt.Errorf("key #%d: the name is the secret of key #%d; write the name, then the secret", i+1, prev)
		}
	}
	byName := make(map[string]int, len(keys))
	byDigest := make(map[[sha256.Size]byte]int, len(keys))
	for i, k := range keys {
		n := i + 1
		name := k.Name
		if name == "" {
			name = DefaultName(n)
		} else if err := ValidateName(name); err != nil {
			return nil, fmt.Errorf("key #%d: %v", n, err)
		}
		if strings.TrimSpace(k.Secret) == "" {
			return nil, fmt.Errorf("key #%d '%s': empty key", n, name)
		}
		d, err := digestOf(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("key #%d '%s': %v", n, name, err)
		}
		if prev, dup := byName[name]; dup {
			return nil, fmt.Errorf("key #%d: name '%s' is already the name of key #%d", n, name, prev)
		}
		if prev, dup := byDigest[d]; dup {
			return nil, fmt.Errorf("key #%d '%s' has the same secret as key #%d '%s'", n, name, prev, kr.names[prev-1])
		}
		byName[name] = n
		byDigest[d] = n
		kr.digests = append(kr.digests, d)
		kr.names = append(kr.names, name)
	}
	return kr, nil
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

// Len reports the number of keys.
func (kr *Keyring) Len() int {
	if kr == nil {
		return 0
	}
	return len(kr.names)
}

// Names returns the keys' names in configuration order: the order of the
// indexes Match returns.
func (kr *Keyring) Names() []string {
	if kr == nil {
		return nil
	}
	return append([]string(nil), kr.names...)
}

// Match reports the position (from 0, in configuration order) of the key
// presented, if it is one of the keyring's; see Keyring for why it takes the
// same time whatever matched. It does not allocate. An empty or nil keyring
// matches nothing, and nothing longer than MaxSecretLength is hashed.
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
	return at, found == 1
}
