package caddymodule

// This file is the configured keys as the request path uses them: the
// keyring built at provision time, and each key's name, scope and cap.

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
)

// minKeyLength is the length under which a plain secret gets a startup warning.
const minKeyLength = apikey.MinSecretAlone

// loadKeys expands the configured keys and builds the keyring, and what the
// request path needs to know of each key: entries with one name are one key
// with several secrets (a key being rotated), with one keyInfo. reload says
// the config replaces a running one (checkEnvRevision). Errors and
// warnings name an entry by its position in auth.keys, counting from 0 as a
// JSON path does, and its name (when it is a valid one), never by its text:
// that may be the secret, or part of it.
func loadKeys(configured []apikey.Key, reload bool, logger *zap.Logger) (*apikey.Keyring, []keyInfo, error) {
	// Each key as written first, then each expanded: a mistake in the
	// config is named before a placeholder that has no value here.
	where := make([]string, len(configured))
	for i, k := range configured {
		name := k.Name
		if name == "" {
			name = apikey.DefaultName(i + 1)
		} else if apikey.ValidateName(k.Name) != nil {
			name = ""
		}
		where[i] = "auth." + apikey.EntryPath(i, name)
		if placeholderOnly(k.Secret) {
			// A reference such as {env.NAME} is no secret, and names what to fix.
			where[i] += " " + k.Secret
		}
		if err := k.Validate(); errors.Is(err, apikey.ErrNameAlone) {
			return nil, nil, fmt.Errorf("%s: %v: %s", where[i], err, nameAloneFix(`{"name": "NAME", "key": "SECRET"}`))
		} else if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", where[i], err)
		}
		for _, ep := range k.Endpoints {
			if !validEndpointName(ep) {
				return nil, nil, fmt.Errorf("%s: endpoints: %v", where[i], endpointNameError(ep))
			}
		}
	}
	repl := caddy.NewReplacer()
	keys := make([]apikey.Key, len(configured))
	for i, k := range configured {
		// The source of a key read from the environment or a file is
		// looked at first: what it held and what to write, rather than
		// the replacer's "is empty". What it held is the secret: the
		// file is read once, so that what is judged is what is used.
		src := readKeySource(k.Secret)
		if why := src.problem(cmp.Or(k.Name, apikey.DefaultName(i+1))); why != "" {
			return nil, nil, fmt.Errorf("%s: %s", where[i], why)
		}
		secret, fromSource := src.value()
		var err error
		if !fromSource {
			secret, err = repl.ReplaceOrErr(k.Secret, true, true)
		}
		if err != nil {
			if !placeholderOnly(k.Secret) {
				// The replacer's message quotes the placeholder: here a
				// part of the key, which may be a secret with braces in it.
				err = errPlaceholder
			}
			return nil, nil, fmt.Errorf("%s: %v", where[i], err)
		}
		secret = strings.TrimSpace(secret)
		if secret == "" {
			return nil, nil, fmt.Errorf("%s resolves to an empty string", where[i])
		}
		if err := apikey.SecretTextError(secret); err != nil {
			return nil, nil, fmt.Errorf("%s: %s", where[i], keyTextError(k.Secret, err))
		}
		if !strings.HasPrefix(secret, apikey.DigestPrefix) && len(secret) < minKeyLength {
			name := k.Name
			if name == "" {
				name = apikey.DefaultName(i + 1)
			}
			logger.Warn("short API key: use at least 16 random characters (caddy statusgate-key makes one)",
				zap.Int("key_index", i), zap.String("key", name), zap.Int("min_length", minKeyLength))
		}
		if err := checkEnvRevision(k, secret, where[i], reload, logger); err != nil {
			return nil, nil, err
		}
		k.Secret = secret
		keys[i] = k
	}
	kr, err := apikey.NewKeyring(keys)
	if err != nil {
		return nil, nil, fmt.Errorf("auth.%v", err)
	}
	info := make([]keyInfo, 0, kr.Len())
	for i, name := range kr.Names() {
		first := kr.First(i)
		ki := newKeyInfo(name, first, configured[first])
		if configured[first].Name == "" {
			// An unnamed key is named by its place in this handler's list
			// (key-2), which another handler's list gives to another key:
			// at the guard, which handlers in front of one backend share,
			// it is counted by the key itself.
			ki.holder += " " + unnamedHolder(keys[first].Secret)
		}
		info = append(info, ki)
	}
	return kr, info, nil
}

// checkEnvRevision compares the revision of an {env.*} key k, written where
// the config was adapted (caddy reload's own process, with its own
// environment), with the value secret the variable has in this process,
// whose environment is fixed since it started: a reload cannot change it.
// A reload that would have (the values differ) is refused, so that caddy
// reload fails saying so rather than leave the old secret valid behind a
// reload that succeeded; at startup (caddy run --resume of a config saved
// before a restart with a new value) it is a warning: the value in force
// is the new one.
func checkEnvRevision(k apikey.Key, secret, where string, reload bool, logger *zap.Logger) error {
	if k.Revision == "" || !strings.HasPrefix(k.Secret, "{env.") {
		return nil
	}
	rev, err := revisionOf(secret)
	if err != nil || rev == k.Revision || !sameRevisionKey(rev, k.Revision) {
		return nil // the same value, or revisions that cannot be compared
	}
	const why = "the environment variable has another value here than where the config was adapted (caddy reload's own environment, or another machine), and a running Caddy's environment is fixed when it starts"
	if reload {
		return fmt.Errorf("%s: %s, so a reload cannot change the key: restart Caddy with the new value, or keep the key in a file ({file./path}), which caddy reload reads again (docs/keys.md)", where, why)
	}
	logger.Warn(why+": the key is this process's value", zap.String("key", where))
	return nil
}

// unnamedHolder tells an unnamed key apart at the guard by its secret's
// digest (a digest written in the config is its own): the same key in two
// handlers' lists is one key, two keys at one position are two.
func unnamedHolder(secret string) string {
	d, ok := strings.CutPrefix(secret, apikey.DigestPrefix)
	if !ok {
		d = strings.TrimPrefix(apikey.Digest(secret), apikey.DigestPrefix)
	}
	return d[:min(len(d), 16)]
}

// keyTextError is err, apikey.SecretTextError's of the expanded text of
// the key written as secret, saying where the text came from: the file or
// the environment variable a placeholder names, or the key as written.
func keyTextError(secret string, err error) string {
	source := "the key's text is"
	if placeholderOnly(secret) {
		ref := secret[1 : len(secret)-1]
		if path, ok := strings.CutPrefix(ref, "file."); ok {
			source = "the file " + path + " holds what is"
		} else if name, ok := strings.CutPrefix(ref, "env."); ok {
			source = "the environment variable " + name + " holds what is"
		}
	} else if strings.Contains(secret, "{") {
		source = "the key's text, its placeholders expanded, is"
	}
	return source + " " + err.Error()
}

// nameAloneFix is the end of the error for a key without a name that reads
// like one (apikey.ErrNameAlone): the two fixes, with the named form of the
// config at hand (the Caddyfile's line or the JSON's object), and what a
// secret written alone may be.
func nameAloneFix(named string) string {
	return "write " + named + ", or make a key with caddy statusgate-key --name NAME and paste its lines " +
		"(a secret alone must be a sha256: digest, a placeholder such as {env.NAME}, or 16 or more characters that are not words: docs/keys.md)"
}

// keyInfo is what the request path needs to know of one accepted key: its
// name, what it opens and how much of the backend it may take.
type keyInfo struct {
	// name is the key's name as a placeholder value: boxed once here, so
	// that setting the placeholder allocates nothing.
	name any
	// entry is the key's first entry in auth.keys: a key being rotated has
	// one entry per secret, which agree on its scope, cap and share.
	entry int
	// holder names the key for the per-client limits and its own cap
	// ("key <name>"): never an address.
	holder    string
	endpoints map[string]bool // the endpoints it opens besides the index; nil: every endpoint
	// maxInFlight is its cap on open requests, which the guard counts by
	// the key's name; 0: no cap of its own.
	maxInFlight int
	// held is its share of the held bytes (keyShares), counted by the key's
	// name.
	held hold.Share
}

func newKeyInfo(name string, entry int, k apikey.Key) keyInfo {
	s := keyInfo{name: name, entry: entry, holder: "key " + name, maxInFlight: k.MaxInFlight}
	if k.Endpoints != nil {
		s.endpoints = make(map[string]bool, len(k.Endpoints))
		for _, ep := range k.Endpoints {
			s.endpoints[ep] = true
		}
	}
	return s
}

// opens reports whether the key opens the endpoint called name. The index is
// in every scope: it lists what the key opens.
func (s keyInfo) opens(name string) bool {
	return s.endpoints == nil || name == "index" || s.endpoints[name]
}

// errPlaceholder is the error for a key with a placeholder Caddy cannot
// expand. It quotes nothing: the "placeholder" may be part of a secret.
var errPlaceholder = errors.New(`a placeholder in the key is unknown or empty (placeholders: {env.*}, {file.*}, {system.*}, {time.*}; a literal brace is written \{ or \})`)

// keyShares gives every key of info, configured as keys, its share of the
// held bytes under the guard's limits l: its own max_held, checked against
// l, or keyShare; writeTimeout is the handler's. Errors name the key as
// loadKeys does.
func keyShares(info []keyInfo, keys []apikey.Key, l guard.Limits, writeTimeout time.Duration) error {
	for i := range info {
		k := keys[info[i].entry]
		if k.MaxHeld > 0 {
			if err := keyHeldError(k.MaxHeld, strconv.FormatInt(k.MaxHeld, 10), l); err != nil {
				return fmt.Errorf("auth.%s: %v", apikey.EntryPath(info[i].entry, fmt.Sprint(info[i].name)), err)
			}
		}
		info[i].held = keyShare(k, l, writeTimeout)
	}
	return nil
}

// keyShare is the share of the held bytes of key k under the limits l: its
// max_held, or by default enough for as many answers of max_response as the
// guard admits for it at once (its max_in_flight, or the backend's), so that
// a key that reads what it asks for is never refused for what it holds while
// it reads; at most a quarter of max_held (Limits.KeyShare), so that a key
// that stops reading, with anonymous callers at their half, leaves the other
// keys a quarter, and never less than an address's
// share. Either way it is judged by progress (hold.Share): a key is the
// operator's client, refused for its bytes only once it has taken nothing
// of them for half of writeTimeout (0: off, and half the default then): past
// the bursts in which a slow reader takes its answers, and before the cut.
func keyShare(k apikey.Key, l guard.Limits, writeTimeout time.Duration) hold.Share {
	s := hold.Share{Bytes: k.MaxHeld, Patience: cmp.Or(writeTimeout, defaultWriteTimeout) / 2, Keyed: true}
	if s.Bytes > 0 {
		return s
	}
	admitted := cmp.Or(k.MaxInFlight, l.InFlight) // 0: no admission control
	s.Bytes = l.KeyShare()
	if admitted > 0 {
		s.Bytes = min(s.Bytes, int64(admitted)*l.MaxResponse)
	}
	s.Bytes = max(s.Bytes, l.ClientShare())
	return s
}

// keyHeldError says why a key's max_held of held bytes, written as shown,
// does not fit the guard's limits l, or nil: the share is part of the
// guard's max_held, and must hold an answer of max_response. The Caddyfile's
// rule and the JSON's.
func keyHeldError(held int64, shown string, l guard.Limits) error {
	switch {
	case held > l.MaxHeld && l.Instances > 1:
		return fmt.Errorf("max_held: %s is more than this gateway's share of the guard's max_held, %s (max_held / instances %d): a key's share is part of it; write at most %s, or raise max_held",
			shown, sizeText(l.MaxHeld), l.Instances, sizeText(l.MaxHeld))
	case held > l.MaxHeld:
		return fmt.Errorf("max_held: %s is more than the guard's max_held, %s: a key's share is part of it; write at most %s, or raise max_held",
			shown, sizeText(l.MaxHeld), sizeText(l.MaxHeld))
	case held < l.MaxResponse:
		return fmt.Errorf("max_held: %s is less than max_response, %s: an answer that large could never be held for the key; write at least %s, or lower max_response",
			shown, sizeText(l.MaxResponse), sizeText(l.MaxResponse))
	}
	return nil
}
