package caddymodule

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"

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

// TestServerProxyReadsLikeHandlers: a declared server's proxy is read as a
// handler's is. In JSON a Caddyfile shorthand ({remote_host}, which the
// backend would get as its text) is refused with the placeholder to write,
// and a placeholder that carries the caller's key is refused, as in a
// handler's proxy; the Caddyfile's twins are the golden
// servers_proxy_*: there the shorthands are expanded (before, the backend
// got "X-Real-Ip: {remote_host}" from every caller) and {header.X-API-Key}
// and {orig_uri} are refused with the server's line.
func TestServerProxyReadsLikeHandlers(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	for header, want := range map[string]string{
		"{remote_host}":                   "servers.lobby.proxy: {remote_host} is a Caddyfile shorthand, which JSON does not expand (the backend would get the text itself): write {http.request.remote.host}",
		"{header.X-API-Key}":              "servers.lobby.proxy: {header.X-API-Key} is a Caddyfile shorthand",
		"{http.request.header.X-API-Key}": "servers.lobby.proxy: {http.request.header.X-API-Key} can carry the client's API key",
	} {
		var a App
		raw := `{"servers":{"lobby":{"proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}],"headers":{"request":{"set":{"X-Real-Ip":["` + header + `"]}}}}}}}`
		err := json.Unmarshal([]byte(raw), &a)
		if err == nil {
			err = a.Provision(ctx)
		}
		wantErrorWords(t, err, want)
	}
}
