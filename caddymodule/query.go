package caddymodule

// This file is the query the backend gets: of a built-in endpoint's, only
// what the endpoint reads, in one spelling; of a custom station's, all of it
// but the key. What the backend gets is also what the share key, the cache
// key and a live stream's topic are made of (shareKey), so a query the
// endpoint does not read costs no trip and no cache entry of its own.

import (
	"net/url"
	"strings"
)

// upstreamQuery is the query the backend gets for ep when the client sent
// raw: what ep reads of it and nothing else, flags first, then the pairs in
// the order of ep's params, so that two spellings of one request are one
// request. A pair the backend would read as the key never reaches it.
func upstreamQuery(ep *endpoint, raw string) string {
	q := ep.query
	if q.all {
		return stripQueryKey(raw)
	}
	if raw == "" {
		return ""
	}
	var kept []string
	if len(q.flags) > 0 {
		// The query as the backend splits it for its flags: decoded first.
		// A target whose escapes do not decode never gets here (plainTarget);
		// if one did, no flag would count, and none would be sent.
		decoded, err := url.PathUnescape(raw)
		for _, flag := range q.flags {
			if err == nil && hasElement(decoded, flag) {
				kept = append(kept, flag)
			}
		}
	}
	for _, name := range q.params {
		last := ""
		forEachQueryPair(raw, func(pair, n string) bool {
			if n == name {
				last = pair
			}
			return true
		})
		if last != "" {
			kept = append(kept, last)
		}
	}
	if len(kept) == 1 {
		return kept[0] // a flag's constant, or a substring of raw: no allocation
	}
	return strings.Join(kept, "&")
}

// hasElement reports whether s, split on '&', has an element equal to e.
func hasElement(s, e string) bool {
	for el := range strings.SplitSeq(s, "&") {
		if el == e {
			return true
		}
	}
	return false
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
