package place_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/statusgate/statusgate/caddymodule" // the statusgate directive
	"github.com/statusgate/statusgate/caddymodule/internal/place"
)

// servers adapts a Caddyfile and returns its HTTP servers, with their routes
// raw, as Caddy has them before it provisions any handler.
func servers(t *testing.T, caddyfileText string) map[string]*caddyhttp.Server {
	t.Helper()
	cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfileText), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatalf("adapt: %v", err)
	}
	var cfg struct {
		Apps struct {
			HTTP caddyhttp.App `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Apps.HTTP.Servers
}

// byListen finds the server listening on addr.
func byListen(t *testing.T, srvs map[string]*caddyhttp.Server, addr string) *caddyhttp.Server {
	t.Helper()
	for _, s := range srvs {
		if slices.Contains(s.Listen, addr) {
			return s
		}
	}
	t.Fatalf("no server listens on %s", addr)
	return nil
}

// TestTwoPortsOneHost: the case, two sites of one host name on two
// ports, each in front of its own game server: their places differ, and
// each names its own backend.
func TestTwoPortsOneHost(t *testing.T) {
	srvs := servers(t, `{
	auto_https off
}
http://localhost:9001 {
	statusgate
	reverse_proxy 127.0.0.1:25566
}
http://localhost:9002 {
	statusgate
	reverse_proxy 127.0.0.1:25567
}
`)
	a := place.Find(byListen(t, srvs, ":9001"), "statusgate")
	b := place.Find(byListen(t, srvs, ":9002"), "statusgate")
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("found %d and %d places, want 1 each", len(a), len(b))
	}
	if a[0].Identity() == b[0].Identity() {
		t.Fatalf("two sites in front of two backends have one identity: %s", a[0].Identity())
	}
	for _, tc := range []struct {
		p       place.Place
		backend string
	}{{a[0], "reverse_proxy 127.0.0.1:25566"}, {b[0], "reverse_proxy 127.0.0.1:25567"}} {
		if tc.p.Backend != tc.backend || !slices.Equal(tc.p.Hosts, []string{"localhost"}) {
			t.Errorf("place %+v, want backend %q for host localhost", tc.p, tc.backend)
		}
	}
}

// TestOneServerManySites: sites of one listener, by host and by path, in the
// order Caddy provisions them; equal places only for one host in front of
// one backend.
func TestOneServerManySites(t *testing.T) {
	srvs := servers(t, `{
	auto_https off
}
http://B.example.com:9000, http://b2.example.com:9000 {
	statusgate {
		guard game_b
	}
	encode gzip
	reverse_proxy 10.0.0.2:25566 10.0.0.1:25566
}
http://a.example.com:9000 {
	handle /api/* {
		statusgate
		reverse_proxy 10.0.0.1:25566
	}
	handle_path /other/* {
		statusgate
		reverse_proxy 10.0.0.3:25566
	}
}
http://c.example.com:9000 {
	route {
		statusgate
		respond "static" 200
	}
}
`)
	ps := place.Find(byListen(t, srvs, ":9000"), "statusgate")
	var got []string
	for _, p := range ps {
		got = append(got, strings.Join(p.Hosts, ",")+" → "+p.Backend)
	}
	want := []string{
		"a.example.com → reverse_proxy 10.0.0.1:25566",
		"a.example.com → reverse_proxy 10.0.0.3:25566",
		"b.example.com,b2.example.com → reverse_proxy 10.0.0.1:25566 10.0.0.2:25566",
		`c.example.com → {"body":"static","handler":"static_response","status_code":200}`,
	}
	// Caddy sorts sites by specificity; the order is the routes'.
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("places:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, p := range ps {
		var h struct {
			Backend struct {
				Guard string `json:"guard"`
			} `json:"backend"`
		}
		if err := json.Unmarshal(p.Config, &h); err != nil {
			t.Fatal(err)
		}
		if (h.Backend.Guard == "game_b") != slices.Contains(p.Hosts, "b.example.com") {
			t.Errorf("place %v has the config of another handler: %s", p.Hosts, p.Config)
		}
	}
}

// TestNothingAfter: a handler with nothing after it in its site has an empty
// backend, and the routes already loaded are skipped.
func TestNothingAfter(t *testing.T) {
	srvs := servers(t, `{
	auto_https off
}
http://:9003 {
	statusgate
}
`)
	srv := byListen(t, srvs, ":9003")
	ps := place.Find(srv, "statusgate")
	if len(ps) != 1 || ps[0].Backend != "" || len(ps[0].Hosts) != 0 {
		t.Fatalf("places %+v, want one for any host with nothing after it", ps)
	}
	if !strings.Contains(ps[0].String(), "any host") || !strings.Contains(ps[0].String(), "nothing after it") {
		t.Errorf("String() = %q", ps[0].String())
	}
	srv.Routes[0].HandlersRaw = nil // as Caddy leaves a route it has loaded
	if ps := place.Find(srv, "statusgate"); len(ps) != 0 {
		t.Errorf("a loaded route's handlers listed: %+v", ps)
	}
}
