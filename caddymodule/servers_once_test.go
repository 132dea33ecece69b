package caddymodule

import (
	"encoding/json"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestServerDeclaredOnce: a handler whose own upstreams, or a network
// member whose own upstreams, reach a server the global option declares
// (by any spelling of its address) is refused with the line to write; a
// declared server that no handler or network fronts is warned of. Before,
// the handler joined a guard of its own with the handler defaults (6
// requests at the backend at once against the declared 2), in silence.
// The Caddyfile's twins: golden servers_*_by_address.
func TestServerDeclaredOnce(t *testing.T) {
	var a App
	if err := json.Unmarshal([]byte(`{"servers":{"lobby":{"proxy":{"upstreams":[{"dial":"127.0.0.1:25580"}]},"backend":{"max_in_flight":2,"queue_length":-1}},
		"hub":{"proxy":{"upstreams":[{"dial":"10.0.0.4:8080"}]}},"spare":{"proxy":{"upstreams":[{"dial":"10.0.0.5:8080"}]}}}}`), &a); err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]string{
		`{"proxy":{"upstreams":[{"dial":"localhost:25580"}]}}`:                          `proxy: its upstreams reach server lobby, which the global statusgate option declares with its limits: write "server": "lobby" in place of "proxy"`,
		`{"proxy":{"upstreams":[{"dial":"10.0.0.9:8080"},{"dial":"127.0.0.1:25580"}]}}`: `reach server lobby`,
		`{"server":"hub","endpoints":{"network":true},"network":{"cluster":"main","self":"hub","servers":[{"id":"hub"},{"id":"lobby","proxy":{"upstreams":[{"dial":"127.0.0.1:25580"}]}}]}}`: `network.servers[1] 'lobby': its upstreams reach server lobby, which the global statusgate option declares with its limits: list it as {"id": "lobby"} without "proxy"`,
	} {
		var h Handler
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			t.Fatal(err)
		}
		wantErrorWords(t, h.adopt(&a), want)
	}
	var h Handler
	if err := json.Unmarshal([]byte(`{"server":"hub","endpoints":{"network":true},"network":{"cluster":"main","self":"hub","servers":[{"id":"hub"},{"id":"lobby"}]}}`), &h); err != nil {
		t.Fatal(err)
	}
	if err := h.adopt(&a); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	a.warnUnreferenced(zap.New(core))
	if got := logs.All(); len(got) != 1 || got[0].ContextMap()["server"] != "spare" {
		t.Errorf("warnings %v, want one of spare, which nothing fronts", got)
	}
}
