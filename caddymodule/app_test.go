package caddymodule

import (
	"testing"

	"github.com/caddyserver/caddy/v2"
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
