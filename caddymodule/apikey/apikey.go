// Package apikey holds statusgate's API keys: how a key is written in the
// config (a name and a secret, or a name and the secret's SHA-256 digest), and
// the keyring that tells, in constant time, which configured key a request
// presented.
//
// A key is written in one of two forms:
//
//   - the secret itself, e.g. "sg_3q2-7w…" or a placeholder such as
//     "{env.STATUSGATE_KEY}" that the handler expands when the config loads;
//   - its digest, "sha256:" followed by the 64 hex digits of the SHA-256 of
//     the secret (either case), so that the config holds no secret at all.
//     `caddy statusgate-key` prints both for a new random key.
//
// Any text that starts with "sha256:" is read as a digest, so a plain secret
// cannot start with it. A digest may also come whole from a placeholder
// ("{env.BOT_KEY_DIGEST}" holding "sha256:…"), but not in pieces
// ("sha256:{env.X}" is malformed).
//
// Each key has a name: the one configured, or "key-<n>" for the n-th key
// (counting from 1) when it has none. The name is what logs, placeholders and
// metrics show; the secret is never shown anywhere. Default names follow the
// order of the keys, so name your keys if you want names that survive adding,
// removing or reordering keys.
//
// No error of this package contains a secret: errors name keys by position
// and by a name that passed ValidateName, never quote a name that did not
// (it may be a secret written where the name goes), and show at most the
// first hex digits of a malformed digest.
package apikey

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/statusgate/statusgate/internal/ident"
)

// DigestPrefix marks a key given as the SHA-256 digest of its secret.
const DigestPrefix = "sha256:"

// MaxNameLength is the longest key name accepted: enough for a descriptive
// name, short enough for a log field or a metric label.
const MaxNameLength = 64

// digestShown is how many hex digits of a malformed digest an error shows:
// enough to find it in the config, too few to matter should someone have put
// a secret after "sha256:" by mistake.
const digestShown = 8

// Key is one configured key: an optional name and the secret or its digest,
// as written in the config (placeholders not yet expanded).
//
// In JSON a key without a name is a plain string, "secret" or "sha256:…",
// which is also how configs written before keys had names look; a named key
// is an object {"name": "discord-bot", "key": "sha256:…"}. MarshalJSON and
// UnmarshalJSON read and write both forms; the fields' json tags give the
// object's member names, for Caddy's documentation.
type Key struct {
	// Name identifies the key in logs, placeholders and metrics: letters,
	// digits, '_' and '-', at most MaxNameLength characters. Default: empty,
	// which gives the key the name "key-<n>" by its position.
	Name string `json:"name,omitempty"`

	// Secret is the key's secret, a placeholder that expands to it, or its
	// digest "sha256:<64 hex digits>". Required.
	Secret string `json:"key"`

	// Endpoints is the key's scope: the names of the endpoints it opens.
	// For any other endpoint its caller is a caller without a key. The
	// handler checks the names. Default: nil, every endpoint; an empty
	// list is an error.
	Endpoints []string `json:"endpoints,omitempty"`

	// MaxInFlight is the most requests of this key open at once (at the
	// backend or waiting for it). Default: 0, no cap of its own; when
	// given it must be at least 1.
	MaxInFlight int `json:"max_in_flight,omitempty"`

	// MaxHeld is the most bytes of answers held at once for this key's
	// clients that have not taken them yet: the key's own share of the
	// gateway's max_held. Default: 0, a share the handler works out from
	// its limits; when given it must be at least 1 (the handler checks it
	// against its max_held and max_response).
	MaxHeld int64 `json:"max_held,omitempty"`

	// Revision is a fingerprint of the value a key written as one
	// {file.*} or {env.*} placeholder had where the config was adapted
	// (a keyed hash that shows nothing of the secret): the Caddyfile
	// adapter writes it, so that the adapted config changes when the
	// file does and `caddy reload` applies the new key instead of finding
	// the config unchanged. It is not part of the key. Default: none.
	Revision string `json:"revision,omitempty"`

	// limitGiven and heldGiven record that the JSON had max_in_flight and
	// max_held, so that an explicit 0 is refused with the key's position
	// instead of read as the default.
	limitGiven, heldGiven bool
	// nulls are the members the JSON gave as null, where null would read
	// as their absence: every endpoint, no cap. Config generators write
	// null for an empty list; Validate refuses it with the key's position,
	// as it refuses [].
	nulls []string
}

// keyObject is the JSON object form of a named key; its members are those of
// Key's json tags (TestKeyJSONTags).
type keyObject struct {
	Name        string   `json:"name,omitempty"`
	Secret      *string  `json:"key"`
	Endpoints   []string `json:"endpoints,omitempty"`
	MaxInFlight *int     `json:"max_in_flight,omitempty"`
	MaxHeld     *int64   `json:"max_held,omitempty"`
	Revision    string   `json:"revision,omitempty"`
}

// scoped reports whether the key has a scope, a cap or a revision of its
// own: whether it needs the object form in JSON.
func (k Key) scoped() bool {
	return k.Endpoints != nil || k.MaxInFlight != 0 || k.limitGiven || k.MaxHeld != 0 || k.heldGiven || k.Revision != ""
}

// MarshalJSON writes a plain string for a key without a name, scope or cap,
// so that `caddy adapt` keeps giving a list of strings for unnamed keys, and
// the object {"name","key","endpoints","max_in_flight","max_held","revision"}
// otherwise.
func (k Key) MarshalJSON() ([]byte, error) {
	if k.Name == "" && !k.scoped() {
		return json.Marshal(k.Secret)
	}
	o := keyObject{Name: k.Name, Secret: &k.Secret, Endpoints: k.Endpoints, Revision: k.Revision}
	if k.MaxInFlight != 0 || k.limitGiven {
		o.MaxInFlight = &k.MaxInFlight
	}
	if k.MaxHeld != 0 || k.heldGiven {
		o.MaxHeld = &k.MaxHeld
	}
	return json.Marshal(o)
}

// UnmarshalJSON reads either form. An object must have "key" and may have
// "name", "endpoints", "max_in_flight", "max_held" and "revision", nothing else (Caddy rejects unknown fields in its config, and a
// misspelt "nmae" would otherwise silently leave a key unnamed). The name and
// digest are checked by Validate and NewKeyring, which know the key's
// position.
func (k *Key) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*k = Key{Secret: s}
		return nil
	case len(b) > 0 && b[0] == '{':
		var o keyObject
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			// encoding/json's messages name fields and types, never values.
			return fmt.Errorf("key object: %v", err)
		}
		if o.Secret == nil {
			return errors.New(`key object: missing "key"`)
		}
		*k = Key{Name: o.Name, Secret: *o.Secret, Endpoints: o.Endpoints, Revision: o.Revision}
		if o.MaxInFlight != nil {
			k.MaxInFlight, k.limitGiven = *o.MaxInFlight, true
		}
		if o.MaxHeld != nil {
			k.MaxHeld, k.heldGiven = *o.MaxHeld, true
		}
		var members map[string]json.RawMessage
		_ = json.Unmarshal(b, &members) // it decoded above
		for _, name := range []string{"endpoints", "max_in_flight", "max_held"} {
			if v, ok := members[name]; ok && string(bytes.TrimSpace(v)) == "null" {
				k.nulls = append(k.nulls, name)
			}
		}
		return nil
	}
	return errors.New(`a key is a string or an object {"name": …, "key": …}`)
}

// Validate checks what can be checked before placeholders are expanded: the
// name, that the text is not empty, that a key without a name is not one
// word that reads like a name (ErrNameAlone), the form of a digest written
// in place, that a scope is not empty and a cap and a share at least 1 (the
// endpoint names, and the share against the limits, are the handler's to
// check). The Caddyfile parser and the handler's
// Provision call it; NewKeyring checks the expanded text again.
func (k Key) Validate() error {
	if k.Name != "" {
		if err := ValidateName(k.Name); err != nil {
			return err
		}
	}
	if strings.TrimSpace(k.Secret) == "" {
		return errors.New("empty key")
	}
	if !strings.Contains(k.Secret, "{") {
		// A literal: what a placeholder holds is checked once expanded.
		if err := SecretTextError(strings.TrimSpace(k.Secret)); err != nil {
			return err
		}
	}
	if k.Name == "" && ReadsLikeName(strings.TrimSpace(k.Secret)) {
		return ErrNameAlone
	}
	if strings.HasPrefix(k.Secret, DigestPrefix) {
		if _, err := ParseDigest(k.Secret); err != nil {
			return err
		}
	}
	for _, name := range k.nulls {
		switch name {
		case "endpoints":
			return errors.New("endpoints: null is not a scope: leave endpoints out for every endpoint, or list the endpoints the key opens")
		case "max_in_flight":
			return errors.New("max_in_flight: null is not a cap: leave max_in_flight out for no cap of its own, or write a whole number of at least 1")
		case "max_held":
			return errors.New("max_held: null is not a size: leave max_held out for the key's default share, or write bytes, at least 1")
		}
	}
	if k.Endpoints != nil && len(k.Endpoints) == 0 {
		return errors.New("endpoints: empty list (leave it out for every endpoint)")
	}
	if k.MaxInFlight < 0 || (k.limitGiven && k.MaxInFlight < 1) {
		return fmt.Errorf("max_in_flight: %d is not a whole number of at least 1", k.MaxInFlight)
	}
	if k.MaxHeld < 0 || (k.heldGiven && k.MaxHeld < 1) {
		return fmt.Errorf("max_held: %d is not a size: write bytes, at least 1, or leave max_held out for the key's default share", k.MaxHeld)
	}
	return nil
}

// ValidateName checks a key name: letters, digits, '_' and '-', at most
// MaxNameLength characters, and not a secret in the form Generate makes.
// The error does not quote the name: a name that fails is often a secret
// written where the name goes (`key <secret> <secret>`).
func ValidateName(name string) error {
	if !ident.Valid(name) {
		return errors.New("invalid name (letters, digits, _ and -)")
	}
	if len(name) > MaxNameLength {
		return fmt.Errorf("invalid name (at most %d characters)", MaxNameLength)
	}
	if IsGenerated(name) {
		return errors.New("invalid name (it has the form of a secret from caddy statusgate-key)")
	}
	if ReadsAsSecret(name) {
		return errors.New("invalid name (it reads as a secret: random hex, base64url or a UUID)")
	}
	return nil
}

// uuidForm is a UUID's form, in either case.
var uuidForm = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ReadsAsSecret reports whether name, a word of a name's characters, reads
// as a random secret rather than a name: MinSecretAlone or more characters,
// of which at least half of MinSecretAlone are in parts (between '-' and
// '_') that are not words (isWord): letters and digits mixed within a
// part, as in hex, base64url and UUIDs. `key <secret> <secret>`, two random
// secrets on one line, would otherwise publish the first as the key's name
// in the adapted config, the logs and the metrics. Names of words, with a
// short code among them ("prometheus-k8s-scraper"), do not read as one.
func ReadsAsSecret(name string) bool {
	if len(name) < MinSecretAlone || !ident.Valid(name) {
		return false
	}
	if uuidForm.MatchString(name) || !strings.ContainsFunc(name, func(r rune) bool { return !isHex(byte(r)) }) {
		return true // a UUID, or hex alone, whatever its digits happen to be
	}
	mixed := 0
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '-' || r == '_' }) {
		if !isWord(part) {
			mixed += len(part)
		}
	}
	return mixed >= MinSecretAlone/2
}

// MinSecretAlone is the length from which one word of a name's characters,
// written as a key without a name, can be a secret rather than a name whose
// secret was forgotten (see ReadsLikeName). It is also the length under
// which the handler warns of a short secret.
const MinSecretAlone = 16

// ErrNameAlone is Validate's error for a key without a name whose text reads
// like a name (ReadsLikeName): almost always `key <name>` with the secret
// forgotten, which would make a guessable word a key that opens every
// endpoint. It names no fix, because the fix is written differently in the
// Caddyfile and in JSON; the handler adds it. It does not quote the text.
var ErrNameAlone = errors.New("one word that reads like a name, with no secret")

// ReadsLikeName reports whether s, the whole text of a key written without a
// name, reads like a name rather than a secret: it has only the characters
// of a name (letters, digits, '_' and '-'), it is not a secret in the form
// Generate makes, and it is either shorter than MinSecretAlone or made of
// words. A part of s between '-' and '_' is a word when it is lower-case
// letters, upper-case letters, or capitalised words run together
// ("discordBot"), any of them followed by digits ("bot2"), or digits alone.
//
// So "website", "discord-bot-production", "DISCORD_BOT" and "staff-2024"
// read like names, and a digest ("sha256:…", which has a ':'), a placeholder
// ("{env.NAME}"), a generated key, a passphrase with spaces or punctuation
// and a random string of 16 or more letters and digits (hex, base64url, a
// UUID, where letters and digits mix within a part) do not. A secret that
// does read like a name (a passphrase of plain words) only has to be given a
// name to be accepted: `key <name> <secret>`.
func ReadsLikeName(s string) bool {
	if !ident.Valid(s) || IsGenerated(s) {
		return false
	}
	if len(s) < MinSecretAlone {
		return true
	}
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == '_' }) {
		if !isWord(part) {
			return false
		}
	}
	return true
}

// isWord reports whether part, a run of letters and digits, is a word as
// ReadsLikeName means it: lower-case letters, upper-case letters, or
// capitalised words run together ("discordBot", "DiscordBot"), any of them
// followed by digits, or digits alone.
func isWord(part string) bool {
	isUpper := func(c byte) bool { return 'A' <= c && c <= 'Z' }
	isLower := func(c byte) bool { return 'a' <= c && c <= 'z' }
	i := 0
	for i < len(part) && isUpper(part[i]) {
		i++
	}
	if i <= 1 {
		// Capitalised words, or lower case: [A-Z]?[a-z]+, repeated.
		i = 0
		for i < len(part) {
			j := i
			if isUpper(part[j]) {
				j++
			}
			k := j
			for k < len(part) && isLower(part[k]) {
				k++
			}
			if k == j {
				break // no lower case after it: a letter alone, or digits
			}
			i = k
		}
		if i == 0 && len(part) > 0 && isUpper(part[0]) {
			i = 1 // one capital, perhaps with digits after it
		}
	} else if i < len(part) && isLower(part[i]) {
		return false // "HTTPServer": capitals run into a word
	}
	for i < len(part) && '0' <= part[i] && part[i] <= '9' {
		i++
	}
	return i == len(part)
}

// ParseDigest reads "sha256:<64 hex digits>". The error shows at most the
// first hex digits of the text and the position of the first character that
// is not one, never the rest: the text may be a secret pasted in the wrong
// place.
func ParseDigest(s string) ([sha256.Size]byte, error) {
	var d [sha256.Size]byte
	hexText, ok := strings.CutPrefix(s, DigestPrefix)
	if !ok {
		return d, fmt.Errorf("malformed digest (want %s and 64 hex digits)", DigestPrefix)
	}
	n := 0 // leading hex digits
	for n < len(hexText) && isHex(hexText[n]) {
		n++
	}
	shown := DigestPrefix + hexText[:min(n, digestShown)]
	if len(hexText) > min(n, digestShown) {
		shown += "…"
	}
	if n < len(hexText) {
		return d, fmt.Errorf("malformed digest '%s' (want %s and 64 hex digits; character %d is not a hex digit)",
			shown, DigestPrefix, len(DigestPrefix)+n+1)
	}
	if n != 2*sha256.Size {
		return d, fmt.Errorf("malformed digest '%s' (want %s and 64 hex digits, got %d)", shown, DigestPrefix, n)
	}
	if _, err := hex.Decode(d[:], []byte(hexText)); err != nil {
		// Unreachable: every character was checked above.
		return d, fmt.Errorf("malformed digest '%s'", shown)
	}
	return d, nil
}

// Digest returns "sha256:<lowercase hex>" of secret: the form of a key that
// keeps the secret out of the config.
func Digest(secret string) string {
	d := sha256.Sum256([]byte(secret))
	return DigestPrefix + hex.EncodeToString(d[:])
}

// DefaultName is the name of the n-th key (counting from 1) when it has none.
func DefaultName(n int) string {
	return "key-" + strconv.Itoa(n)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
