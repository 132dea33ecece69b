package guard

// This file is the ticket: what the guard is told of a request it fetches an
// answer for, and what the answer is shared under.

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
)

// Ticket is what the guard is told of a request it fetches an answer for:
// what the handler decided of it, which nothing in the guard changes.
type Ticket struct {
	Station *Station
	Caller  Caller
	Path    string // the decoded path the client sent: the gateway's envelopes show it
	// Share names the answer for everyone who may get the same bytes
	// (shareKey); "" when the endpoint's answers are each caller's own.
	Share string
	// Upstream is the declared backend's placeholders for this request:
	// which backend it reaches.
	Upstream upstream.Values
	// Next is the handlers after statusgate; nil where nothing can follow
	// it (its chain ends with it): a declared backend then has no gate to
	// run (send).
	Next caddyhttp.HandlerFunc
	// Secrets are what the caller presented as its key (internal/seal):
	// no request made for it may carry one. None for a caller without.
	Secrets []string
}

// Ticket is the guard's ticket for the canonical request r to ep by who,
// whose client sent path and picked the backend picked (resolve); next is
// what follows statusgate, nil where nothing can.
func (g *Guard) Ticket(r *http.Request, ep *Station, who Caller, path string, picked upstream.Values, next caddyhttp.Handler) *Ticket {
	t := &Ticket{Station: ep, Caller: who, Path: path, Upstream: picked}
	if next != nil {
		t.Next = next.ServeHTTP
	}
	if g.Shareable(ep) {
		t.Share = g.shareKey(r, who.Filtered(), t.Upstream)
		if who.Gateway && !who.Filtered() {
			// A network's trip to a member: the member's whole answer, which
			// the gateway reads and then filters for each handler's field
			// lists, is the same whatever they are, so that every network
			// listing the member shares its one trip per snapshot.
			t.Share = strings.TrimPrefix(t.Share, g.policy)
		}
	}
	return t
}

// Resolve is the values of the declared backend's placeholders in repl, the
// client's request's: which backend it picks (nil: the declaration picks
// one, or none is declared). Read before statusgate rewrites the request.
func (g *Guard) Resolve(repl *caddy.Replacer) upstream.Values {
	if g.backend == nil || !g.backend.Placeholders() {
		return nil
	}
	return g.backend.Resolve(repl)
}

// Shareable reports whether the endpoint's answers may go to more than one
// caller (coalesced or cached): then the backend is asked for an unencoded
// body, the same for every caller of the class, and each caller is told not
// to store it (deliver).
func (g *Guard) Shareable(ep *Station) bool {
	return g.coalesce || ep.CacheTTL > 0
}

// shareKey names what a response depends on: the field lists in force
// (policy), whether it goes through the field layer, which alone decides the
// bytes a caller gets (filtered for a caller without a key while auth is on,
// the backend's for everyone else), the backend (the guard's scope, and the
// values of the placeholders in its declaration), the site (siteOf: the
// Host the backend is sent) and the canonical upstream request.
// Never the key itself.
func (g *Guard) shareKey(r *http.Request, filtered bool, backend upstream.Values) string {
	class := " whole "
	if filtered {
		class = " filtered "
	}
	return g.policy + class + g.scope + " " + backend.Key() + siteOf(r) + " " + r.URL.EscapedPath() + "?" + r.URL.RawQuery
}

// siteOf tells sites apart: the Host exactly as the backend is sent it
// (SentHost made it so before the request was decided: a panel behind the
// gateway that routes by Host routes every request of one share key alike),
// quoted, so that no Host reads as another's with a port, and the port the
// request came in on, so that two sites of one host name on two ports are
// two sites whatever Host a client sends.
func siteOf(r *http.Request) string {
	site := strconv.Quote(r.Host)
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, port, err := net.SplitHostPort(a.String()); err == nil {
			site += " port " + port
		}
	}
	return site
}

// SentHost is the Host the backend is sent for a client's Host, and the one
// its answers are shared under: the host as Caddy's host matcher reads it,
// in lower case (the matcher ignores case), without its port (the matcher
// ignores it too, and a port a client writes must not split one site's
// answers) and without a trailing dot, which the matcher does not ignore:
// survival.test. is survival.test to the client's resolver, but a panel's
// site survival.test would not match it, and would answer as its
// catch-all. An IPv6 literal keeps its brackets.
func SentHost(host string) string {
	// Only a host with a colon may have a port: SplitHostPort's error for
	// one without (most of them) costs every request an allocation.
	if strings.Contains(host, ":") {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
			if strings.Contains(h, ":") {
				host = "[" + h + "]"
			}
		}
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}
