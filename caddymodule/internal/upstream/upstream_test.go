package upstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

func parse(t *testing.T, raw string) *Backend {
	t.Helper()
	b, err := Parse("proxy", json.RawMessage(raw))
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return b
}

// TestID checks what names a backend: the declaration in any spelling of the
// same JSON is one backend, and any difference that can send a request
// elsewhere (an upstream, their order, a Host header, a rewrite, a
// transport) is another.
func TestID(t *testing.T) {
	base := parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["survival"]}}}}`)
	same := parse(t, "{\n  \"headers\": {\"request\": {\"set\": {\"Host\": [\"survival\"]}}},\n  \"upstreams\": [ {\"dial\": \"10.0.0.2:8080\"} ]\n}")
	if base.ID() != same.ID() {
		t.Error("two spellings of one declaration are two backends")
	}
	for name, other := range map[string]string{
		"another upstream": `{"upstreams":[{"dial":"10.0.0.3:8080"}],"headers":{"request":{"set":{"Host":["survival"]}}}}`,
		"another Host":     `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["creative"]}}}}`,
		"no Host":          `{"upstreams":[{"dial":"10.0.0.2:8080"}]}`,
		"a rewrite":        `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["survival"]}}},"rewrite":{"uri":"/s{http.request.uri}"}}`,
		"a transport":      `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["survival"]}}},"transport":{"protocol":"http","tls":{}}}`,
		"two upstreams":    `{"upstreams":[{"dial":"10.0.0.2:8080"},{"dial":"10.0.0.3:8080"}],"headers":{"request":{"set":{"Host":["survival"]}}}}`,
	} {
		if parse(t, other).ID() == base.ID() {
			t.Errorf("%s is the same backend", name)
		}
	}
	if got := parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"},{"dial":"10.0.0.3:8080"}]}`).String(); got != "10.0.0.2:8080 10.0.0.3:8080" {
		t.Errorf("String: %q", got)
	}
}

// TestParseRefuses checks the declarations a statusgate backend cannot have,
// each refused with the option's path and the reason.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{}`, "proxy: no upstreams"},
		{`{"upstreams":[]}`, "proxy: no upstreams"},
		{`{"upstreams":null}`, "proxy: no upstreams"},
		{`{"upstreams":[{"dial":"a:1"}],"handle_response":[{"routes":[]}]}`, "proxy.handle_response: not allowed here"},
		{`[]`, "not a JSON object"},
		{`{"upstreams":`, "proxy:"},
		{`{"upstreams":[{"dial":"a:1"},{"dial":"{http.request.uuid}:80"}]}`, "proxy.upstreams[1].dial: {http.request.uuid} has a new value for every request"},
	} {
		_, err := Parse("proxy", json.RawMessage(tc.raw))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.raw, err, tc.want)
		}
	}
	if _, err := Parse("proxy", json.RawMessage(`{"dynamic_upstreams":{"source":"a","name":"game.internal","port":"8080"}}`)); err != nil {
		t.Errorf("dynamic upstreams: %v", err)
	}
}

// TestPlaceholders checks that the values of the placeholders a declaration
// holds, wherever it holds them, decide the backend a request reaches: two
// requests share an answer only when every value is the same, and a request
// made later with the values set reaches the same backend.
func TestPlaceholders(t *testing.T) {
	b := parse(t, `{"upstreams":[{"dial":"{game}"}],"headers":{"request":{"set":{"Host":["{http.vars.host}-{game}"],"X":["\\{literal}"]}}}}`)
	if !b.Placeholders() {
		t.Fatal("no placeholders found")
	}
	if got := strings.Join(b.names, " "); got != "game http.vars.host" {
		t.Errorf("names %q, want game and http.vars.host, each once, and no escaped brace", got)
	}
	repl := func(pairs ...string) *caddy.Replacer {
		r := caddy.NewEmptyReplacer()
		for i := 0; i < len(pairs); i += 2 {
			r.Set(pairs[i], pairs[i+1])
		}
		return r
	}
	a := b.Resolve(repl("game", "10.0.0.2:8080", "http.vars.host", "mc"))
	if a.Key() == b.Resolve(repl("game", "10.0.0.3:8080", "http.vars.host", "mc")).Key() {
		t.Error("two upstreams give one key")
	}
	if a.Key() == b.Resolve(repl("game", "10.0.0.2:8080")).Key() {
		t.Error("a value and none give one key")
	}
	if a.Key() != b.Resolve(repl("game", "10.0.0.2:8080", "http.vars.host", "mc", "other", "x")).Key() {
		t.Error("a placeholder the declaration does not hold changed the key")
	}
	later := caddy.NewEmptyReplacer()
	a.Set(later)
	if !b.Same(later, a) {
		t.Error("values set in a later request's replacer are not the same")
	}
	if b.Same(repl("game", "10.0.0.9:8080", "http.vars.host", "mc"), a) {
		t.Error("another upstream is the same")
	}
	plain := parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"}]}`)
	if plain.Placeholders() || plain.Resolve(repl("game", "x")) != nil || Values(nil).Key() != "" {
		t.Error("a declaration without placeholders resolves to something")
	}
}

// TestVolatilePlaceholders checks that a placeholder with a value of its
// own for every request (the time, the request's ID, what the trip sets)
// names no backend: a header_up X-Request-ID {http.request.uuid} or a
// header_up X-Request-Start {time.now.unix_ms} keeps one key for every
// request, and values read again later are the same.
func TestVolatilePlaceholders(t *testing.T) {
	b := parse(t, `{"upstreams":[{"dial":"{game}"}],"headers":{"request":{"set":{"X-Request-Id":["{http.request.uuid}"],"X-Request-Start":["t={time.now.unix_ms}"],"X-Took":["{http.request.duration_ms}"]}},"response":{"set":{"X-Upstream":["{http.reverse_proxy.upstream.address}"]}}}}`)
	if got := strings.Join(b.names, " "); got != "game" {
		t.Errorf("names %q, want only game", got)
	}
	first := caddy.NewReplacer()
	first.Set("game", "10.0.0.2:8080")
	second := caddy.NewReplacer()
	second.Set("game", "10.0.0.2:8080")
	a := b.Resolve(first)
	if a.Key() != b.Resolve(second).Key() || !b.Same(second, a) {
		t.Error("two requests to one upstream have two keys")
	}
	if still := parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"X-Request-Id":["{http.request.uuid}"]}}}}`); still.Placeholders() {
		t.Error("a request ID makes a fixed upstream's answers each request's own")
	}
}
