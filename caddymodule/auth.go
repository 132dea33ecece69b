package caddymodule

// This file is authentication: the one keyring lookup of a request, where
// the key may come from, and keeping it out of the backend's request and
// the access log.

import (
	"net/http"
	"strings"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
)

// access is what the key check needs: whether auth is on, the keyring and
// what each key opens, and where a key may come from.
type access struct {
	authOn  bool
	qkey    bool             // allow_query_key
	keys    *apikey.Keyring  // the accepted keys
	keyInfo []keyInfo        // each key's name, scope and cap, by keyring position
	metrics *metrics.Metrics // counts each key used, and unknown keys
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
func (a *access) authenticate(r *http.Request) int {
	if !a.authOn {
		return noKey
	}
	var key string
	if vals, ok := r.Header["X-Api-Key"]; ok {
		key = vals[0]
	} else if a.qkey {
		key, _ = queryKey(r.URL.RawQuery)
	}
	key = strings.Trim(key, " \t")
	if key == "" {
		return noKey
	}
	i, ok := a.keys.Match(key)
	if !ok {
		a.metrics.UnknownKey()
		return noKey
	}
	a.metrics.KeyUsed(i)
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
