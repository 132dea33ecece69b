package caddymodule

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestAppRefuses checks the statusgate app's servers and defaults as the
// JSON gives them: each mistake names its path and says where the option
// belongs.
func TestAppRefuses(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	for _, c := range []struct{ raw, want string }{
		{`{"servers":{"lobby":{"proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]},"backend":{"max_per_client":2}}}}`,
			"servers.lobby.backend.max_per_client: the front door's choice, not the server's"},
		{`{"defaults":{"backend":{"max_in_flight":4}}}`, "defaults.backend.max_in_flight: a server's limit"},
		{`{"defaults":{"proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}}}`, "defaults.proxy: a backend is a server's or a handler's"},
		{`{"servers":{"lobby":{}}}`, "servers.lobby.proxy: missing: no upstreams"},
		{`{"servers":{"lo bby":{"proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}}}}`, "servers: 'lo bby' is not a name"},
		{`{"servers":{"lobby":{"prxy":{}}}}`, "prxy: unknown option"},
		// A server's live limits and the defaults' options are checked at
		// the app, under their own paths, used or not.
		{`{"servers":{"lobby":{"proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]},"backend":{"max_streams":-5}}}}`, "servers.lobby: backend.max_streams"},
		{`{"defaults":{"backend":{"timeout":"-5s"}}}`, "defaults: backend.timeout"},
	} {
		var a App
		err := json.Unmarshal([]byte(c.raw), &a)
		if err == nil {
			err = a.Provision(ctx)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.raw, err, c.want)
		}
	}
}

// TestAdopt checks what a handler takes from the app: the defaults where
// it says nothing itself (its own keys first, its own endpoint entries
// winning), and a declared server's backend and limits, which it may not
// set itself.
func TestAdopt(t *testing.T) {
	var a App
	if err := json.Unmarshal([]byte(`{"servers":{"lobby":{"proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]},"backend":{"max_in_flight":4}}},
		"defaults":{"auth":{"keys":[{"name":"bot","key":"sg_Zs4cJm6Ho2YvTqW8nB1xKe0"}],"protected_fields":{"status":["online"],"player":["op"]}},"backend":{"max_per_client":2}}}`), &a); err != nil {
		t.Fatal(err)
	}
	var h Handler
	if err := json.Unmarshal([]byte(`{"server":"lobby","auth":{"keys":["kA-7f3c9e1d5b2a4c68e0f1"],"protected_fields":{"player":[]}},"backend":{"timeout":1000000000}}`), &h); err != nil {
		t.Fatal(err)
	}
	if err := h.adopt(&a); err != nil {
		t.Fatal(err)
	}
	if len(h.Auth.Keys) != 2 || h.Auth.Keys[0].Secret != "kA-7f3c9e1d5b2a4c68e0f1" || h.Auth.Keys[1].Name != "bot" {
		t.Errorf("keys %+v, want its own then the defaults'", h.Auth.Keys)
	}
	if got, global := h.Auth.ProtectedFields, h.Auth.globalFields; len(got) != 1 || len(got["player"]) != 0 || len(global["status"]) != 1 || len(global["player"]) != 1 {
		t.Errorf("protected_fields %v over %v: want its own (empty) player over the defaults' status and player, a level of their own", got, global)
	}
	if h.Backend.MaxInFlight != 4 || h.Backend.MaxPerClient != 2 || h.Backend.Timeout == 0 || h.ProxyRaw == nil {
		t.Errorf("backend %+v, proxy %s: want the server's max_in_flight, the defaults' max_per_client and its own timeout", h.Backend, h.ProxyRaw)
	}
	// A key of the handler's own of the defaults' key's name is one key
	// with both secrets, and the defaults' extra_fields are known to the
	// handler.
	var k App
	if err := json.Unmarshal([]byte(`{"defaults":{"auth":{"keys":[{"name":"bot","key":"sg_Zs4cJm6Ho2YvTqW8nB1xKe0"}],"extra_fields":{"status":["foo"]}}}}`), &k); err != nil {
		t.Fatal(err)
	}
	var rotated Handler
	if err := json.Unmarshal([]byte(`{"auth":{"keys":[{"name":"bot","key":"sg_Qp7rTf3Lw9XbNc2Vd8Ha1Mk"}],"protected_fields":{"status":["foo"]}}}`), &rotated); err != nil {
		t.Fatal(err)
	}
	if err := rotated.adopt(&k); err != nil || len(rotated.Auth.Keys) != 2 || rotated.Auth.Keys[0].Secret != "sg_Qp7rTf3Lw9XbNc2Vd8Ha1Mk" || rotated.Auth.Keys[1].Name != "bot" {
		t.Errorf("a handler's key bot beside the defaults' bot: %v, keys %+v, want both secrets of bot", err, rotated.Auth.Keys)
	}
	if got := rotated.Auth.ExtraFields["status"]; len(got) != 1 || got[0] != "foo" {
		t.Errorf("extra_fields %v, want the defaults' foo", got)
	}
	// A handler's own off wins over a default's on.
	var d App
	if err := json.Unmarshal([]byte(`{"defaults":{"auth":{"allow_query_key":true}}}`), &d); err != nil {
		t.Fatal(err)
	}
	var off Handler
	if err := json.Unmarshal([]byte(`{"auth":{"allow_query_key":false}}`), &off); err != nil {
		t.Fatal(err)
	}
	if err := off.adopt(&d); err != nil || off.Auth.AllowQueryKey == nil || *off.Auth.AllowQueryKey {
		t.Errorf("a handler's allow_query_key off under a default of on: %v, %v", err, off.Auth.AllowQueryKey)
	}
	for raw, want := range map[string]string{
		`{"server":"lobby","backend":{"max_in_flight":8}}`: "backend.max_in_flight: server lobby's limit: set it in server lobby's declaration",
		`{"server":"lobyy"}`: "server: lobyy is not a declared server; did you mean lobby?",
		`{"network":{"cluster":"main","servers":[{"id":"hub"}]}}`: "network.servers[0]: hub is not a declared server",
	} {
		var h Handler
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			t.Fatal(err)
		}
		if err := h.adopt(&a); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}

// TestKeyHeldAgainstTheServersLimits: a key's max_held under a handler
// that fronts a declared server, and one among the global option's
// defaults, is judged against that server's limits, when the handler is
// provisioned (keyShares), not against the defaults of a block that sets
// no limits of its own: a server of max_held 512MiB takes a key of 128MiB.
// Before, the Caddyfile was refused, and told to raise a max_held it had
// raised already.
func TestKeyHeldAgainstTheServersLimits(t *testing.T) {
	for _, where := range []string{"handler", "defaults"} {
		key := "\t\tkey staff " + testKey + " {\n\t\t\tmax_held 128MiB\n\t\t}\n"
		global, handler := "", key
		if where == "defaults" {
			global, handler = key, ""
		}
		input := "{\n\tstatusgate {\n" + global + "\t\tserver lobby 10.0.0.3:8080 {\n\t\t\tmax_held 512MiB\n\t\t}\n\t}\n}\n" +
			":8080 {\n\tstatusgate {\n\t\tserver lobby\n" + handler + "\t}\n}\n"
		if _, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil); err != nil {
			t.Errorf("a key of 128MiB in the %s, under a server of 512MiB: %v", where, err)
		}
	}
}
