package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// rateLimit stands in for caddy-ratelimit's handler, which the check knows
// by its module ID, and reads its zones' matchers as caddy-ratelimit
// v0.1.0 keeps them once provisioned.
type rateLimit struct {
	RateLimits map[string]*rateLimitZone
}

type rateLimitZone struct {
	MatcherSetsRaw caddyhttp.RawMatcherSets
	matcherSets    caddyhttp.MatcherSets
}

// everyRequest is a rate_limit with a zone that counts every request.
var everyRequest = rateLimit{RateLimits: map[string]*rateLimitZone{"per_caller": {}}}

// someRequests is a rate_limit whose only zone counts some requests.
var someRequests = rateLimit{RateLimits: map[string]*rateLimitZone{"login": {matcherSets: caddyhttp.MatcherSets{{caddyhttp.MatchPath{"/login"}}}}}}

func (rateLimit) CaddyModule() caddy.ModuleInfo { return caddy.ModuleInfo{ID: rateLimitID} }
func (rateLimit) ServeHTTP(http.ResponseWriter, *http.Request, caddyhttp.Handler) error {
	return nil
}

// TestRouteMistakes checks the two mistakes that only the routes around a
// statusgate handler show, on a site as the Caddyfile adapts it: a
// statusgate of the form of 1.0 that nothing follows, and a rate_limit in
// front of statusgate; and that the forms that work are not refused.
func TestRouteMistakes(t *testing.T) {
	legacy := func() *Handler { return new(Handler) }
	declared := func() *Handler {
		return &Handler{ProxyRaw: json.RawMessage(`{"upstreams":[{"dial":"127.0.0.1:8080"}]}`)}
	}
	proxy := &caddyhttp.StaticResponse{} // what follows: any handler
	site := func(handlers ...caddyhttp.MiddlewareHandler) map[string]*caddyhttp.Server {
		m := caddyhttp.MatchHost{"stats.example.com"}
		return map[string]*caddyhttp.Server{"srv0": {Listen: []string{":443"}, Routes: caddyhttp.RouteList{{
			MatcherSets: caddyhttp.MatcherSets{{&m}},
			Terminal:    true,
			Handlers:    []caddyhttp.MiddlewareHandler{&caddyhttp.Subroute{Routes: caddyhttp.RouteList{{Handlers: handlers}}}},
		}}}}
	}
	// routes is a site whose handlers are each a route of their own, as
	// the Caddyfile adapts a site's directives.
	routes := func(handlers ...caddyhttp.MiddlewareHandler) map[string]*caddyhttp.Server {
		app := site()
		sr := app["srv0"].Routes[0].Handlers[0].(*caddyhttp.Subroute)
		sr.Routes = nil
		for _, h := range handlers {
			sr.Routes = append(sr.Routes, caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{h}})
		}
		return app
	}
	const at = "statusgate in server srv0 (listen :443), site stats.example.com, at apps.http.servers.srv0.routes[0].handle[0].routes[0].handle[1]"
	for _, c := range []struct {
		name string
		app  map[string]*caddyhttp.Server
		want []string // nil: no error
	}{
		{"declared", site(declared()), nil},
		{"declared, rate_limit after it", site(declared(), everyRequest), nil},
		{"1.0, reverse_proxy after it", site(legacy(), proxy), nil},
		{"1.0, rate_limit and reverse_proxy after it", site(legacy(), everyRequest, proxy), nil},
		{"1.0, nothing after it", site(proxy, legacy()), []string{
			at + " declares no upstreams, and no handler runs after it: every request it lets through would be answered 502 Bad gateway; name the game server in statusgate itself, as in statusgate 127.0.0.1:8080 (or server NAME, one the global statusgate option declares), or put the reverse_proxy of the form of 1.0 after it"}},
		{"rate_limit before a declared statusgate", site(everyRequest, declared()), []string{
			at + ": the rate_limit at apps.http.servers.srv0.routes[0].handle[0].routes[0].handle[0] runs before it, so it counts every request (the gateway's own 404s and cached answers too) and its 429 is Caddy's, without the gateway's JSON envelope and CORS header; add `order rate_limit after statusgate` to the global options (in a route block, or in JSON, put rate_limit after statusgate in the same list), and it counts only the trips that reach the backend"}},
		{"rate_limit of /login before a declared statusgate", site(someRequests, declared()), nil},
		{"rate_limit of every request and of /login", site(rateLimit{RateLimits: map[string]*rateLimitZone{"a": someRequests.RateLimits["login"], "b": {}}}, declared()), []string{
			at + ": the rate_limit at"}},
		// A site-level rate_limit ordered after statusgate only hands the
		// request on: before, it counted as what follows, and the config
		// loaded and answered every request 502.
		{"1.0, a rate_limit alone after it", site(legacy(), everyRequest), []string{
			"statusgate in server srv0 (listen :443), site stats.example.com, at apps.http.servers.srv0.routes[0].handle[0].routes[0].handle[0] declares no upstreams, and no handler that answers runs after it (the rate_limit at apps.http.servers.srv0.routes[0].handle[0].routes[0].handle[1] only hands the request on): every request it lets through would be answered 502 Bad gateway"}},
		{"1.0, a site's rate_limit route after it", routes(legacy(), everyRequest), []string{
			"statusgate in server srv0 (listen :443), site stats.example.com, at apps.http.servers.srv0.routes[0].handle[0].routes[0].handle[0] declares no upstreams, and no handler that answers runs after it (the rate_limit at apps.http.servers.srv0.routes[0].handle[0].routes[1].handle[0] only hands the request on)"}},
		{"1.0, a site's rate_limit and reverse_proxy routes after it", routes(legacy(), everyRequest, proxy), nil},
		{"rate_limit before 1.0 with nothing after it: both", site(everyRequest, legacy()), []string{
			"the rate_limit at", "; and statusgate in", "declares no upstreams, and no handler runs after it"}},
		// One mistake in two places is said once, with both places, in
		// one line (caddy reload prints a line break as a literal \n).
		{"rate_limit before two statusgates: once", site(everyRequest, declared(), declared()), []string{
			"a rate_limit runs before statusgate in 2 places, so it counts every request",
			"; the places: (1) statusgate in server srv0 (listen :443), site stats.example.com, at apps.http.servers.srv0.routes[0].handle[0].routes[0].handle[1], the rate_limit at apps.http.servers.srv0.routes[0].handle[0].routes[0].handle[0]; (2) statusgate in server srv0 (listen :443), site stats.example.com, at apps.http.servers.srv0.routes[0].handle[0].routes[0].handle[2], the rate_limit at apps.http.servers.srv0.routes[0].handle[0].routes[0].handle[0]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := routeMistakes(c.app, func(h caddyhttp.MiddlewareHandler) (bool, bool) {
				sg, ok := h.(*Handler)
				return ok && sg.needsNext(), ok
			})
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantErrorWords(t, err, c.want...)
			if strings.ContainsAny(err.Error(), "<>&\n") {
				t.Errorf("a line break or what JSON escapes in %q", err)
			}
			for _, fix := range []string{"order rate_limit after statusgate", "502 Bad gateway"} {
				if n := strings.Count(err.Error(), fix); n > 1 {
					t.Errorf("one mistake said %d times: %v", n, err)
				}
			}
		})
	}
}

// TestNothingAfterBackstop: a statusgate of the form of 1.0 with nothing
// after it, which the app refuses when the config starts, still answers
// 502 where it runs all the same (a route the check cannot place: a named
// route, a handler's own routes), with the cause in the log; and its
// warning at load says what the start will do, not to remove a
// reverse_proxy that may not be there.
func TestNothingAfterBackstop(t *testing.T) {
	h, logs := newTestHandler(t, "")
	w := logs.FilterMessageSnippet("the form of 1.0").All()
	if len(w) != 1 || !strings.Contains(fmt.Sprint(w[0].ContextMap()["write"]), "then delete the reverse_proxy after it; a statusgate of this form followed by no handler that can answer (only a rate_limit, headers or encode, or nothing) is refused by caddy run and caddy reload wherever its routes show it (not in a named route), and not by caddy validate") {
		t.Errorf("the 1.0 warning: %v", w)
	}
	nothing := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	r := serve(t, h, nothing, "GET", "/api/v1/status", nil)
	if r.Code != http.StatusBadGateway || r.envelope.Error.Message != "Bad gateway" {
		t.Errorf("nothing after statusgate: %d %q, want 502 Bad gateway", r.Code, r.envelope.Error.Message)
	}
	if loggedErrors(logs, "statusgate declares no upstreams and no handler after it answered") == 0 {
		t.Errorf("the cause is not logged: %v", logs.All())
	}
}
