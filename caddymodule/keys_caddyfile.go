package caddymodule

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/internal/nearest"
)

// keyArgs reads the arguments of the Caddyfile line
//
//	key [<name>] <secret|sha256:<hex>>
//
// (one argument is the secret, two are the name and the secret) and checks
// them with apikey.Key.Validate. One word that reads like a name
// (apikey.ReadsLikeName: `key website`, the secret forgotten) is refused
// with both fixes. A first of two words that looks like a
// secret (the form `caddy statusgate-key` makes, or a digest) is refused
// with errSecretAsName: two keys pasted on one line would otherwise make the
// first secret the second key's name, which logs and metrics publish. Errors
// start with "key: " and carry the file and line; none quotes a secret.
func keyArgs(d *caddyfile.Dispenser) (apikey.Key, error) {
	line := *d // the word key, whose line emptyVariable reads
	args := d.RemainingArgs()
	if len(args) < 2 {
		// An empty {$VAR} leaves no word behind: `key bot {$BOT_SECRET}`
		// reads as `key bot`, and the error below would blame the name.
		if v, ok := emptyVariable(line.File(), line.Line()); ok {
			return apikey.Key{}, line.Errf("key: {$%s} is empty, so the line has no secret: the environment variable %s is not set, or is set to nothing, where the Caddyfile was adapted (the Caddyfile parser replaces {$VAR} with its value before statusgate reads the line); set it (caddy reload adapts the Caddyfile in its own environment), or write {env.%s}, which the gateway reads when the config loads and refuses if empty", v, v, v)
		}
	}
	// A {$VAR} whose value is a line of the generator's output, or two
	// words, leaves its words on the line, and the errors below would blame
	// the line's words; the variable is named instead.
	for _, v := range lineVariables(line.File(), line.Line()) {
		if err := apikey.SecretTextError(v.value); v.value != "" && err != nil {
			return apikey.Key{}, line.Errf("key: the environment variable %s, which {$%s} on this line stands for, holds what is %v", v.name, v.name, err)
		}
	}
	var k apikey.Key
	switch len(args) {
	case 1:
		k.Secret = args[0]
	case 2:
		k.Name, k.Secret = args[0], args[1]
		if apikey.IsGenerated(k.Name) || apikey.ReadsAsSecret(k.Name) || strings.HasPrefix(k.Name, apikey.DigestPrefix) {
			return apikey.Key{}, d.Errf("key: %v", errSecretAsName)
		}
		if err := apikey.ValidateName(k.Name); err != nil {
			return apikey.Key{}, d.Errf("key: %v; write key <name> <secret>", err)
		}
	default:
		return apikey.Key{}, d.Errf("key: want [<name>] <secret|sha256:<hex>>, got %d arguments", len(args))
	}
	if err := k.Validate(); errors.Is(err, apikey.ErrNameAlone) {
		return apikey.Key{}, d.Errf("key: %v: %s", err, nameAloneFix("key <name> <secret>"))
	} else if err != nil {
		return apikey.Key{}, d.Errf("key: %v", err)
	}
	return k, nil
}

// adaptedWithout is the warning of the key name whose source (src) gives
// no secret where the Caddyfile is adapted, why being src.problem's: the
// load refuses it unless caddy has one where it runs; and a file that
// cannot be read here, which caddy itself may read (caddy reload runs as
// another user), gets no revision, so that a reload cannot tell when it
// changes (docs/keys.md).
func adaptedWithout(src keySource, name, why string) string {
	msg := "key " + name + " has no secret where the Caddyfile is adapted: " + why + "; caddy refuses the config unless it has one where caddy runs"
	if src.kind == "file" && src.err != nil {
		msg += ", and if caddy can read it, caddy reload cannot tell when it changes: after changing it, reload with caddy reload --force"
	}
	return msg
}

// keyRevision is the revision (revisionOf) of the key secret, one {file.*}
// or {env.*} placeholder, of the Caddyfile line at, whose source read as
// src: the fingerprint of its value here, which makes the adapted JSON
// change when the file does, so that caddy reload applies a new secret. ""
// for any other key, and for a source that gives no value here (a file
// that cannot be read, which sealKey logs: its change then needs caddy
// reload --force; an empty variable needs nothing: the running Caddy's
// environment is its own, docs/keys.md).
func keyRevision(src keySource, secret, at string) string {
	value, ok := src.value()
	if !ok {
		return ""
	}
	rev, err := revisionOf(value)
	if err != nil {
		caddy.Log().Warn("no revision for a key read from a file or the environment: caddy reload cannot tell when it changes; after changing it, reload with caddy reload --force",
			zap.String("at", at), zap.String("key", secret), zap.Error(err))
	}
	return rev
}

// errSecretAsName is the error for a key whose name looks like a secret.
var errSecretAsName = errors.New("the first of two words looks like a secret, not a name; write key <name> <secret>")

// keyLine is what the Caddyfile adapter keeps of a key line it has read:
// where it is, its name, and digests, never a secret.
type keyLine struct {
	at     string             // file:line
	name   *[sha256.Size]byte // the SHA-256 of the name; nil for an unnamed key
	secret *[sha256.Size]byte // the secret's digest; nil for a placeholder
	// called is the key's name, or its default name (key-<n>) when unnamed
	// says it has none.
	called  string
	unnamed bool
	limits  apikey.Key // the line's scope and cap, without the secret
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
// metrics would publish. So are the mistakes apikey.NewKeyring finds in the
// JSON, here with the lines: a secret that another line has too, lines of
// one name (one key being rotated) whose scopes or caps differ, and a name
// that is an unnamed line's name by its position. Errors quote no part of a
// secret.
func sealKey(k apikey.Key, at string, before []keyLine) (apikey.Key, keyLine, error) {
	line := keyLine{at: at, called: k.Name, unnamed: k.Name == "",
		limits: apikey.Key{Name: k.Name, Endpoints: k.Endpoints, MaxInFlight: k.MaxInFlight, MaxHeld: k.MaxHeld}}
	if k.Name != "" {
		d := sha256.Sum256([]byte(k.Name))
		line.name = &d
	} else {
		line.called = apikey.DefaultName(len(before) + 1)
	}
	known, unknown := placeholders(k.Secret)
	if unknown {
		return k, line, fmt.Errorf("key: %v", errPlaceholder)
	}
	// The source is read once: the checks below and the revision judge one
	// text.
	src := readKeySource(k.Secret)
	if value, ok := src.value(); ok {
		// The file or variable as it is here: a line of the generator's
		// output in it is refused with the line that names it (Provision
		// refuses it too, where the config loads).
		if err := apikey.SecretTextError(value); err != nil {
			return k, line, fmt.Errorf("key: %s", keyTextError(k.Secret, err))
		}
	}
	if why := src.problem(cmp.Or(k.Name, line.called)); why != "" {
		// Said here with the line: for caddy run, where the config then
		// loads, this is the state of the source the load will refuse.
		caddy.Log().Warn(adaptedWithout(src, cmp.Or(k.Name, line.called), why),
			zap.String("at", at), zap.String("key", k.Secret))
	} else {
		k.Revision = keyRevision(src, k.Secret, at)
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
	for _, prev := range before {
		if line.secret != nil && prev.secret != nil && *line.secret == *prev.secret {
			return k, line, fmt.Errorf("key: the same secret as the key at %s: a caller presenting it would be two keys at once; give each key a secret of its own (caddy statusgate-key makes one)", prev.at)
		}
		if line.called != prev.called {
			continue
		}
		if line.unnamed || prev.unnamed {
			unnamed, other := at, prev.at
			if prev.unnamed {
				unnamed, other = prev.at, at
			}
			return k, line, fmt.Errorf("key: '%s' is the name of the key at %s and, by its position, of the key at %s; give the key at %s a name of its own",
				line.called, other, unnamed, unnamed)
		}
		if what, same := apikey.SameLimits(prev.limits, line.limits); !same {
			return k, line, fmt.Errorf("key: %s not the same as on the key '%s' at %s, another secret of the key: %v", what, line.called, prev.at, apikey.ErrRotationLimits)
		}
	}
	return k, line, nil
}

// emptyVariable reports the name of an environment variable written as a
// whole argument ({$NAME} or {$NAME:default}, white space around it) on
// line n of the Caddyfile file that the Caddyfile parser replaced with
// nothing: the parser substitutes {$VAR} in the text before it makes
// tokens, and the tokens keep no trace of it, so the file is read again.
// ok is false when there is none, and when the file cannot be read (a
// Caddyfile that is not on disk): the error is then the one its words make.
func emptyVariable(file string, n int) (name string, ok bool) {
	for _, v := range lineVariables(file, n) {
		if v.value == "" {
			return v.name, true
		}
	}
	return "", false
}

// lineVariables are the environment variables written as whole arguments
// ({$NAME} or {$NAME:default}, quoted or not) on line n of the Caddyfile
// file, with the values the Caddyfile parser gave them, white space around
// them trimmed; none when the file cannot be read (a Caddyfile that is not
// on disk).
func lineVariables(file string, n int) []struct{ name, value string } {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	if n < 1 || n > len(lines) {
		return nil
	}
	var out []struct{ name, value string }
	for _, word := range strings.Fields(lines[n-1]) {
		m := envArg.FindStringSubmatch(strings.Trim(word, `"`))
		if m == nil {
			continue
		}
		// As the parser does: the default only for a variable not set.
		v, found := os.LookupEnv(m[1])
		if !found && m[2] != "" {
			v = strings.TrimPrefix(m[2], ":")
		}
		out = append(out, struct{ name, value string }{m[1], strings.TrimSpace(v)})
	}
	return out
}

// envArg is a word that is one {$NAME} or {$NAME:default} and nothing else.
var envArg = regexp.MustCompile(`^\{\$([^}:]+)(:[^}]*)?\}$`)

// checkKeyHeld checks each key's max_held, held[i] as written, against the
// block's limits b, once the block is read (max_held and max_response may
// come after the key): keyHeldError, with the key's max_held line. Limits
// that do not resolve are left to Provision, which names them.
func checkKeyHeld(keys []apikey.Key, held []asWritten, b BackendConfig) error {
	l, err := resolveLimits(b)
	if err != nil {
		return nil
	}
	for i, k := range keys {
		if held[i].word == "" {
			continue
		}
		if err := keyHeldError(k.MaxHeld, "'"+held[i].word+"'", l); err != nil {
			return held[i].d.Errf("%v", err)
		}
	}
	return nil
}

// keyBlock reads the optional block of a key line into k: its scope, its cap
// and its share of the held bytes, whose word and line it writes to held.
// Every error names the word and the line.
func keyBlock(d *caddyfile.Dispenser, k *apikey.Key, held *asWritten) error {
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		switch opt {
		case "endpoints":
			if !d.NextArg() {
				return d.Errf("endpoints: name at least one endpoint (leave the line out for every endpoint)")
			}
			for {
				name := d.Val()
				if !validEndpointName(name) {
					return d.Errf("endpoints: %v", endpointNameError(name))
				}
				if !slices.Contains(k.Endpoints, name) {
					k.Endpoints = append(k.Endpoints, name)
				}
				if !d.NextArg() {
					break
				}
			}

		case "max_in_flight":
			if seen[opt] {
				return d.Errf("'%s' given twice", opt)
			}
			seen[opt] = true
			if !d.NextArg() {
				return argErr(d, opt, keySyntax)
			}
			n, err := positiveInt(d, opt, false)
			if err != nil {
				return err
			}
			if d.NextArg() {
				return argErr(d, opt, keySyntax)
			}
			k.MaxInFlight = n

		case "max_held":
			if seen[opt] {
				return d.Errf("'%s' given twice", opt)
			}
			seen[opt] = true
			n, err := oneArg(d, opt, keyHeldWord)
			if err != nil {
				return err
			}
			k.MaxHeld = n
			*held = asWritten{word: d.Val(), d: *d}

		default:
			return d.Errf("unrecognized key subdirective '%s'%s", opt, nearest.Suggest(opt, optionNames(keySyntax)))
		}
	}
	return nil
}

// keyHeldWord reads the current token, the argument of a key's max_held, as
// a size; off is no size: every key has a share.
func keyHeldWord(d *caddyfile.Dispenser, opt string) (int64, error) {
	if d.Val() == "off" {
		return 0, d.Errf("%s: 'off' is not a size: a key's share of the held bytes cannot be off; write a size such as 16MiB, or leave %s out for the key's default share", opt, opt)
	}
	return sizeWord(d, opt)
}
