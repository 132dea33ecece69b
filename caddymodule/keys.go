package caddymodule

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// keyring holds the SHA-256 digests of the accepted keys. Comparing digests of
// equal length in constant time, against every key without stopping early,
// tells an attacker neither how much of a key matched nor how long keys are.
type keyring [][sha256.Size]byte

func (k *keyring) add(key string) {
	*k = append(*k, sha256.Sum256([]byte(key)))
}

// accepts reports whether key is one of the configured keys.
func (k keyring) accepts(key string) bool {
	if len(k) == 0 {
		return false
	}
	d := sha256.Sum256([]byte(key))
	match := 0
	for i := range k {
		match |= subtle.ConstantTimeCompare(d[:], k[i][:])
	}
	return match == 1
}

// authenticate reports whether the request carries an accepted key. While auth
// is off every caller counts as authenticated, as the backend reports it.
//
// The X-API-Key header decides when present, even empty (as the backend does);
// only when it is absent, and allow_query_key is on, does the first ?key= pair
// count. Values are trimmed of spaces and tabs like the backend's JDK server
// trims header values.
func (h *Handler) authenticate(r *http.Request) bool {
	if !h.authOn {
		return true
	}
	var key string
	if vals, ok := r.Header["X-Api-Key"]; ok {
		key = vals[0]
	} else if h.qkey {
		var found bool
		if key, found = queryKey(r.URL.RawQuery); !found {
			return false
		}
	} else {
		return false
	}
	key = strings.Trim(key, " \t")
	return key != "" && h.keys.accepts(key)
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
