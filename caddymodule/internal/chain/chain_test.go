package chain

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// fake is a handler known by its name, its module ID http.handlers.<name>.
type fake string

func (f fake) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: caddy.ModuleID("http.handlers." + string(f))}
}
func (fake) ServeHTTP(http.ResponseWriter, *http.Request, caddyhttp.Handler) error { return nil }

func hs(names ...string) []caddyhttp.MiddlewareHandler {
	out := make([]caddyhttp.MiddlewareHandler, len(names))
	for i, n := range names {
		out[i] = fake(n)
	}
	return out
}

func sub(routes ...caddyhttp.Route) *caddyhttp.Subroute { return &caddyhttp.Subroute{Routes: routes} }

func path(p ...string) caddyhttp.MatcherSets {
	return caddyhttp.MatcherSets{{caddyhttp.MatchPath(p)}}
}

func host(h ...string) caddyhttp.MatcherSets {
	m := caddyhttp.MatchHost(h)
	return caddyhttp.MatcherSets{{&m}}
}

// seen is what Walk told of each fake handler, by name.
type seen struct {
	before   []string
	followed bool
	where    Where
}

func walk(t *testing.T, servers map[string]*caddyhttp.Server) map[string]seen {
	t.Helper()
	out := map[string]seen{}
	Walk(servers, func(l Link) {
		f, ok := l.Handler.(fake)
		if !ok {
			return
		}
		var before []string
		for _, s := range l.Before {
			if b, ok := s.Handler.(fake); ok {
				before = append(before, string(b))
			} else {
				before = append(before, "subroute")
			}
		}
		if _, dup := out[string(f)]; dup {
			t.Fatalf("%s visited twice", f)
		}
		out[string(f)] = seen{before, l.Followed, l.Where}
	})
	return out
}

func one(routes ...caddyhttp.Route) map[string]*caddyhttp.Server {
	return map[string]*caddyhttp.Server{"srv0": {Listen: []string{":8080"}, Routes: routes}}
}

func want(t *testing.T, got map[string]seen, name string, followed bool, before ...string) {
	t.Helper()
	s, ok := got[name]
	if !ok {
		t.Fatalf("%s not visited", name)
	}
	if s.followed != followed {
		t.Errorf("%s: followed %v, want %v", name, s.followed, followed)
	}
	if !reflect.DeepEqual(s.before, before) && (len(s.before) > 0 || len(before) > 0) {
		t.Errorf("%s: before %q, want %q", name, s.before, before)
	}
}

func TestWithinARoute(t *testing.T) {
	got := walk(t, one(caddyhttp.Route{Handlers: hs("a", "b", "c")}))
	want(t, got, "a", true)
	want(t, got, "b", true, "a")
	want(t, got, "c", false, "a", "b")
}

func TestLaterRoutes(t *testing.T) {
	got := walk(t, one(
		caddyhttp.Route{Handlers: hs("a")},
		caddyhttp.Route{MatcherSets: path("/x/*"), Handlers: hs("b")},
		caddyhttp.Route{MatcherSets: path("/x/*"), Handlers: hs("c")},
		caddyhttp.Route{MatcherSets: path("/y/*"), Handlers: hs("d")},
	))
	want(t, got, "a", true)
	want(t, got, "b", true, "a")
	// The same matchers match the same requests; others may not.
	want(t, got, "c", true, "a", "b")
	want(t, got, "d", false, "a")
}

func TestTerminalRoute(t *testing.T) {
	got := walk(t, one(
		caddyhttp.Route{Handlers: hs("a"), Terminal: true},
		caddyhttp.Route{Handlers: hs("b")},
	))
	want(t, got, "a", false)
	// A request that reaches b did not go through a terminal route.
	want(t, got, "b", false)
}

func TestGroups(t *testing.T) {
	got := walk(t, one(
		caddyhttp.Route{Group: "g", MatcherSets: path("/api/*"), Handlers: hs("a")},
		caddyhttp.Route{Group: "g", Handlers: hs("b")},
		caddyhttp.Route{Group: "h", Handlers: hs("c")},
		caddyhttp.Route{Group: "h", Handlers: hs("d")},
	))
	// After a, only the routes of another group can run.
	want(t, got, "a", true)
	want(t, got, "b", true)
	want(t, got, "c", false)
	// c's route, the first of its group without a matcher, runs before d,
	// which it keeps from running: d is never reached after it.
	want(t, got, "d", false)
	got = walk(t, one(
		caddyhttp.Route{Group: "g", MatcherSets: path("/api/*"), Handlers: hs("a")},
		caddyhttp.Route{Group: "g", Handlers: hs("b")},
	))
	want(t, got, "a", false)
	want(t, got, "b", false)
}

// TestNextSkipsItsGroup: the handlers that can follow one are those of
// the later routes outside its group; a route of its group never runs after
// it (the sibling handle block of a Caddyfile's site).
func TestNextSkipsItsGroup(t *testing.T) {
	next := map[string][]string{}
	Walk(one(
		caddyhttp.Route{Group: "g", MatcherSets: path("/api/*"), Handlers: hs("a")},
		caddyhttp.Route{Group: "g", Handlers: hs("b")},
		caddyhttp.Route{Handlers: hs("c")},
	), func(l Link) {
		f := l.Handler.(fake)
		next[string(f)] = []string{}
		for _, s := range l.Next {
			next[string(f)] = append(next[string(f)], string(s.Handler.(fake)))
		}
	})
	for name, want := range map[string][]string{"a": {"c"}, "b": {"c"}, "c": {}} {
		if !reflect.DeepEqual(next[name], want) {
			t.Errorf("%s: next %q, want %q", name, next[name], want)
		}
	}
}

func TestSubroutes(t *testing.T) {
	got := walk(t, one(caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{
		sub(caddyhttp.Route{Handlers: hs("a")}, caddyhttp.Route{MatcherSets: path("/x"), Handlers: hs("b")}),
		fake("c"),
	}}))
	// A subroute is around its handlers, not before them.
	want(t, got, "a", true)
	want(t, got, "b", true, "a")
	// What surely ran inside the subroute ran before c; b may not have.
	want(t, got, "c", false, "subroute", "a")

	got = walk(t, one(
		caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{sub(caddyhttp.Route{Handlers: hs("a"), Terminal: true})}},
		caddyhttp.Route{Handlers: hs("b")},
	))
	// A terminal route in a subroute ends the whole chain.
	want(t, got, "a", false)
	want(t, got, "b", false, "subroute")
}

// TestSite is a Caddyfile's site: a terminal route on the host with the
// site's routes in a subroute.
func TestSite(t *testing.T) {
	site := caddyhttp.Route{MatcherSets: host("stats.example.com"), Terminal: true, Handlers: []caddyhttp.MiddlewareHandler{sub(
		caddyhttp.Route{Handlers: hs("rate_limit")},
		caddyhttp.Route{MatcherSets: path("/lobby/*"), Handlers: []caddyhttp.MiddlewareHandler{sub(
			caddyhttp.Route{Handlers: hs("rewrite", "statusgate")},
		)}},
	)}}
	other := caddyhttp.Route{MatcherSets: host("other.example.com"), Terminal: true, Handlers: hs("file_server")}
	got := walk(t, one(site, other))
	want(t, got, "statusgate", false, "rate_limit", "rewrite")
	want(t, got, "file_server", false)
	w := got["statusgate"].where
	if w.String() != "server srv0 (listen :8080), site stats.example.com, route matching path /lobby/*, at apps.http.servers.srv0.routes[0].handle[0].routes[1].handle[0].routes[0].handle[1]" {
		t.Errorf("where: %s", w)
	}
	var path string
	Walk(one(site), func(l Link) {
		if l.Handler == fake("statusgate") {
			path = l.Before[0].Path
		}
	})
	if path != "apps.http.servers.srv0.routes[0].handle[0].routes[0].handle[0]" {
		t.Errorf("rate_limit's path: %s", path)
	}
}

func TestErrorRoutes(t *testing.T) {
	srv := &caddyhttp.Server{Routes: caddyhttp.RouteList{{Handlers: []caddyhttp.MiddlewareHandler{
		&caddyhttp.Subroute{Routes: caddyhttp.RouteList{{Handlers: hs("a")}}, Errors: &caddyhttp.HTTPErrorConfig{Routes: caddyhttp.RouteList{{Handlers: hs("b")}}}},
		fake("c"),
	}}}, Errors: &caddyhttp.HTTPErrorConfig{Routes: caddyhttp.RouteList{{Handlers: hs("d")}}}}
	got := walk(t, map[string]*caddyhttp.Server{"srv0": srv})
	want(t, got, "a", true)
	// A subroute's error routes go on with what follows the subroute.
	want(t, got, "b", true)
	want(t, got, "d", false)
	if w := got["d"].where.String(); !strings.HasSuffix(w, "at apps.http.servers.srv0.errors.routes[0].handle[0]") {
		t.Errorf("where: %s", w)
	}
}

func TestModuleID(t *testing.T) {
	if id := ModuleID(fake("rate_limit")); id != "http.handlers.rate_limit" {
		t.Errorf("ModuleID: %s", id)
	}
	if id := ModuleID(plain{}); id != "" {
		t.Errorf("ModuleID of a func: %q", id)
	}
}

// plain is a handler that is no module.
type plain struct{}

func (plain) ServeHTTP(http.ResponseWriter, *http.Request, caddyhttp.Handler) error { return nil }
