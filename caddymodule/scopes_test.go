package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
)

// Secrets of the scoped keys in these tests.
const (
	scopeBotSecret   = "b0t-scope-secret-0123456789"
	scopeWebSecret   = "w3b-scope-secret-0123456789"
	scopeStaffSecret = "st4ff-scope-secret-0123456789"
)

// scopedKeys is the example of docs/keys.md: a Discord bot that reads status
// and bans, a website that reads status and performance, a staff dashboard
// that reads everything.
var scopedKeys = "key bot " + scopeBotSecret + " {\n\tendpoints status bans\n}\n" +
	"key web " + scopeWebSecret + " {\n\tendpoints status\n\tendpoints performance\n}\n" +
	"key staff " + scopeStaffSecret

// TestCaddyfileKeyScope checks the key block and the JSON it becomes: the
// secret sealed as before, endpoints repeatable and without duplicates,
// max_held in bytes.
func TestCaddyfileKeyScope(t *testing.T) {
	h, err := parseTestCaddyfile("statusgate {\n" +
		"\tkey bot " + scopeBotSecret + " {\n\t\tendpoints status bans\n\t\tendpoints status custom/votes\n\t\tmax_in_flight 2\n\t\tmax_held 16MiB\n\t}\n" +
		"\tkey " + scopeWebSecret + " {\n\t\tmax_in_flight 1\n\t}\n" +
		"\tkey staff {env.STAFF_KEY} {\n\t}\n" +
		"\tkey ops " + scopeStaffSecret + " {\n\t\tmax_held 5000000\n\t}\n" +
		"}")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(h)
	want := `{"auth":{"keys":[` +
		`{"name":"bot","key":"` + apikey.Digest(scopeBotSecret) + `","endpoints":["status","bans","custom/votes"],"max_in_flight":2,"max_held":16777216},` +
		`{"key":"` + apikey.Digest(scopeWebSecret) + `","max_in_flight":1},` +
		`{"name":"staff","key":"{env.STAFF_KEY}"},` +
		`{"name":"ops","key":"` + apikey.Digest(scopeStaffSecret) + `","max_held":5000000}]}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestCaddyfileKeyScopeErrors checks every error of the key block: each
// names the word and the line, and none quotes the secret.
func TestCaddyfileKeyScopeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		words       []string
		line        int
	}{
		{"unknown endpoint", "\tkey bot S {\n\t\tendpoints status nope\n\t}", []string{"endpoints", "unknown endpoint 'nope'"}, 3},
		{"empty endpoints", "\tkey bot S {\n\t\tendpoints\n\t}", []string{"endpoints", "at least one endpoint"}, 3},
		{"limit zero", "\tkey bot S {\n\t\tmax_in_flight 0\n\t}", []string{"max_in_flight", "'0' is not a whole number of at least 1"}, 3},
		{"limit negative", "\tkey bot S {\n\t\tendpoints bans\n\t\tmax_in_flight -2\n\t}", []string{"max_in_flight", "'-2'"}, 4},
		{"limit off", "\tkey bot S {\n\t\tmax_in_flight off\n\t}", []string{"max_in_flight", "'off'"}, 3},
		{"limit missing", "\tkey bot S {\n\t\tmax_in_flight\n\t}", []string{"max_in_flight"}, 3},
		{"limit twice", "\tkey bot S {\n\t\tmax_in_flight 1\n\t\tmax_in_flight 2\n\t}", []string{"'max_in_flight' given twice"}, 4},
		{"limit with two numbers", "\tkey bot S {\n\t\tmax_in_flight 1 2\n\t}", []string{"2"}, 3},
		{"unknown subdirective", "\tkey bot S {\n\t\tendpoint bans\n\t}", []string{"unrecognized key subdirective 'endpoint'"}, 3},
		{"held zero", "\tkey bot S {\n\t\tmax_held 0\n\t}", []string{"max_held: '0' is not a size such as 16MiB"}, 3},
		{"held not a size", "\tkey bot S {\n\t\tendpoints bans\n\t\tmax_held lots\n\t}", []string{"max_held: 'lots' is not a size such as 16MiB"}, 4},
		{"held off", "\tkey bot S {\n\t\tmax_held off\n\t}", []string{"max_held: 'off' is not a size", "cannot be off", "leave max_held out for the key's default share"}, 3},
		{"held missing", "\tkey bot S {\n\t\tmax_held\n\t}", []string{"max_held"}, 3},
		{"held twice", "\tkey bot S {\n\t\tmax_held 8MiB\n\t\tmax_held 16MiB\n\t}", []string{"'max_held' given twice"}, 4},
		{"held with two sizes", "\tkey bot S {\n\t\tmax_held 8MiB 16MiB\n\t}", []string{"16MiB"}, 3},
		{"held above the guard's", "\tkey bot S {\n\t\tmax_held 128MiB\n\t}", []string{"max_held: '128MiB' is more than the guard's max_held, 64MiB", "write at most 64MiB, or raise max_held"}, 3},
		{"held above the guard's given after", "\tkey bot S {\n\t\tmax_held 48MiB\n\t}\n\tmax_held 32MiB", []string{"max_held: '48MiB' is more than the guard's max_held, 32MiB"}, 3},
		{"held above this gateway's share", "\tinstances 2\n\tkey bot S {\n\t\tmax_held 48MiB\n\t}", []string{"max_held: '48MiB' is more than this gateway's share of the guard's max_held, 32MiB (max_held / instances 2)", "write at most 32MiB"}, 4},
		{"held below max_response", "\tkey bot S {\n\t\tmax_held 1MiB\n\t}", []string{"max_held: '1MiB' is less than max_response, 4MiB", "write at least 4MiB, or lower max_response"}, 3},
		{"held below max_response given after", "\tkey bot S {\n\t\tmax_held 6MiB\n\t}\n\tmax_response 8MiB", []string{"max_held: '6MiB' is less than max_response, 8MiB"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTestCaddyfile("statusgate {\n" + strings.ReplaceAll(tc.block, "S", scopeBotSecret) + "\n}")
			wantErrorWords(t, err, tc.words...)
			if at := fmt.Sprintf(", at Testfile:%d", tc.line); !strings.HasSuffix(err.Error(), at) {
				t.Errorf("error %q does not end with %q", err, at)
			}
			if strings.Contains(err.Error(), scopeBotSecret) {
				t.Errorf("error quotes the secret: %v", err)
			}
		})
	}
}

// TestProvisionKeyScopeErrors checks the same errors in JSON, named by the
// key's position.
func TestProvisionKeyScopeErrors(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{`{"name":"bot","key":"` + scopeBotSecret + `","endpoints":["status","nope"]}`, "auth.keys[1] 'bot': endpoints: unknown endpoint 'nope'"},
		{`{"name":"bot","key":"` + scopeBotSecret + `","endpoints":[]}`, "auth.keys[1] 'bot': endpoints: empty list"},
		{`{"name":"bot","key":"` + scopeBotSecret + `","max_in_flight":0}`, "auth.keys[1] 'bot': max_in_flight: 0 is not a whole number of at least 1"},
		{`{"key":"` + scopeBotSecret + `","max_in_flight":-1}`, "auth.keys[1] 'key-2': max_in_flight: -1 is not a whole number of at least 1"},
		// null, which config generators write for an empty value, would
		// read as the member's absence: every endpoint, no cap.
		{`{"name":"bot","key":"` + scopeBotSecret + `","endpoints":null}`, "auth.keys[1] 'bot': endpoints: null is not a scope"},
		{`{"name":"bot","key":"` + scopeBotSecret + `","endpoints":["bans"],"max_in_flight":null}`, "auth.keys[1] 'bot': max_in_flight: null is not a cap"},
		{`{"name":"bot","key":"` + scopeBotSecret + `","max_held":0}`, "auth.keys[1] 'bot': max_held: 0 is not a size: write bytes, at least 1, or leave max_held out for the key's default share"},
		{`{"name":"bot","key":"` + scopeBotSecret + `","max_held":-1}`, "auth.keys[1] 'bot': max_held: -1 is not a size"},
		{`{"name":"bot","key":"` + scopeBotSecret + `","max_held":null}`, "auth.keys[1] 'bot': max_held: null is not a size: leave max_held out for the key's default share"},
		{`{"name":"bot","key":"` + scopeBotSecret + `","max_held":67108865}`, "auth.keys[1] 'bot': max_held: 67108865 is more than the guard's max_held, 64MiB: a key's share is part of it; write at most 64MiB, or raise max_held"},
		{`{"name":"bot","key":"` + scopeBotSecret + `","max_held":4194303}`, "auth.keys[1] 'bot': max_held: 4194303 is less than max_response, 4MiB: an answer that large could never be held for the key; write at least 4MiB, or lower max_response"},
	} {
		_, err := provisionJSON(t, `{"auth":{"keys":["`+scopeStaffSecret+`",`+tc.key+`]}}`)
		wantErrorWords(t, err, tc.want)
		if err != nil && strings.Contains(err.Error(), scopeBotSecret) {
			t.Errorf("error quotes the secret: %v", err)
		}
	}
	if _, err := provisionJSON(t, `{"auth":{"keys":[{"name":"bot","key":"`+scopeBotSecret+`","endpoints":["bans"],"max_in_flight":3}]}}`); err != nil {
		t.Errorf("a valid scoped key: %v", err)
	}
	// The guard's max_held in the JSON, this gateway's share of it, and
	// max_response: the bounds are the resolved limits.
	for _, tc := range []struct{ backend, held, want string }{
		{`{"max_held":33554432}`, "33554433", "max_held: 33554433 is more than the guard's max_held, 32MiB"},
		{`{"instances":4}`, "16777217", "max_held: 16777217 is more than this gateway's share of the guard's max_held, 16MiB (max_held / instances 4)"},
		{`{"max_response":1048576}`, "1048575", "max_held: 1048575 is less than max_response, 1MiB"},
		{`{"max_held":33554432}`, "33554432", ""},
		{`{"max_response":1048576}`, "1048576", ""},
	} {
		_, err := provisionJSON(t, `{"auth":{"keys":[{"name":"bot","key":"`+scopeBotSecret+`","max_held":`+tc.held+`}]},"backend":`+tc.backend+`}`)
		if tc.want == "" {
			if err != nil {
				t.Errorf("backend %s, max_held %s: %v", tc.backend, tc.held, err)
			}
			continue
		}
		wantErrorWords(t, err, "auth.keys[0] 'bot': "+tc.want)
	}
}

// TestKeyShare checks each key's share of the held bytes: its own max_held,
// or the default, enough for as many answers of max_response as the guard
// admits for the key, at most a quarter of max_held and never less than an
// address's share; and that every key's is judged by progress, with half of
// write_timeout's patience.
func TestKeyShare(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name, block string
		want        int64
		patience    time.Duration
	}{
		{"defaults: 8 slots of 4MiB, a quarter of 64MiB", "key bot " + scopeBotSecret, 16 * mib, 5 * time.Second},
		{"its own cap", "key bot " + scopeBotSecret + " {\n\tmax_in_flight 2\n}", 8 * mib, 5 * time.Second},
		{"a larger max_held", "key bot " + scopeBotSecret + "\nmax_held 256MiB", 32 * mib, 5 * time.Second},
		{"more slots than a quarter of max_held", "key bot " + scopeBotSecret + "\nmax_in_flight 32", 16 * mib, 5 * time.Second},
		{"no admission control", "key bot " + scopeBotSecret + "\nmax_in_flight off\nmax_held 100MiB", 25 * mib, 5 * time.Second},
		{"never less than an address's", "key bot " + scopeBotSecret + "\nmax_response 64KiB", 4 * mib, 5 * time.Second},
		{"one of two gateways", "key bot " + scopeBotSecret + "\ninstances 2", 8 * mib, 5 * time.Second},
		{"its own max_held", "key bot " + scopeBotSecret + " {\n\tmax_held 12MiB\n}", 12 * mib, 5 * time.Second},
		{"its own max_held, all of the guard's", "key bot " + scopeBotSecret + " {\n\tmax_held 64MiB\n}", 64 * mib, 5 * time.Second},
		{"half of write_timeout", "key bot " + scopeBotSecret + "\nwrite_timeout 3s", 16 * mib, 1500 * time.Millisecond},
		{"write_timeout off: half the default", "key bot " + scopeBotSecret + "\nwrite_timeout off", 16 * mib, 5 * time.Second},
	} {
		h, _ := newTestHandler(t, tc.block)
		got := h.keyInfo[0].held
		if want := (hold.Share{Bytes: tc.want, Patience: tc.patience, Keyed: true}); got != want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, want)
		}
		c := h.callerFor(0, h.table.lookup("server"))
		if c.Held != got {
			t.Errorf("%s: the caller's share %+v, the key's %+v", tc.name, c.Held, got)
		}
		if anon := h.callerFor(noKey, h.table.lookup("server")).withAddress(httptest.NewRequest("GET", "/", nil), h.Backend.prefix6()); anon.Held != (hold.Share{}) {
			t.Errorf("%s: a caller without a key has a share %+v, want the guard's (zero)", tc.name, anon.Held)
		}
	}
}

// updatedAtValue is the time in an envelope's meta.
var updatedAtValue = regexp.MustCompile(`"updatedAt":\d+`)

// TestScopeOutsideIsAnonymous checks that a key outside its scope gets,
// byte for byte, what a caller without a key gets: the disguised 404 (or
// the 401 with hide_protected off) of a protected endpoint, the field layer
// of a public one; and that inside its scope it counts.
func TestScopeOutsideIsAnonymous(t *testing.T) {
	for _, hide := range []string{"", "\nhide_protected off"} {
		h, _ := newTestHandler(t, scopedKeys+hide)
		for _, target := range []string{
			"/api/v1/server", // protected, outside bot's scope
			"/api/v1/player/40094F2F-ca8f-4826-8b31-11e0f4c449df", // public, with protected fields
			"/api/v1/operators?x=1",
		} {
			anon := serve(t, h, &backend{body: playerBody}, "GET", target, nil)
			be := &backend{body: playerBody}
			bot := serve(t, h, be, "GET", target, keyHeader(scopeBotSecret))
			// The gateway's own envelopes carry the time they were written.
			sameTime := func(b string) string { return updatedAtValue.ReplaceAllString(b, `"updatedAt":0`) }
			if bot.Code != anon.Code || sameTime(bot.Body.String()) != sameTime(anon.Body.String()) || !maps.EqualFunc(bot.Header(), anon.Header(), slices.Equal) {
				t.Errorf("%s%s: out of scope\n%d %v %s\nanonymous\n%d %v %s", target, hide, bot.Code, bot.Header(), bot.Body, anon.Code, anon.Header(), anon.Body)
			}
			if len(be.calls) > 0 && be.calls[0].Header.Get("X-Api-Key") != "" {
				t.Errorf("%s: the key reached the backend", target)
			}
			key, _ := bot.repl.GetString(placeholderKey)
			client, _ := bot.repl.GetString(placeholderClient)
			if key != "bot" || client != "192.0.2.1" {
				t.Errorf("%s: key placeholder %q, client %q; want bot, 192.0.2.1", target, key, client)
			}
		}
		// Refused for its scope: counted as refused, with the key's name.
		r := serve(t, h, &backend{}, "GET", "/api/v1/server", keyHeader(scopeBotSecret))
		if o, _ := r.repl.GetString(placeholderOutcome); o != "refused" {
			t.Errorf("outcome %q, want refused", o)
		}
		// The anonymous answer to the player above was filtered: make sure
		// the comparison meant something.
		anon := serve(t, h, &backend{body: playerBody}, "GET", "/api/v1/player/40094F2F-ca8f-4826-8b31-11e0f4c449df", nil)
		if strings.Contains(anon.Body.String(), `"op":`) || !strings.Contains(anon.Body.String(), `"authenticated":false`) {
			t.Errorf("anonymous player not filtered: %s", anon.Body)
		}
	}

	h, _ := newTestHandler(t, scopedKeys)
	for _, c := range []struct {
		secret, target string
	}{
		{scopeBotSecret, "/api/v1/bans"},
		{scopeWebSecret, "/api/v1/performance"},
		{scopeStaffSecret, "/api/v1/server"},
		{scopeStaffSecret, "/api/v1/player/40094F2F-ca8f-4826-8b31-11e0f4c449df"},
	} {
		be := &backend{body: playerBody}
		r := serve(t, h, be, "GET", c.target, keyHeader(c.secret))
		if r.Code != 200 || r.Body.String() != playerBody || len(be.calls) != 1 {
			t.Errorf("%s in scope: %d %s, %d calls; want the backend's answer whole", c.target, r.Code, r.Body, len(be.calls))
		}
		if client, _ := r.repl.GetString(placeholderClient); client == "192.0.2.1" {
			t.Errorf("%s in scope: client placeholder is the address", c.target)
		}
	}
	// Web's scope holds status but not player: the player's protected fields
	// stay hidden from it.
	r := serve(t, h, &backend{body: playerBody}, "GET", "/api/v1/player/40094F2F-ca8f-4826-8b31-11e0f4c449df", keyHeader(scopeWebSecret))
	if strings.Contains(r.Body.String(), `"op":`) {
		t.Errorf("web key outside its scope saw protected fields: %s", r.Body)
	}
}

// TestKeyCap checks a key's max_in_flight: past it its caller gets 429 with
// Retry-After at once, while another key and anonymous callers are served.
func TestKeyCap(t *testing.T) {
	h, _ := newTestHandler(t, "key bot "+scopeBotSecret+" {\n\tmax_in_flight 1\n}\nkey web "+scopeWebSecret+"\ncoalesce off")
	g := newGate()
	codes := make(chan int, 4)
	go func() { codes <- serve(t, h, g, "GET", "/api/v1/status?n=1", keyHeader(scopeBotSecret)).Code }()
	<-g.entered
	r := serve(t, h, g, "GET", "/api/v1/status?n=2", keyHeader(scopeBotSecret))
	o, _ := r.repl.GetString(placeholderOutcome)
	key, _ := r.repl.GetString(placeholderKey)
	if r.Code != 429 || r.Header().Get("Retry-After") != "1" || r.envelope.Error.Message != "Too many requests" || o != "rate_limited" || key != "bot" {
		t.Errorf("second bot request: %d Retry-After %q %q outcome %q key %q", r.Code, r.Header().Get("Retry-After"), r.envelope.Error.Message, o, key)
	}
	go func() { codes <- serve(t, h, g, "GET", "/api/v1/status?n=3", keyHeader(scopeWebSecret)).Code }()
	<-g.entered // the other key is served
	go func() { codes <- serve(t, h, g, "GET", "/api/v1/status?n=4", nil).Code }()
	<-g.entered // and so is an anonymous caller
	for range 3 {
		g.release <- struct{}{}
	}
	for range 3 {
		if c := <-codes; c != 200 {
			t.Errorf("status %d", c)
		}
	}
	// The place is given back.
	if r := serve(t, h, &backend{body: `{"ok":true,"meta":{}}`}, "GET", "/api/v1/status?n=5", keyHeader(scopeBotSecret)); r.Code != 200 {
		t.Errorf("after the first ended: %d", r.Code)
	}
}

// TestKeyCapAcrossReload: a key's max_in_flight belongs to the guard, like
// every count of the backend's use: after a reload (a handler of the new
// config on the same guard) the key's requests still under way count, and
// its caller does not get the cap anew.
func TestKeyCapAcrossReload(t *testing.T) {
	// Named: outside an HTTP server a handler has no place to find its
	// guard by (test/ checks a reload of an unnamed one through Caddy).
	const block = "guard cap\nkey bot " + scopeBotSecret + " {\n\tmax_in_flight 1\n}\ncoalesce off"
	before, _ := newTestHandler(t, block)
	after, _ := newTestHandler(t, block+"\nkey web "+scopeWebSecret)
	if !sameGuard(before.guard, after.guard) {
		t.Fatal("the reload did not keep the guard")
	}
	g := newGate()
	done := make(chan int, 1)
	go func() { done <- serve(t, before, g, "GET", "/api/v1/status?n=1", keyHeader(scopeBotSecret)).Code }()
	<-g.entered
	if r := serve(t, after, &backend{body: `{"ok":true,"meta":{}}`}, "GET", "/api/v1/status?n=2", keyHeader(scopeBotSecret)); r.Code != 429 {
		t.Errorf("the key's second request, after the reload: %d, want 429", r.Code)
	}
	g.release <- struct{}{}
	if c := <-done; c != 200 {
		t.Errorf("the request under way: %d", c)
	}
}

// TestScopeOutsideCountsByAddress checks that a key outside its scope is held
// to the anonymous callers' per-client limit, by its address, like them.
func TestScopeOutsideCountsByAddress(t *testing.T) {
	h, _ := newTestHandler(t, scopedKeys+"\nmax_per_client 1\ncoalesce off")
	g := newGate()
	codes := make(chan int, 2)
	go func() { codes <- serve(t, h, g, "GET", "/api/v1/status?n=1", nil).Code }()
	<-g.entered
	target := "/api/v1/player/40094F2F-ca8f-4826-8b31-11e0f4c449df"
	if r := serve(t, h, g, "GET", target, keyHeader(scopeBotSecret)); r.Code != 429 {
		t.Errorf("bot outside its scope, its address at its limit: %d, want 429", r.Code)
	}
	go func() { codes <- serve(t, h, g, "GET", "/api/v1/bans", keyHeader(scopeBotSecret)).Code }()
	<-g.entered // inside its scope the key is not counted by address
	for range 2 {
		g.release <- struct{}{}
	}
	for range 2 {
		if c := <-codes; c != 200 {
			t.Errorf("status %d", c)
		}
	}
}

// TestScopeFromJSON checks a scoped key written in JSON.
func TestScopeFromJSON(t *testing.T) {
	h := mustProvision(t, `{"auth":{"keys":[{"name":"bot","key":"`+apikey.Digest(scopeBotSecret)+`","endpoints":["bans"],"max_in_flight":1}]}}`)
	if r := serve(t, h, &backend{body: playerBody}, "GET", "/api/v1/server", keyHeader(scopeBotSecret)); r.Code != 404 {
		t.Errorf("outside its scope: %d, want the disguised 404", r.Code)
	}
	if r := serve(t, h, &backend{body: playerBody}, "GET", "/api/v1/bans", keyHeader(scopeBotSecret)); r.Code != 200 || r.Body.String() != playerBody {
		t.Errorf("inside its scope: %d %s", r.Code, r.Body)
	}
}

// TestKeyRefusedCounted checks the per-key refusal counter: a scoped key
// refused on a protected endpoint outside its scope counts for its name,
// one inside its scope and an unknown key do not.
func TestKeyRefusedCounted(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	h := provisionIn(t, ctx, "statusgate {\n\tkey bot "+testKey+" {\n\t\tendpoints status\n\t}\n}")
	be := &backend{body: `{"ok":true,"data":{},"meta":{}}`}
	serve(t, h, be, "GET", "/api/v1/bans", keyHeader(testKey))
	serve(t, h, be, "GET", "/api/v1/bans", keyHeader(testKey))
	serve(t, h, be, "GET", "/api/v1/status", keyHeader(testKey))
	serve(t, h, be, "GET", "/api/v1/bans", keyHeader("not-a-key-0123456789"))
	got := scrapeStatusgate(t, ctx.GetMetricsRegistry())
	if n := got[`caddy_http_statusgate_key_refused_total{key="bot"}`]; n != 2 {
		t.Errorf("key_refused_total{key=\"bot\"} = %v, want 2", n)
	}
}

// TestAuthNulls: null for a require_key or protected_fields entry would make
// the endpoint public or hide nothing; it is refused with its path.
func TestAuthNulls(t *testing.T) {
	for config, want := range map[string]string{
		`{"auth":{"require_key":{"bans":null}}}`:                    "auth.require_key.bans: null is not a value",
		`{"auth":{"protected_fields":{"player":null}}}`:             "auth.protected_fields.player: null is not a value",
		`{"auth":{"protected_fields":{"server":[],"worlds":null}}}`: "auth.protected_fields.worlds: null",
	} {
		err := json.Unmarshal([]byte(config), new(Handler))
		wantErrorWords(t, err, want)
	}
	h := mustProvision(t, `{"auth":{"require_key":{"bans":false},"protected_fields":{"server":[]}}}`)
	if h.table.lookup("bans").requireKey {
		t.Error("require_key false did not open bans")
	}
}
