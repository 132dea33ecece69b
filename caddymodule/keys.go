package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

// minKeyLength is the length under which a plain secret gets a startup warning.
const minKeyLength = 16

// provisionKeys expands the configured keys and builds the keyring. Errors and
// warnings name a key by its position in auth.keys and its name, never by its
// text: that may be the secret, or part of it.
func (h *Handler) provisionKeys() error {
	repl := caddy.NewReplacer()
	keys := make([]apikey.Key, len(h.Auth.Keys))
	for i, k := range h.Auth.Keys {
		name := k.Name
		if name == "" {
			name = apikey.DefaultName(i + 1)
		}
		where := fmt.Sprintf("auth.keys[%d] '%s'", i, name)
		if placeholderOnly(k.Secret) {
			// A reference such as {env.NAME} is no secret, and names what to fix.
			where += " " + k.Secret
		}
		if err := k.Validate(); err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		secret, err := repl.ReplaceOrErr(k.Secret, true, true)
		if err != nil {
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
	h.keyNames = h.keyNames[:0]
	for _, name := range kr.Names() {
		h.keyNames = append(h.keyNames, name)
	}
	return nil
}

// placeholderOnly reports whether a configured key is one placeholder and
// nothing else, such as {env.NAME} or {file./path}.
func placeholderOnly(s string) bool {
	return len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && strings.Count(s, "{") == 1 && strings.Count(s, "}") == 1
}

// noKey is the key position of a caller without an accepted key.
const noKey = -1

// authenticate returns the keyring position of the accepted key the request
// carries, or noKey. It is the request's one keyring lookup, and counts the
// key (or the unknown key) in the metrics. While auth is off no key is looked
// up: every caller counts as authenticated, as the backend reports it, and
// none is named.
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
