package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestAppRetiresItsHandlers: the handlers of a config load register with
// its app, which retires every one of them when a newer config replaces
// the load, and none of the newer config's.
func TestAppRetiresItsHandlers(t *testing.T) {
	config := func(path string) []byte {
		route := func(p string) string {
			return `{"match":[{"path":["` + p + `/*"]}],"handle":[{"handler":"statusgate","proxy":{"upstreams":[{"dial":"127.0.0.1:9"}]}}]}`
		}
		return []byte(`{"admin":{"disabled":true},"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[` +
			route(path+"a") + `,` + route(path+"b") + `]}}}}}`)
	}
	load := func(cfg []byte) *App {
		t.Helper()
		if err := caddy.Load(cfg, true); err != nil {
			t.Fatal(err)
		}
		v, err := caddy.ActiveContext().App("statusgate")
		if err != nil {
			t.Fatal(err)
		}
		a := v.(*App)
		if len(a.tenants) != 2 {
			t.Fatalf("%d handlers registered with the load's app, want 2", len(a.tenants))
		}
		return a
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	old := load(config("/one"))
	cur := load(config("/two"))
	for _, a := range []*App{old, cur} {
		for i, tn := range a.tenants {
			h := tn.tenant.(*Handler)
			if retired := h.superseded.Load(); retired != (a == old) {
				t.Errorf("handler %d of the %s load: retired %v", i, map[bool]string{true: "replaced", false: "current"}[a == old], retired)
			}
		}
	}
}

// TestChainEndsRunNoGate: the load's route check tells each handler whether
// anything can follow it on its chain; one that ends its chain runs no
// handlers after it on its trips (guard.Ticket's Next), and one that any
// handler may follow keeps them.
func TestChainEndsRunNoGate(t *testing.T) {
	sg := `{"handler":"statusgate","proxy":{"upstreams":[{"dial":"127.0.0.1:9"}]}}`
	vars := `{"handler":"vars","x":"1"}`
	route := func(path string, handlers ...string) string {
		m := ""
		if path != "" {
			m = `"match":[{"path":["` + path + `"]}],`
		}
		return `{` + m + `"handle":[` + strings.Join(handlers, ",") + `]}`
	}
	subroute := func(routes ...string) string {
		return `{"handler":"subroute","routes":[` + strings.Join(routes, ",") + `]}`
	}
	// Two sites of a Caddyfile, as users write them: each site's routes end
	// where its block does, and a handle block's with it.
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(`{
	admin off
}
http://a.test:0 {
	bind 127.0.0.1
	encode
	statusgate 127.0.0.1:9
}
http://b.test:0 {
	bind 127.0.0.1
	handle /api/* {
		statusgate 127.0.0.1:9
	}
	handle {
		respond "home"
	}
}
http://c.test:0 {
	bind 127.0.0.1
	route {
		statusgate 127.0.0.1:9
		respond "after"
	}
}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sites struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []json.RawMessage `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(adapted, &sites); err != nil || len(sites.Apps.HTTP.Servers) != 1 {
		t.Fatalf("%v: %s", err, adapted)
	}
	var caddyfileRoutes []string
	for _, srv := range sites.Apps.HTTP.Servers {
		for _, r := range srv.Routes {
			caddyfileRoutes = append(caddyfileRoutes, string(r))
		}
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	for _, tc := range []struct {
		name   string
		routes []string
		last   []bool // of the statusgate handlers, in the order they register
	}{
		{"a Caddyfile's sites", caddyfileRoutes, []bool{true, true, false}},
		{"alone in the server", []string{route("", sg)}, []bool{true}},
		{"a handler after it in its route", []string{route("", sg, vars)}, []bool{false}},
		{"a later route may follow the first", []string{route("/a/*", sg), route("/b/*", sg)}, []bool{false, true}},
		// A respond's handler is a struct with maps, which no set of
		// handlers may take for a key.
		{"a respond in a later route", []string{route("/a/*", sg), route("", `{"handler":"static_response","body":"x"}`)}, []bool{false}},
		{"in a subroute that a later route follows", []string{route("", subroute(route("/a/*", sg))), route("", vars)}, []bool{false}},
		{"last of a terminal subroute", []string{route("", subroute(route("/a/*", sg), route("", sg)))}, []bool{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := `{"admin":{"disabled":true},"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[` +
				strings.Join(tc.routes, ",") + `]}}}}}`
			if err := caddy.Load([]byte(cfg), true); err != nil {
				t.Fatal(err)
			}
			v, err := caddy.ActiveContext().App("statusgate")
			if err != nil {
				t.Fatal(err)
			}
			a := v.(*App)
			if len(a.tenants) != len(tc.last) {
				t.Fatalf("%d handlers registered, want %d", len(a.tenants), len(tc.last))
			}
			for i, tn := range a.tenants {
				if got := tn.last.Load(); got != tc.last[i] {
					t.Errorf("handler %d: nothing follows it %v, want %v", i, got, tc.last[i])
				}
			}
		})
	}
}
