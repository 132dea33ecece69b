package caddymodule

import (
	"errors"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

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
