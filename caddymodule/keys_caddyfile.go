package caddymodule

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

// keyArgs reads the arguments of the Caddyfile line
//
//	key [<name>] <secret|sha256:<hex>>
//
// (one argument is the secret, two are the name and the secret) and checks
// them with apikey.Key.Validate. A first of two words that looks like a
// secret (the form `caddy statusgate-key` makes, or a digest) is refused
// with errSecretAsName: two keys pasted on one line would otherwise make the
// first secret the second key's name, which logs and metrics publish. Errors
// start with "key: " and carry the file and line; none quotes a secret.
func keyArgs(d *caddyfile.Dispenser) (apikey.Key, error) {
	args := d.RemainingArgs()
	var k apikey.Key
	switch len(args) {
	case 1:
		k.Secret = args[0]
	case 2:
		k.Name, k.Secret = args[0], args[1]
		if apikey.IsGenerated(k.Name) || strings.HasPrefix(k.Name, apikey.DigestPrefix) {
			return apikey.Key{}, d.Errf("key: %v", errSecretAsName)
		}
		if err := apikey.ValidateName(k.Name); err != nil {
			return apikey.Key{}, d.Errf("key: %v; write key <name> <secret>", err)
		}
	default:
		return apikey.Key{}, d.Errf("key: want [<name>] <secret|sha256:<hex>>, got %d arguments", len(args))
	}
	if err := k.Validate(); err != nil {
		return apikey.Key{}, d.Errf("key: %v", err)
	}
	return k, nil
}

// errSecretAsName is the error for a key whose name looks like a secret.
var errSecretAsName = errors.New("the first of two words looks like a secret, not a name; write key <name> <secret>")

// keyLine is what the Caddyfile adapter keeps of a key line it has read:
// where it is, and digests, never a secret.
type keyLine struct {
	at     string             // file:line
	name   *[sha256.Size]byte // the SHA-256 of the name; nil for an unnamed key
	secret *[sha256.Size]byte // the secret's digest; nil for a placeholder
}

// sealKey turns the key of the Caddyfile line at (file:line) into the key
// the adapted JSON holds, and checks it against the key lines before it.
//
// A plain secret becomes its "sha256:" digest, so that the adapted config,
// and with it Caddy's autosave.json, the admin API's /config/ and Caddy's
// "adjusted config" debug log, never holds one. A {$VAR} is plain text by
// now (the Caddyfile parser substituted it) and is sealed too. A secret with
// a placeholder that Provision expands stays as written: its value is not
// known yet. One with a placeholder Caddy does not know is an error, as it
// would be at provision time, but here with its line.
//
// A name that is another line's secret, or a secret that is another line's
// name, is an error: a secret written where the name goes, which logs and
// metrics would publish. Errors quote no part of a secret.
func sealKey(k apikey.Key, at string, before []keyLine) (apikey.Key, keyLine, error) {
	line := keyLine{at: at}
	if k.Name != "" {
		d := sha256.Sum256([]byte(k.Name))
		line.name = &d
	}
	known, unknown := placeholders(k.Secret)
	if unknown {
		return k, line, fmt.Errorf("key: %v", errPlaceholder)
	}
	if !known && !strings.HasPrefix(k.Secret, apikey.DigestPrefix) {
		// What Provision would make of it: escaped braces unescaped, white
		// space trimmed. Provision cannot warn of a short key any more.
		secret := strings.TrimSpace(caddy.NewEmptyReplacer().ReplaceKnown(k.Secret, ""))
		if len(secret) > apikey.MaxSecretLength {
			// Its digest would never match: a presented key this long is no key.
			return k, line, fmt.Errorf("key: longer than %d bytes", apikey.MaxSecretLength)
		}
		if len(secret) < minKeyLength {
			caddy.Log().Warn("short API key: use at least 16 random characters (caddy statusgate-key makes one)",
				zap.String("at", at), zap.Int("min_length", minKeyLength))
		}
		k.Secret = apikey.Digest(secret)
	}
	if !known {
		d, err := apikey.ParseDigest(k.Secret)
		if err != nil {
			return k, line, fmt.Errorf("key: %v", err)
		}
		line.secret = &d
	}
	for _, prev := range before {
		if line.name != nil && prev.secret != nil && *line.name == *prev.secret {
			return k, line, fmt.Errorf("key: the first of two words is the secret of the key at %s, not a name; write key <name> <secret>", prev.at)
		}
		if line.secret != nil && prev.name != nil && *line.secret == *prev.name {
			return k, line, fmt.Errorf("key: the secret is the name of the key at %s; write key <name> <secret> there", prev.at)
		}
	}
	return k, line, nil
}
