// Package chain reads a provisioned HTTP app's routes the way Caddy runs
// them, to tell each handler what surely runs before it and whether
// anything can run after it. A handler cannot see the handlers that follow
// it; an app, once every app of the config is provisioned, can read them
// all.
//
// It is conservative both ways, so that a check built on it is never a
// false alarm: Before holds only handlers that run before the handler on
// every request that reaches it, and Followed is false only when no handler
// at all can come after it. What it cannot place it leaves out: named
// routes (invoke), and the routes inside other handlers (reverse_proxy's
// handle_response, intercept).
package chain

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Link is one handler of a server's routes, with what surrounds it.
type Link struct {
	// Handler is the provisioned handler.
	Handler caddyhttp.MiddlewareHandler
	// Before are the handlers that run before Handler on every request
	// that reaches it, in the order they run: the earlier handlers of its
	// route, and those of earlier routes (and their subroutes) that have
	// no matcher, or the same matchers as its own, and cannot end the
	// chain before it.
	Before []Step
	// Followed is whether any handler can run after Handler: a later one
	// of its route, a later route's, or one after the subroute it is in.
	// It is false only where the chain surely ends with Handler.
	Followed bool
	// Next are the handlers that can run after Handler, as its route list
	// holds them: the later ones of its route, every handler of the later
	// routes (a subroute as itself), and those that can follow the
	// subroute it is in. Empty where Followed is false.
	Next []Step
	// Where names its place for a user.
	Where Where
}

// Step is a handler that runs before another, and its JSON path.
type Step struct {
	Handler caddyhttp.MiddlewareHandler
	Path    string
}

// Where names a handler's place in the config, as a user can find it.
type Where struct {
	Server string   // the server's name (srv0 for the first of a Caddyfile)
	Listen []string // the server's listen addresses
	// Site is the host matcher of the routes it is under, if any: the
	// site's address in a Caddyfile.
	Site []string
	// Match are the matchers of the routes it is under, but for the host,
	// outermost first, each as "path /lobby/*" (a Caddyfile's handle,
	// handle_path and route blocks, and the directive's own matcher).
	Match []string
	// Path is its JSON path: apps.http.servers.<name>.routes[i].handle[j]....
	Path string
}

// String is the place as the errors print it: "server srv0 (listen :8080),
// site stats.example.com, route matching path /lobby/*, at apps.http….".
func (w Where) String() string {
	var b strings.Builder
	b.WriteString("server " + w.Server)
	if len(w.Listen) > 0 {
		b.WriteString(" (listen " + strings.Join(w.Listen, " ") + ")")
	}
	if len(w.Site) > 0 {
		b.WriteString(", site " + strings.Join(w.Site, " "))
	}
	if len(w.Match) > 0 {
		b.WriteString(", route matching " + strings.Join(w.Match, ", then "))
	}
	b.WriteString(", at " + w.Path)
	return b.String()
}

// Walk calls visit for each handler of an HTTP app's servers, in their routes and
// their error routes, descending into subroutes (handle, handle_path,
// route blocks, a site's block), in order of the servers' names.
func Walk(servers map[string]*caddyhttp.Server, visit func(Link)) {
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		srv := servers[name]
		if srv == nil {
			continue
		}
		w := walker{visit: visit}
		at := Where{Server: name, Listen: srv.Listen, Path: "apps.http.servers." + name + ".routes"}
		w.list(srv.Routes, nil, false, nil, at)
		if srv.Errors != nil {
			// What ran before the error is not known here.
			at.Path = "apps.http.servers." + name + ".errors.routes"
			w.list(srv.Errors.Routes, nil, false, nil, at)
		}
	}
}

type walker struct {
	visit func(Link)
}

// list walks routes, a chain that every request reaching it enters after
// before ran, and that is followed by something when followed: by the
// handlers outer.
func (w walker) list(routes caddyhttp.RouteList, before []Step, followed bool, outer []Step, at Where) {
	for i, r := range routes {
		rat := at
		rat.Path = fmt.Sprintf("%s[%d]", at.Path, i)
		rat.Site, rat.Match = describe(r.MatcherSets, at.Site, at.Match)
		// What surely ran before this route, in this list.
		ran := slices.Clip(before)
		for j := range i {
			if surelyBefore(routes, j, i) {
				ran = append(ran, sure(routes[j].Handlers, fmt.Sprintf("%s[%d]", at.Path, j))...)
			}
		}
		// What can follow the end of this route's handlers.
		after := !r.Terminal && (followed || laterHandlers(routes, i))
		for k, h := range r.Handlers {
			hat := rat
			hat.Path = fmt.Sprintf("%s.handle[%d]", rat.Path, k)
			mine := append(slices.Clip(ran), sure(r.Handlers[:k], rat.Path)...)
			next := k+1 < len(r.Handlers) || after
			var then []Step
			if next {
				then = steps(r.Handlers[k+1:], rat.Path, k+1)
				if !r.Terminal {
					for j := i + 1; j < len(routes); j++ {
						if r.Group != "" && routes[j].Group == r.Group {
							continue // a route of its group never runs after it (laterHandlers)
						}
						then = append(then, steps(routes[j].Handlers, fmt.Sprintf("%s[%d]", at.Path, j), 0)...)
					}
					then = append(then, outer...)
				}
			}
			w.visit(Link{Handler: h, Before: mine, Followed: next, Next: then, Where: hat})
			if sr, ok := h.(*caddyhttp.Subroute); ok {
				inner := hat
				inner.Path = hat.Path + ".routes"
				w.list(sr.Routes, mine, next, then, inner)
				if sr.Errors != nil {
					// Error routes are compiled with what follows the
					// subroute (caddyhttp.Subroute.ServeHTTP).
					inner.Path = hat.Path + ".errors.routes"
					w.list(sr.Errors.Routes, mine, next, then, inner)
				}
			}
		}
	}
}

// steps are the handlers hs of the route at path, from its handler first
// on, as Steps.
func steps(hs []caddyhttp.MiddlewareHandler, path string, first int) []Step {
	out := make([]Step, len(hs))
	for i, h := range hs {
		out[i] = Step{Handler: h, Path: fmt.Sprintf("%s.handle[%d]", path, first+i)}
	}
	return out
}

// surelyBefore reports whether route j of routes, earlier than route i,
// runs its handlers on every request that reaches route i: it matches every
// request route i does (no matcher, or the same), it does not end the chain
// (a terminal route that matched would keep the request from route i), and
// no group keeps it from running (an earlier route of its group may have
// matched first; a route of route i's group that ran would have kept route
// i from running).
func surelyBefore(routes caddyhttp.RouteList, j, i int) bool {
	rj, ri := routes[j], routes[i]
	if rj.Terminal {
		return false
	}
	if len(rj.MatcherSets) > 0 && !reflect.DeepEqual(rj.MatcherSets, ri.MatcherSets) {
		return false
	}
	if rj.Group != "" {
		if rj.Group == ri.Group {
			return false
		}
		for _, r := range routes[:j] {
			if r.Group == rj.Group {
				return false
			}
		}
	}
	return true
}

// sure is the handlers of the route at path, with what surely runs inside
// each subroute among them after it: the handlers of its routes that surely
// run before whatever comes after the subroute (those of routes without a
// matcher that do not end the chain and are the first of their group).
func sure(handlers []caddyhttp.MiddlewareHandler, path string) []Step {
	var out []Step
	for k, h := range handlers {
		hp := fmt.Sprintf("%s.handle[%d]", path, k)
		out = append(out, Step{h, hp})
		sr, ok := h.(*caddyhttp.Subroute)
		if !ok {
			continue
		}
		for j, r := range sr.Routes {
			if len(r.MatcherSets) > 0 || r.Terminal {
				continue
			}
			first := true
			for _, e := range sr.Routes[:j] {
				first = first && (r.Group == "" || e.Group != r.Group)
			}
			if first {
				out = append(out, sure(r.Handlers, fmt.Sprintf("%s.routes[%d]", hp, j))...)
			}
		}
	}
	return out
}

// laterHandlers reports whether a route after route i of routes has a
// handler that may run after it: one not of route i's group, which the
// match of route i rules out.
func laterHandlers(routes caddyhttp.RouteList, i int) bool {
	for _, r := range routes[i+1:] {
		if len(r.Handlers) > 0 && (r.Group == "" || r.Group != routes[i].Group) {
			return true
		}
	}
	return false
}

// describe adds the matcher sets of a route to site and match: a host
// matcher names the site, the others are described by their names and, for
// a path matcher, its patterns.
func describe(sets caddyhttp.MatcherSets, site, match []string) ([]string, []string) {
	var alts []string
	var hosts []string
	for _, set := range sets {
		var parts []string
		for _, m := range set {
			switch m := m.(type) {
			case caddyhttp.MatchHost:
				hosts = append(hosts, m...)
			case *caddyhttp.MatchHost:
				hosts = append(hosts, *m...)
			case caddyhttp.MatchPath:
				parts = append(parts, "path "+strings.Join(m, " "))
			case *caddyhttp.MatchPath:
				parts = append(parts, "path "+strings.Join(*m, " "))
			case caddy.Module:
				id := string(m.CaddyModule().ID)
				parts = append(parts, id[strings.LastIndexByte(id, '.')+1:])
			default:
				parts = append(parts, fmt.Sprintf("%T", m))
			}
		}
		if len(parts) > 0 {
			alts = append(alts, strings.Join(parts, " and "))
		}
	}
	if len(hosts) > 0 && len(site) == 0 {
		site = hosts
	}
	if len(alts) > 0 {
		match = append(slices.Clip(match), strings.Join(alts, " or "))
	}
	return site, match
}

// ModuleID is h's Caddy module ID ("http.handlers.rate_limit"), or "" for
// a handler that is not a module.
func ModuleID(h caddyhttp.MiddlewareHandler) string {
	if m, ok := h.(caddy.Module); ok {
		return string(m.CaddyModule().ID)
	}
	return ""
}
