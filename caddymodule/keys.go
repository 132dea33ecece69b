package caddymodule

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

// minKeyLength is the length under which a plain secret gets a startup warning.
const minKeyLength = 16

// provisionKeys expands the configured keys and builds the keyring. Errors and
// warnings name a key by its position in auth.keys and its name (when it is a
// valid one), never by its text: that may be the secret, or part of it.
func (h *Handler) provisionKeys() error {
	repl := caddy.NewReplacer()
	keys := make([]apikey.Key, len(h.Auth.Keys))
	for i, k := range h.Auth.Keys {
		name := k.Name
		if name == "" {
			name = apikey.DefaultName(i + 1)
		}
		where := fmt.Sprintf("auth.keys[%d]", i)
		if k.Name == "" || apikey.ValidateName(k.Name) == nil {
			where += " '" + name + "'"
		}
		reference := placeholderOnly(k.Secret)
		if reference {
			// A reference such as {env.NAME} is no secret, and names what to fix.
			where += " " + k.Secret
		}
		if err := k.Validate(); err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		for _, ep := range k.Endpoints {
			if !validEndpointName(ep) {
				return fmt.Errorf("%s: endpoints: %v", where, endpointNameError(ep))
			}
		}
		secret, err := repl.ReplaceOrErr(k.Secret, true, true)
		if err != nil {
			if !reference {
				// The replacer's message quotes the placeholder: here a
				// part of the key, which may be a secret with braces in it.
				err = errPlaceholder
			}
			return fmt.Errorf("%s: %v", where, err)
		}
		secret = strings.TrimSpace(secret)
		if secret == "" {
			return fmt.Errorf("%s resolves to an empty string", where)
		}
		if !strings.HasPrefix(secret, apikey.DigestPrefix) && len(secret) < minKeyLength {
			h.logger.Warn("short API key: use at least 16 random characters (caddy statusgate-key makes one)",
				zap.Int("key_index", i), zap.String("key", name), zap.Int("min_length", minKeyLength))
		}
		keys[i] = apikey.Key{Name: k.Name, Secret: secret}
	}
	kr, err := apikey.NewKeyring(keys)
	if err != nil {
		return fmt.Errorf("auth.keys: %v", err)
	}
	h.keys = kr
	h.keyInfo = h.keyInfo[:0]
	for i, name := range kr.Names() {
		h.keyInfo = append(h.keyInfo, newKeyInfo(name, h.Auth.Keys[i]))
	}
	return nil
}

// keyInfo is what the request path needs to know of one accepted key: its
// name, what it opens and how much of the backend it may take.
type keyInfo struct {
	// name is the key's name as a placeholder value: boxed once here, so
	// that setting the placeholder allocates nothing.
	name any
	// holder names the key for the per-client limits and its own cap
	// ("key <name>"): never an address.
	holder    string
	endpoints map[string]bool // the endpoints it opens besides the index; nil: every endpoint
	// maxInFlight is its cap on open requests, which the guard counts by
	// the key's name; 0: no cap of its own.
	maxInFlight int
}

func newKeyInfo(name string, k apikey.Key) keyInfo {
	s := keyInfo{name: name, holder: "key " + name, maxInFlight: k.MaxInFlight}
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

// placeholderOnly reports whether a configured key is one placeholder that
// Provision expands and nothing else, such as {env.NAME} or {file./path}: a
// reference, which errors may show.
func placeholderOnly(s string) bool {
	known, unknown := placeholders(s)
	return known && !unknown &&
		len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && strings.Count(s, "{") == 1 && strings.Count(s, "}") == 1
}

// placeholders reports whether s holds placeholders that Provision expands
// (those of caddy.NewReplacer: {env.*}, {file.*}, {system.*}, {time.*}) and
// whether it holds any other, which Provision refuses. It finds them the way
// Caddy's replacer does (a brace written \{ opens none), and reads no file.
func placeholders(s string) (known, unknown bool) {
	global := caddy.NewReplacer()
	_, _ = caddy.NewEmptyReplacer().ReplaceFunc(s, func(key string, _ any) (any, error) {
		// {file.*} by its prefix: the global replacer would read the file.
		if strings.HasPrefix(key, "file.") {
			known = true
		} else if _, ok := global.Get(key); ok {
			known = true
		} else {
			unknown = true
		}
		return nil, nil
	})
	return known, unknown
}

// errPlaceholder is the error for a key with a placeholder Caddy cannot
// expand. It quotes nothing: the "placeholder" may be part of a secret.
var errPlaceholder = errors.New(`a placeholder in the key is unknown or empty (placeholders: {env.*}, {file.*}, {system.*}, {time.*}; a literal brace is written \{ or \})`)

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

// noKey is the key position of a caller without an accepted key.
const noKey = -1

// authenticate returns the keyring position of the accepted key the request
// carries, or noKey. It is the request's one keyring lookup, made for every
// request under /api whatever its path, and counts the key (or the unknown
// key) in the metrics. A key longer than apikey.MaxSecretLength is unknown
// without being hashed. While auth is off no key is looked up: every caller
// counts as authenticated, as the backend reports it, and none is named.
//
// The X-API-Key header decides when present, even empty (as the backend does);
// only when it is absent, and allow_query_key is on, does the first ?key= pair
// count. Values are trimmed of spaces and tabs like the backend's JDK server
// trims header values; an empty value is no key at all.
func (h *Handler) authenticate(r *http.Request) int {
	if !h.authOn {
		return noKey
	}
	var key string
	if vals, ok := r.Header["X-Api-Key"]; ok {
		key = vals[0]
	} else if h.qkey {
		key, _ = queryKey(r.URL.RawQuery)
	}
	key = strings.Trim(key, " \t")
	if key == "" {
		return noKey
	}
	i, ok := h.keys.Match(key)
	if !ok {
		h.metrics.UnknownKey()
		return noKey
	}
	h.metrics.KeyUsed(i)
	return i
}

// plainTarget reports whether Caddy's access log can filter the request
// target as the gateway reads it. The log's query filter (format filter with
// request>uri query { delete key }) parses the logged target with net/url:
// an absolute-form target ("GET http://host/api/v1/bans?x=#&key=…") leaves
// everything after a '#' to the fragment, which it writes back unfiltered,
// and when the fragment holds a bad escape the parse fails and the target is
// logged as it came; the gateway, like Go's server, reads the query to the
// end, '#' and all. url.ParseQuery also skips every pair with a ';' or a bad
// %-escape, which the gateway and the backend read. A target with a '#'
// anywhere, or such a query, is refused before the key is read, so that no
// request that works puts a key where the filter cannot see it, and the
// refusal is left out of the access log (ServeHTTP).
func plainTarget(r *http.Request) bool {
	if strings.IndexByte(r.RequestURI, '#') >= 0 {
		return false
	}
	q := r.URL.RawQuery
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			return false
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return false
			}
			i += 2
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// queryKeyName is the query parameter that carries a key.
const queryKeyName = "key"

// forEachQueryPair calls fn for each '&'-separated pair of a raw query with the
// pair's decoded name, the way the backend reads names ('+' is a space,
// %-escapes decoded; a name that does not decode is compared as written).
// fn returns false to stop.
func forEachQueryPair(raw string, fn func(pair, name string) bool) {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		name, _, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(name, "%+") {
			if dec, err := url.QueryUnescape(name); err == nil {
				name = dec
			}
		}
		if !fn(pair, name) {
			return
		}
	}
}

// queryKey returns the value of the first key pair in a raw query, decoded.
func queryKey(raw string) (value string, found bool) {
	forEachQueryPair(raw, func(pair, name string) bool {
		if name != queryKeyName {
			return true
		}
		_, v, _ := strings.Cut(pair, "=")
		if dec, err := url.QueryUnescape(v); err == nil {
			v = dec
		}
		value, found = v, true
		return false
	})
	return value, found
}

// stripQueryKey returns the raw query without any key pair, in any spelling
// the backend would read as key. The rest is kept byte for byte.
func stripQueryKey(raw string) string {
	found := false
	forEachQueryPair(raw, func(_, name string) bool {
		found = name == queryKeyName
		return !found
	})
	if !found {
		return raw
	}
	var b strings.Builder
	first := true
	forEachQueryPair(raw, func(pair, name string) bool {
		if name != queryKeyName {
			if !first {
				b.WriteByte('&')
			}
			b.WriteString(pair)
			first = false
		}
		return true
	})
	return b.String()
}

// caller is who sent the request, as far as one endpoint is concerned: worked
// out once per request after routing, from the accepted key and its scope.
// A key outside its scope counts for nothing: its caller is, in everything
// the client can see or the limits count, a caller without a key.
type caller struct {
	// key is the accepted key's keyring position, or noKey. It is kept when
	// the key does not count here, for the key placeholder alone.
	key int
	// counts says the key opens this endpoint: the keyed queue class, no
	// per-client limit, the key's own cap.
	counts bool
	// authenticated says the endpoint treats the caller as authenticated:
	// its key counts, or auth is off. Everyone else gets the field layer and
	// meta.authenticated:false, or the 401/404 of a protected endpoint.
	authenticated bool
	// holder names the caller for the per-client limits (max_per_client and
	// the held bytes): its key's name when the key counts, its address
	// otherwise, worked out only for a request that goes to the backend
	// step (withAddress), so that a refusal costs the same whoever asks.
	holder string
	// keyCap is the key's own cap on open requests when the key counts;
	// 0: none.
	keyCap int
}

// anonymous is the caller of a request decided before its endpoint is known.
var anonymous = caller{key: noKey}

// filtered reports whether the caller's answers go through the field layer.
func (c caller) filtered() bool { return !c.authenticated }

// callerFor is the caller of a request to ep that presented key (a keyring
// position, or noKey).
func (h *Handler) callerFor(key int, ep *endpoint) caller {
	c := caller{key: key, authenticated: !h.authOn}
	if key != noKey && h.keyInfo[key].opens(ep.name) {
		k := &h.keyInfo[key]
		c.counts, c.authenticated = true, true
		c.holder, c.keyCap = k.holder, k.maxInFlight
	}
	return c
}

// withAddress names a caller whose key does not count by its address, for
// the per-client limits.
func (h *Handler) withAddress(c caller, r *http.Request) caller {
	if !c.counts {
		c.holder = clientAddress(r, h.guard.prefix6)
	}
	return c
}

// clientAddress is the caller's address as Caddy determined it (after
// trusted_proxies), or the connection's; an IPv6 address stands for its
// prefix of prefix6 bits, because one host commonly has a whole /64 to pick
// addresses from.
func clientAddress(r *http.Request, prefix6 int) string {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			return r.RemoteAddr
		}
		addr = ap.Addr()
	}
	addr = addr.Unmap()
	if addr.Is4() || prefix6 >= 128 {
		return addr.String()
	}
	p, _ := addr.WithZone("").Prefix(prefix6)
	return p.String()
}
