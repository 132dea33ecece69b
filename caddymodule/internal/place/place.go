// Package place tells where each handler of one module stands in a Caddy HTTP
// server: the server's listener addresses, the host matchers of the routes
// around it, and the backend of the handler that comes after it. statusgate
// names a guard it was not given a name for by its place, so that two
// handlers in front of different backends never share a guard, whatever
// order Caddy provisions its servers in (a map's) and however many reloads
// there are, and one handler finds its guard again after a reload that
// changed its keys, its policy or its limits.
//
// Caddy provisions a server's handlers depth first, in the order of its routes,
// then of its error routes, and clears each route's raw JSON once the route's
// handlers are loaded. When the module's first handler of a server is
// provisioned, every route that holds one of its handlers is still raw: Find,
// called then, lists them all in the order they will be provisioned. A handler
// that Find cannot see (in a named route, provisioned in map order, or in a
// module Find does not look into) is not in the list; the caller finds that
// out by comparing each handler's own config with its place's.
package place

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Place is where one handler stands.
type Place struct {
	// Listen are the server's listener addresses, sorted: no two servers
	// of a config have the same.
	Listen []string
	// Hosts are the host matchers of the routes around the handler, in
	// lower case, sorted; none: any host.
	Hosts []string
	// Backend is what the handler after it sends requests to: for a
	// reverse_proxy its upstreams (dial addresses, sorted, and dynamic
	// upstreams); for any other handler its JSON; empty when none comes
	// after it in its top-level route.
	Backend string
	// Config is the handler's JSON, as written in the config.
	Config json.RawMessage
	// Found says Find found the handler there. A place the caller makes
	// for a handler Find could not see has only the server's addresses.
	Found bool
}

// Identity is the place as one string: equal for two handlers exactly when
// they listen on the same addresses, for the same hosts, in front of the
// same backend.
func (p Place) Identity() string {
	return "listen=" + strings.Join(p.Listen, ",") + " hosts=" + strings.Join(p.Hosts, ",") + " backend=" + p.Backend
}

// String describes the place for an error message.
func (p Place) String() string {
	switch {
	case len(p.Listen) == 0:
		return "a handler outside any HTTP server"
	case !p.Found:
		return "a handler on " + strings.Join(p.Listen, " ") + ", in a place statusgate cannot see"
	}
	hosts := "any host"
	if len(p.Hosts) > 0 {
		hosts = "host " + strings.Join(p.Hosts, " ")
	}
	backend := p.Backend
	if backend == "" {
		backend = "nothing after it"
	}
	return "the site on " + strings.Join(p.Listen, " ") + " for " + hosts + ", in front of " + backend
}

// Find lists the places of the handlers of the module named module (its
// "handler" name, such as "statusgate") in srv's routes whose JSON is still
// raw, then in its error routes, in the order Caddy provisions them.
func Find(srv *caddyhttp.Server, module string) []Place {
	w := walker{module: module, listen: slices.Sorted(slices.Values(srv.Listen))}
	w.top(srv.Routes)
	if srv.Errors != nil {
		w.top(srv.Errors.Routes)
	}
	return w.places
}

type walker struct {
	module string
	listen []string
	places []Place
}

// handler is one handler of a top-level route, nested routes flattened, with
// the hosts of the routes around it.
type handler struct {
	name  string
	raw   json.RawMessage
	hosts []string
}

// top walks routes that Caddy has loaded, each with its matchers provisioned
// or still raw, and its handlers still raw (or loaded, and then of no
// concern: a loaded handler has been provisioned before the first of the
// module's).
func (w *walker) top(routes caddyhttp.RouteList) {
	for _, r := range routes {
		if r.HandlersRaw == nil {
			continue
		}
		hosts := typedHosts(r.MatcherSets)
		if r.MatcherSetsRaw != nil {
			hosts = rawHosts(r.MatcherSetsRaw)
		}
		var flat []handler
		flatten(&flat, r.HandlersRaw, hosts)
		w.add(flat)
	}
}

// add records the places of the module's handlers in the flattened handlers
// of one top-level route.
func (w *walker) add(flat []handler) {
	for i, h := range flat {
		if h.name != w.module {
			continue
		}
		p := Place{Listen: w.listen, Hosts: normalHosts(h.hosts), Config: h.raw, Found: true}
		for _, next := range flat[i+1:] {
			if next.name == w.module {
				continue // another of ours in front of the same backend
			}
			if next.name == "reverse_proxy" || p.Backend == "" {
				p.Backend = backendOf(next)
			}
			if next.name == "reverse_proxy" {
				break
			}
		}
		w.places = append(w.places, p)
	}
}

// route is a route as its JSON has it.
type route struct {
	Match  []map[string]json.RawMessage `json:"match"`
	Handle []json.RawMessage            `json:"handle"`
}

// container is what the handlers that hold routes of their own have: a
// subroute its routes and error routes, a reverse_proxy the routes that
// handle its responses.
type container struct {
	Handler string  `json:"handler"`
	Routes  []route `json:"routes"`
	Errors  *struct {
		Routes []route `json:"routes"`
	} `json:"errors"`
	HandleResponse []struct {
		Routes []route `json:"routes"`
	} `json:"handle_response"`
}

// flatten appends the handlers in raws, and the handlers of the routes they
// hold, depth first, to flat.
func flatten(flat *[]handler, raws []json.RawMessage, hosts []string) {
	for _, raw := range raws {
		var c container
		if json.Unmarshal(raw, &c) != nil {
			continue
		}
		*flat = append(*flat, handler{name: c.Handler, raw: raw, hosts: hosts})
		nested := c.Routes
		if c.Errors != nil {
			nested = append(nested, c.Errors.Routes...)
		}
		for _, hr := range c.HandleResponse {
			nested = append(nested, hr.Routes...)
		}
		for _, r := range nested {
			inner := slices.Clip(hosts)
			for _, set := range r.Match {
				var hs []string
				if json.Unmarshal(set["host"], &hs) == nil {
					inner = append(inner, hs...)
				}
			}
			flatten(flat, r.Handle, inner)
		}
	}
}

// backendOf is what a handler sends requests to.
func backendOf(h handler) string {
	if h.name == "reverse_proxy" {
		var rp struct {
			Upstreams []struct {
				Dial string `json:"dial"`
			} `json:"upstreams"`
			Dynamic json.RawMessage `json:"dynamic_upstreams"`
		}
		if json.Unmarshal(h.raw, &rp) == nil {
			var dials []string
			for _, u := range rp.Upstreams {
				dials = append(dials, u.Dial)
			}
			slices.Sort(dials)
			b := "reverse_proxy " + strings.Join(dials, " ")
			if len(rp.Dynamic) > 0 {
				b += " dynamic " + compact(rp.Dynamic)
			}
			return b
		}
	}
	return compact(h.raw)
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// typedHosts are the host matchers of provisioned matcher sets.
func typedHosts(sets caddyhttp.MatcherSets) []string {
	var hosts []string
	for _, set := range sets {
		for _, m := range set {
			switch m := m.(type) {
			case *caddyhttp.MatchHost:
				hosts = append(hosts, *m...)
			case caddyhttp.MatchHost:
				hosts = append(hosts, m...)
			}
		}
	}
	return hosts
}

// rawHosts are the host matchers of matcher sets not yet provisioned.
func rawHosts(sets caddyhttp.RawMatcherSets) []string {
	var hosts []string
	for _, set := range sets {
		var hs []string
		if json.Unmarshal(set["host"], &hs) == nil {
			hosts = append(hosts, hs...)
		}
	}
	return hosts
}

// normalHosts are hosts as Caddy's host matcher compares them: in lower case
// (it matches case-insensitively), each once, sorted.
func normalHosts(hosts []string) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, strings.ToLower(h))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
