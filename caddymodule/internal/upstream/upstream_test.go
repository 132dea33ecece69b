package upstream

import (
	"encoding/json"
	"slices"
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
	if b.Resolve(later).Key() != a.Key() {
		t.Error("values set in a later request's replacer are not the same")
	}
	if slices.Equal(b.Sent(repl("game", "10.0.0.9:8080", "http.vars.host", "mc")), b.Sent(later)) {
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
	if a.Key() != b.Resolve(second).Key() || !slices.Equal(b.Sent(first), b.Sent(second)) {
		t.Error("two requests to one upstream have two keys")
	}
	gold, free := caddy.NewEmptyReplacer(), caddy.NewEmptyReplacer()
	gold.Set("http.vars.tier", "gold")
	free.Set("http.vars.tier", "free")
	if unsplit := parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"X-Tier":["{http.vars.tier}"]}}}}`); slices.Equal(unsplit.Sent(gold), unsplit.Sent(free)) {
		t.Error("a header's placeholder changed after statusgate is not seen")
	}
	if still := parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"X-Request-Id":["{http.request.uuid}"]}}}}`); still.Placeholders() {
		t.Error("a request ID makes a fixed upstream's answers each request's own")
	}
}

// TestIDIsWhatPicksTheServer checks that only what picks the server that
// answers names a backend: a timeout, a health check, load balancing or a
// header other than Host is the same backend (a reload that tunes them
// keeps the guard's counts), while the Host in any spelling of its name is
// not.
func TestIDIsWhatPicksTheServer(t *testing.T) {
	base := parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["survival"]}}}}`)
	for name, same := range map[string]string{
		"a timeout":         `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["survival"]}}},"transport":{"protocol":"http","response_header_timeout":9000000000}}`,
		"a health check":    `{"upstreams":[{"dial":"10.0.0.2:8080","max_requests":4}],"headers":{"request":{"set":{"Host":["survival"]}}},"health_checks":{"passive":{"fail_duration":1000000000}}}`,
		"another header":    `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["survival"],"X-Real-Ip":["{http.request.remote}"]}}}}`,
		"a load balancing":  `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["survival"]}}},"load_balancing":{"selection_policy":{"policy":"first"}}}`,
		"a response header": `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["survival"]}},"response":{"set":{"X":["y"]}}}}`,
	} {
		if parse(t, same).ID() != base.ID() {
			t.Errorf("%s makes another backend", name)
		}
	}
	for name, other := range map[string]string{
		"host in lower case": `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"host":["creative"]}}}}`,
		"Host added":         `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"add":{"Host":["survival"]}}}}`,
		"Host deleted":       `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"delete":["Host"]}}}`,
		"a TLS server name":  `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["survival"]}}},"transport":{"protocol":"http","tls":{"server_name":"creative"}}}`,
		"dynamic upstreams":  `{"dynamic_upstreams":{"source":"a","name":"game.internal","port":"8080"},"headers":{"request":{"set":{"Host":["survival"]}}}}`,
	} {
		if parse(t, other).ID() == base.ID() {
			t.Errorf("%s is the same backend", name)
		}
	}
}

// TestUnsplit checks that a placeholder outside what picks the server is
// named as such and splits no answer (30 clients' X-Real-IP are one trip),
// and that a part of the decided request (a rewrite of the canonical
// target) picks nothing either.
func TestUnsplit(t *testing.T) {
	b := parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"X-Real-Ip":["{http.request.remote}"],"X-Forwarded-Host":["{http.request.host}"]}}},"rewrite":{"uri":"/s{http.request.uri}"}}`)
	if b.Placeholders() {
		t.Errorf("names %q: a client's address or target picks the server", b.names)
	}
	if got := strings.Join(b.Unsplit(), " "); got != "http.request.host http.request.remote" {
		t.Errorf("Unsplit %q", got)
	}
	pick := parse(t, `{"upstreams":[{"dial":"{http.request.uri.query.server}"}],"headers":{"request":{"set":{"Host":["{http.request.host}"]}}}}`)
	if got := strings.Join(pick.names, " "); got != "http.request.host http.request.uri.query.server" {
		t.Errorf("names %q: a query parameter or the Host in the parts that pick the server must split answers", got)
	}
}

// TestParseRefusesTheKey checks that no placeholder that can hold the
// client's API key is accepted anywhere in a declaration, and that the
// decided request's parts are.
func TestParseRefusesTheKey(t *testing.T) {
	for _, p := range []string{"http.request.orig_uri", "http.request.orig_uri.query", "http.request.orig_uri.query.key",
		"http.request.uri.query.key", "http.request.header.X-Api-Key", "http.request.header.x-api-key"} {
		raw := `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"X-Original":["{` + p + `}"]}}}}`
		if _, err := Parse("proxy", json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), "{"+p+"} can carry the client's API key") {
			t.Errorf("{%s}: %v", p, err)
		}
	}
	for _, p := range []string{"http.request.orig_uri.path", "http.request.uri", "http.request.uri.query", "http.request.uri.query.server", "http.request.header.X-Server"} {
		parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"X-Original":["{`+p+`}"]}}}}`)
	}
}

// TestServer: a declaration's server is the same whatever the spelling and
// order of its dials, and another when anything else that picks the server
// differs (a panel's Host).
func TestServer(t *testing.T) {
	same := []string{
		`{"upstreams":[{"dial":"127.0.0.1:8080"},{"dial":"10.0.0.3:8080"}]}`,
		`{"upstreams":[{"dial":"10.0.0.3:8080"},{"dial":"localhost:8080"}]}`,
		`{"upstreams":[{"dial":"[::ffff:10.0.0.3]:8080"},{"dial":"[::1]:8080"}]}`,
		`{"upstreams":[{"dial":"tcp/10.0.0.3:8080"},{"dial":"LOCALHOST.:8080"},{"dial":"127.0.0.1:8080"}]}`,
	}
	first := parse(t, same[0])
	for _, raw := range same[1:] {
		if b := parse(t, raw); b.Server() != first.Server() {
			t.Errorf("%s: another server than %s", raw, same[0])
		}
	}
	for _, raw := range []string{
		`{"upstreams":[{"dial":"127.0.0.1:8081"},{"dial":"10.0.0.3:8080"}]}`,
		`{"upstreams":[{"dial":"127.0.0.2:8080"},{"dial":"10.0.0.3:8080"}]}`,
		`{"upstreams":[{"dial":"127.0.0.1:8080"},{"dial":"10.0.0.3:8080"}],"headers":{"request":{"set":{"Host":["lobby.internal"]}}}}`,
	} {
		if b := parse(t, raw); b.Server() == first.Server() {
			t.Errorf("%s: the same server as %s", raw, same[0])
		}
	}
	if got := first.Dials(); strings.Join(got, " ") != "tcp/10.0.0.3:8080 tcp/loopback:8080" {
		t.Errorf("dials %v", got)
	}
}

// TestAnswers checks that two declarations of one server that send other
// headers are one server (ID: one guard, one count) whose answers are each
// declaration's own (Answers), and that the same headers in any spelling
// are one.
func TestAnswers(t *testing.T) {
	a := parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"X-Server":["a"]}}}}`)
	b := parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"X-Server":["b"]}}}}`)
	none := parse(t, `{"upstreams":[{"dial":"10.0.0.2:8080"}]}`)
	again := parse(t, `{"headers":{"request":{"set":{"X-Server":["a"]}}},"upstreams":[{"dial":"10.0.0.2:8080"}],"transport":{"protocol":"http","read_timeout":1000000000}}`)
	if a.ID() != b.ID() || a.ID() != none.ID() {
		t.Error("other headers make another server")
	}
	if a.Answers() == b.Answers() || a.Answers() == none.Answers() {
		t.Error("other headers share answers")
	}
	if a.Answers() != again.Answers() {
		t.Error("the same headers, spelt otherwise, with another timeout, do not share answers")
	}
}
