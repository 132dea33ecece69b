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

// queryRule is what the backend reads of an endpoint's query, and so all of
// it that reaches the backend. The endpoint table gives it for each built-in
// endpoint; a custom station keeps its query (all).
type queryRule struct {
	// flags are what the backend looks for among the elements of the query,
	// decoded and then split on '&' (history=true): one counts wherever it
	// is and however it is spelled (history%3Dtrue, x=%26history=true), and
	// the backend gets each one that counts, spelled as here.
	flags []string
	// params are the names of the pairs the backend reads, each pair split
	// on '&' first and its name decoded as a form's ('+' a space, names
	// compared exactly); of several pairs of one name the last one counts.
	// The backend gets that one, as the client wrote it.
	params []string
	// all keeps the whole query but the key pairs: the gateway cannot know
	// what a custom station reads.
	all bool
}

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
