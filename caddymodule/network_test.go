package caddymodule

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// networkJSON is a handler's JSON with a network of the given servers
// (each "id": "dial"), the network endpoint on, and extra members of the
// handler's object (each after a comma).
func networkJSON(self string, servers [][2]string, extra string) string {
	var s []string
	for _, sv := range servers {
		s = append(s, `{"id":"`+sv[0]+`","proxy":{"upstreams":[{"dial":"`+sv[1]+`"}]}}`)
	}
	selfMember := ""
	if self != "" {
		selfMember = `,"self":"` + self + `"`
	}
	return `{"endpoints":{"network":true},"proxy":{"upstreams":[{"dial":"10.0.0.2:8080"}]},"network":{"cluster":"main","servers":[` +
		strings.Join(s, ",") + `]` + selfMember + `}` + extra + `}`
}

// TestNetworkJSONErrors checks every mistake of a network's JSON: the
// message names the option by its path and says what to write.
func TestNetworkJSONErrors(t *testing.T) {
	three := [][2]string{{"survival", "10.0.0.2:8080"}, {"lobby", "10.0.0.3:8080"}, {"creative", "10.0.0.4:8080"}}
	tests := []struct {
		name, config string
		words        []string
	}{
		{"the endpoint left off", `{"network":{"cluster":"main","servers":[{"id":"a","proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}}]}}`,
			[]string{"network: the network endpoint is off (its default)", `"endpoints": {"network": true}`}},
		{"a cache time of its own", networkJSON("", three, `,"backend":{"cache":{"network":"2s"}}`),
			[]string{"network: cache network: the gateway answers network from the members' /status", "set cache status instead"}},
		{"a snapshot time of its own", networkJSON("", three, `,"backend":{"snapshot":{"network":-1}}`),
			[]string{"network: snapshot network", "set snapshot status instead"}},
		{"no cluster", `{"endpoints":{"network":true},"network":{"servers":[{"id":"a","proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}}]}}`,
			[]string{"network.cluster: missing", "network.cluster-id"}},
		{"a cluster that is no name", `{"endpoints":{"network":true},"network":{"cluster":"m a","servers":[{"id":"a","proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}}]}}`,
			[]string{"network.cluster: 'm a' is not a name of letters, digits, '_' and '-'"}},
		{"no servers", `{"endpoints":{"network":true},"network":{"cluster":"main","servers":[]}}`,
			[]string{"network.servers: none", "server <server-id> <upstream>..."}},
		{"a server without id", `{"endpoints":{"network":true},"network":{"cluster":"main","servers":[{"proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}}]}}`,
			[]string{"network.servers[0].id: missing"}},
		{"a server id that is no name", networkJSON("", [][2]string{{"lobby", "10.0.0.3:8080"}, {"lobby.2", "10.0.0.4:8080"}}, ""),
			[]string{"network.servers[1].id: 'lobby.2' is not a name"}},
		{"a server id twice", networkJSON("", [][2]string{{"lobby", "10.0.0.3:8080"}, {"lobby", "10.0.0.4:8080"}}, ""),
			[]string{"network.servers[1].id: 'lobby' is network.servers[0]'s id too"}},
		{"a server without proxy", `{"endpoints":{"network":true},"network":{"cluster":"main","servers":[{"id":"a"}]}}`,
			[]string{"network.servers[0] 'a'.proxy"}},
		{"a proxy without upstreams", `{"endpoints":{"network":true},"network":{"cluster":"main","servers":[{"id":"a","proxy":{"headers":{}}}]}}`,
			[]string{"network.servers[0] 'a'.proxy: no upstreams"}},
		{"a proxy that answers", `{"endpoints":{"network":true},"network":{"cluster":"main","servers":[{"id":"a","proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}],"handle_response":[]}}]}}`,
			[]string{"network.servers[0] 'a'.proxy.handle_response: not allowed here"}},
		{"one backend under two ids", networkJSON("", [][2]string{{"lobby", "10.0.0.3:8080"}, {"hub", "10.0.0.3:8080"}}, ""),
			[]string{"network.servers[1] 'hub'.proxy: the same backend as network.servers[0] 'lobby'", "count its players twice"}},
		{"self no server", networkJSON("hardcore", three, ""),
			[]string{"network.self: 'hardcore' is no server of the network (its servers: creative, lobby, survival)"}},
		{"self with other upstreams", networkJSON("lobby", three, ""),
			[]string{"network.self: 'lobby' is this handler's own backend, 10.0.0.2:8080, but network.servers[1] 'lobby' declares 10.0.0.3:8080"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantProvisionError(t, tc.config, tc.words...)
		})
	}
}

// TestNetworkSwitchedOff: a network whose endpoint the config switches off
// on purpose is checked, joins no member's guard, and says it has no effect.
func TestNetworkSwitchedOff(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	core, logs := observer.New(zap.WarnLevel)
	h := new(Handler)
	config := `{"endpoints":{"network":false},"network":{"cluster":"main","servers":[{"id":"lobby","proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}}]}}`
	if err := json.Unmarshal([]byte(config), h); err != nil {
		t.Fatal(err)
	}
	if err := h.provisionWith(ctx, zap.New(core)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Cleanup() })
	if h.network != nil || logs.FilterMessageSnippet("the network endpoint is disabled: the network block has no effect").Len() != 1 {
		t.Errorf("a network switched off: joined %v, logged %v", h.network != nil, logs.All())
	}
	// Still checked.
	wantProvisionError(t, strings.Replace(config, `"lobby"`, `"lob by"`, 1), "network.servers[0].id: 'lob by' is not a name")
}
