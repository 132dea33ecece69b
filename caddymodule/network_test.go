package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
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
			[]string{"network.servers: none", "server SERVER-ID UPSTREAM..."}},
		{"a server without id", `{"endpoints":{"network":true},"network":{"cluster":"main","servers":[{"proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}}]}}`,
			[]string{"network.servers[0].id: missing"}},
		{"a server id that is no name", networkJSON("", [][2]string{{"lobby", "10.0.0.3:8080"}, {"lobby.2", "10.0.0.4:8080"}}, ""),
			[]string{"network.servers[1].id: 'lobby.2' is not a name"}},
		{"a server id twice", networkJSON("", [][2]string{{"lobby", "10.0.0.3:8080"}, {"lobby", "10.0.0.4:8080"}}, ""),
			[]string{"network.servers[1].id: 'lobby' is network.servers[0]'s id too"}},
		{"a server without proxy", `{"endpoints":{"network":true},"network":{"cluster":"main","servers":[{"id":"a"}]}}`,
			[]string{"network.servers[0]: a is not declared: declare it in the global statusgate option (server a UPSTREAM...), or give its upstreams here"}},
		{"a proxy without upstreams", `{"endpoints":{"network":true},"network":{"cluster":"main","servers":[{"id":"a","proxy":{"headers":{}}}]}}`,
			[]string{"network.servers[0] 'a'.proxy: no upstreams"}},
		{"a proxy that answers", `{"endpoints":{"network":true},"network":{"cluster":"main","servers":[{"id":"a","proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}],"handle_response":[]}}]}}`,
			[]string{"network.servers[0] 'a'.proxy.handle_response: not allowed here"}},
		{"one backend under two ids", networkJSON("", [][2]string{{"lobby", "10.0.0.3:8080"}, {"hub", "10.0.0.3:8080"}}, ""),
			[]string{"network.servers[1] 'hub'.proxy: 10.0.0.3:8080 is the server network.servers[0] 'lobby' declares as 10.0.0.3:8080", "count its players twice"}},
		{"one backend under two spellings", networkJSON("", [][2]string{{"lobby", "localhost:8080"}, {"hub", "[::ffff:127.0.0.1]:8080"}}, ""),
			[]string{"network.servers[1] 'hub'.proxy: [::ffff:127.0.0.1]:8080 is the server network.servers[0] 'lobby' declares as localhost:8080", "count its players twice"}},
		{"a member picked by the request", networkJSON("", [][2]string{{"lobby", "{http.request.header.X-Lobby}"}}, ""),
			[]string{"network.servers[0] 'lobby'.proxy: {http.request.header.X-Lobby} picks the server for each request", "a member is a fixed server"}},
		{"self no server", networkJSON("hardcore", three, ""),
			[]string{"network.self: 'hardcore' is no server of the network (its servers: creative, lobby, survival)"}},
		{"self with other upstreams", networkJSON("lobby", three, ""),
			[]string{"network.self: 'lobby' is this handler's own backend, but network.servers[1] 'lobby' declares 10.0.0.3:8080, and this statusgate's backend is 10.0.0.2:8080: give it the same upstreams"}},
		// One panel's address for two servers told apart by Host: self's
		// block picks another server than the handler's proxy.
		{"self with the same dial and another Host", `{"endpoints":{"network":true},"proxy":{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["survival"]}}}},` +
			`"network":{"cluster":"main","servers":[{"id":"creative","proxy":{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["creative"]}}}}}],"self":"creative"}}`,
			[]string{"network.self: 'creative' is this handler's own backend, but network.servers[0] 'creative' declares this statusgate's upstreams, 10.0.0.2:8080, with a block that picks another server", "give it no block, or the statusgate's proxy block"}},
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

// Two players' UUIDs.
const (
	alexUUID  = "40094f2f-ca8f-4826-8b31-11e0f4c449df"
	steveUUID = "8b1e62a0-5c1d-4f0b-9a77-2f3c9d0e6b21"
)

// TestNetworkFetch runs the network's fetch in process, under the race
// detector in CI: three members asked at once through guards of their own,
// one answering the plugin's "initializing" payload, which leaves it out;
// the key never reaches a member; the document through the field layer for
// a caller without a key, whole for a key. The handler is in the form of
// 1.0, whose guards need no provisioned proxy: every member is marked as
// the handler's own, so that its trip goes to the test's next handler.
func TestNetworkFetch(t *testing.T) {
	h := mustProvision(t, `{"auth":{"keys":["`+testKey+`"],"require_key":{"network":false},"protected_fields":{"network":["players"]}},`+
		`"endpoints":{"network":true},"network":{"cluster":"main","servers":[{"id":"a","proxy":{"upstreams":[{"dial":"10.0.0.2:8080"}]}}],"self":"a"}}`)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	limits, err := resolveLimits(h.Backend)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b", "c"} {
		g, err := joinGuard(h.app, ctx, BackendConfig{Guard: "network-test-" + id}, limits, nil, "policy", zap.NewNop(), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Leave)
		h.network.members = append(h.network.members, newMember(id, g, true))
	}

	var mu sync.Mutex
	var seen []string
	// Times of now: a member's time far from the gateway's is no status.
	at := time.Now().UnixMilli()
	answers := []string{
		fmt.Sprintf(`{"ok":true,"data":{"online":["`+alexUUID+`"],"minecraft":1,"discord":5},"meta":{"version":"v1","updatedAt":%d,"cachedAt":%d}}`, at+20, at+10),
		fmt.Sprintf(`{"ok":true,"data":{"online":["`+alexUUID+`","`+steveUUID+`"],"minecraft":2,"discord":null},"meta":{"version":"v1","updatedAt":%d,"cachedAt":%d}}`, at+20, at+15),
		fmt.Sprintf(`{"ok":true,"data":{"status":"initializing","message":"Data is not ready yet, please retry shortly"},"meta":{"version":"v1","updatedAt":%d,"cachedAt":null}}`, at+20),
	}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("X-Api-Key")+r.Header.Get("Accept-Encoding"))
		body := answers[(len(seen)-1)%len(answers)]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, err := io.WriteString(w, body)
		return err
	})

	keyed := serve(t, h, next, "GET", "/api/v1/network?history=true", keyHeader(testKey))
	var doc struct {
		Data struct {
			ServerCount int `json:"serverCount"`
			TotalOnline int `json:"totalOnline"`
			Servers     []struct {
				Server  string   `json:"server"`
				Players []string `json:"players"`
			} `json:"servers"`
		} `json:"data"`
		Meta struct {
			CachedAt    int64    `json:"cachedAt"`
			Unreachable []string `json:"unreachable"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(keyed.Body.Bytes(), &doc); err != nil || keyed.Code != 200 {
		t.Fatalf("%d %s: %v", keyed.Code, keyed.Body, err)
	}
	if doc.Data.ServerCount != 2 || doc.Data.TotalOnline != 3 || len(doc.Meta.Unreachable) != 1 || doc.Meta.CachedAt != at+10 {
		t.Errorf("one member initializing: %s", keyed.Body)
	}
	if got := keyed.repl.ReplaceAll("{http.statusgate.outcome}", ""); got != "served" {
		t.Errorf("outcome %q", got)
	}
	mu.Lock()
	for _, s := range seen {
		if s != "GET /api/v1/status identity" {
			t.Errorf("a member got %q", s)
		}
	}
	mu.Unlock()

	// Without a key: the counts, no UUID, players hidden.
	anon := serve(t, h, next, "GET", "/api/v1/network", nil)
	body := anon.Body.String()
	if anon.Code != 200 || strings.Contains(body, alexUUID) || !strings.Contains(body, `"authenticated":false,"hiddenFields":["players"]}}`) {
		t.Errorf("anonymous: %d %s", anon.Code, body)
	}
	if got := anon.repl.ReplaceAll("{http.statusgate.outcome}", ""); got != "filtered" {
		t.Errorf("anonymous outcome %q", got)
	}
}

// TestNetworkMemberReadOnce: callers that get the same answer from a member
// (its micro-cache) share its reading: a member that answers the
// "initializing" payload is left out of every document, and logged once,
// not once a request; another answer is news again.
func TestNetworkMemberReadOnce(t *testing.T) {
	const config = `{"auth":{"require_key":{"network":false}},"endpoints":{"network":true},"backend":{"cache":{"status":60000000000}},` +
		`"network":{"cluster":"main","servers":[{"id":"a","proxy":{"upstreams":[{"dial":"10.0.0.2:8080"}]}}],"self":"a"}}`
	h := mustProvision(t, config)
	core, logs := observer.New(zap.ErrorLevel)
	h.network.logger = zap.New(core)
	var body atomic.Value
	body.Store(`{"ok":true,"data":{"status":"initializing"},"meta":{"version":"v1","updatedAt":20,"cachedAt":null}}`)
	trips := 0
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		trips++
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, err := io.WriteString(w, body.Load().(string))
		return err
	})
	for range 5 {
		if rec := serve(t, h, next, "GET", "/api/v1/network", nil); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"unreachable":["a"]`) {
			t.Fatalf("%d %s, want a left out", rec.Code, rec.Body)
		}
	}
	if n := logs.FilterMessage("backend response refused").Len(); trips != 1 || n != 1 {
		t.Errorf("5 requests, %d trips: %d lines logged about the member, want 1", trips, n)
	}
	// Another answer is read, and its failure logged, anew (once the
	// document and the member's failure are over: here, by another
	// handler of the same config, whose documents, member failures and
	// share keys, of the form of 1.0, are its own).
	h = mustProvision(t, config)
	h.network.logger = zap.New(core)
	body.Store(`{"ok":true,"data":{"status":"initializing","message":"retry"},"meta":{"version":"v1","updatedAt":21,"cachedAt":null}}`)
	serve(t, h, next, "GET", "/api/v1/network", nil)
	if n := logs.FilterMessage("backend response refused").Len(); n != 2 {
		t.Errorf("a new answer: %d lines logged about the member, want 2", n)
	}
}

// TestOwnListener: a member is the gateway's own listener when it dials the
// address the server listens on, in any spelling (a name as it resolves),
// the server's Unix socket by any path, or the port of a server that
// listens on every address at any address of this machine (any loopback
// address, an IPv4-mapped one); not another port, nor another machine's
// address, nor another loopback address than the one a server listens on.
// Names are resolved only on the listener's port.
func TestOwnListener(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "run"), filepath.Join(dir, "var-run")); err != nil {
		t.Fatal(err)
	}
	names := map[string][]netip.Addr{
		"game.example": {netip.MustParseAddr("127.0.0.2")},
		"gw.internal":  {netip.MustParseAddr("::ffff:10.0.0.2")},
		"far.example":  {netip.MustParseAddr("10.255.255.254")},
	}
	var asked []string
	lookup := lookupIP
	lookupIP = func(_ context.Context, _, host string) ([]netip.Addr, error) {
		asked = append(asked, host)
		if ips, ok := names[host]; ok {
			return slices.Clone(ips), nil
		}
		return nil, errors.New("no such host")
	}
	t.Cleanup(func() { lookupIP = lookup })
	for _, tc := range []struct {
		listen []string
		dial   string
		own    bool
	}{
		{[]string{"127.0.0.1:8080"}, "localhost:8080", true},
		{[]string{"tcp/127.0.0.1:8080"}, "[::ffff:127.0.0.1]:8080", true},
		{[]string{":8080"}, "127.0.0.1:8080", true},
		{[]string{"tcp/[::]:8080"}, "[::1]:8080", true},
		{[]string{":8000-8090"}, "localhost:8080", true},
		{[]string{":8080"}, "127.0.0.2:8080", true},
		{[]string{"tcp/0.0.0.0:8080"}, "[::ffff:127.0.0.2]:8080", true},
		{[]string{":8080"}, "0.0.0.0:8080", true},
		{[]string{"127.0.0.1:8080"}, "0.0.0.0:8080", true},
		{[]string{"tcp/[::1]:8080"}, "[::]:8080", true},
		{[]string{":8080"}, "game.example.:8080", true},
		{[]string{"10.0.0.2:8080"}, "gw.internal:8080", true},
		{[]string{"gw.internal:8080"}, "10.0.0.2:8080", true},
		{[]string{"unix/" + dir + "/run/gw.sock"}, "unix/" + dir + "/run/gw.sock", true},
		{[]string{"unix/" + dir + "/run/gw.sock|0222"}, "unix/" + dir + "/run/./gw.sock", true},
		{[]string{"unix/" + dir + "/run/gw.sock"}, "unix+h2c/" + dir + "/var-run/gw.sock", true},
		{[]string{"127.0.0.1:8080"}, "127.0.0.1:8081", false},
		{[]string{"127.0.0.1:8080"}, "127.0.0.2:8080", false},
		{[]string{":8080"}, "10.255.255.254:8080", false},
		{[]string{":8080"}, "far.example:8080", false},
		{[]string{":8080"}, "nowhere.example:8080", false},
		{[]string{"10.0.0.2:8080"}, "127.0.0.1:8080", false},
		{[]string{"unix/" + dir + "/run/gw.sock"}, "unix/" + dir + "/run/other.sock", false},
		{[]string{"unix/" + dir + "/run/gw.sock"}, "127.0.0.1:8080", false},
		{[]string{":8080"}, "unix/" + dir + "/run/gw.sock", false},
		{nil, "127.0.0.1:8080", false},
	} {
		be, err := upstream.Parse("proxy", json.RawMessage(`{"upstreams":[{"dial":"`+tc.dial+`"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, own := ownListener(be, tc.listen); own != tc.own {
			t.Errorf("%s listening on %v: own %v, want %v", tc.dial, tc.listen, own, tc.own)
		}
	}
	// A name is resolved only where its port is the listener's.
	asked = nil
	be, _ := upstream.Parse("proxy", json.RawMessage(`{"upstreams":[{"dial":"game.example:9090"}]}`))
	if _, _, _, own := ownListener(be, []string{":8080"}); own || len(asked) > 0 {
		t.Errorf("another port: own %v, names resolved %v", own, asked)
	}
	// The message says how a name reaches the listener.
	be, _ = upstream.Parse("proxy", json.RawMessage(`{"upstreams":[{"dial":"game.example:8080"}]}`))
	if dial, l, how, _ := ownListener(be, []string{":8080"}); dial != "tcp/game.example:8080" || l != ":8080" || !strings.Contains(how, "game.example resolves to 127.0.0.2") {
		t.Errorf("%q %q %q", dial, l, how)
	}
}
