package guard

// This file is the ticket: what the guard is told of a request it fetches an
// answer for, and what the answer is shared under.

import (
	"net"
	"net/http"
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
	// (ShareKey); "" when the endpoint's answers are each caller's own.
	Share string
	// Upstream is the declared backend's placeholders for this request:
	// which backend it reaches.
	Upstream upstream.Values
	Next     caddyhttp.HandlerFunc // the handlers after statusgate
	// Secrets are what the caller presented as its key (internal/seal):
	// no request made for it may carry one. None for a caller without.
	Secrets []string
}

// Ticket is the guard's ticket for the canonical request r to ep by who,
// whose client sent path and picked the backend picked (resolve); next is
// what follows statusgate.
func (g *Guard) Ticket(r *http.Request, ep *Station, who Caller, path string, picked upstream.Values, next caddyhttp.Handler) *Ticket {
	t := &Ticket{Station: ep, Caller: who, Path: path, Upstream: picked, Next: next.ServeHTTP}
	if g.Shareable(ep) {
		t.Share = g.ShareKey(r, who.Filtered(), t.Upstream)
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
// to store it (Deliver).
func (g *Guard) Shareable(ep *Station) bool {
	return g.coalesce || ep.CacheTTL > 0
}

// ShareKey names what a response depends on: the field lists in force
// (policy), whether it goes through the field layer, which alone decides the
// bytes a caller gets (filtered for a caller without a key while auth is on,
// the backend's for everyone else), the backend (the guard's scope, and the
// values of the placeholders in its declaration), the site (siteOf: the
// client's Host reaches the backend) and the canonical upstream request.
// Never the key itself.
func (g *Guard) ShareKey(r *http.Request, filtered bool, backend upstream.Values) string {
	class := " whole "
	if filtered {
		class = " filtered "
	}
	return g.policy + class + g.scope + " " + backend.Key() + siteOf(r) + " " + r.URL.EscapedPath() + "?" + r.URL.RawQuery
}

// siteOf tells sites apart: the Host as Caddy's host matcher compares it
// (without the port and a trailing dot, in lower case), and the port the
// request came in on, so that two sites of one host name on two ports are
// two sites whatever Host a client sends.
func siteOf(r *http.Request) string {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	site := strings.ToLower(strings.TrimSuffix(host, "."))
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, port, err := net.SplitHostPort(a.String()); err == nil {
			site += " port " + port
		}
	}
	return site
}
