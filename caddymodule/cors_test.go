package caddymodule

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// addingBackend answers like reverse_proxy passes a backend's answer on: it
// adds the backend's headers to those already set, which is how two
// Access-Control-Allow-Origin values could reach a browser. Its CORS headers
// are what a misconfigured backend might send.
func addingBackend(status int, body string, extra ...string) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		hdr := w.Header()
		hdr.Add("Content-Type", "application/json; charset=utf-8")
		hdr.Add("Access-Control-Allow-Origin", "*")
		hdr.Add("Access-Control-Allow-Credentials", "true")
		hdr.Add("Access-Control-Expose-Headers", "X-Backend-Internal")
		for i := 0; i+1 < len(extra); i += 2 {
			hdr.Add(extra[i], extra[i+1])
		}
		w.WriteHeader(status)
		_, err := io.WriteString(w, body)
		return err
	})
}

// TestCORSOnEveryAnswer checks what a browser on another origin is told, for
// every kind of answer: exactly one Access-Control-Allow-Origin "*",
// Retry-After exposed to scripts, never credentials, and nothing that depends
// on the caller's Origin.
func TestCORSOnEveryAnswer(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\nrequire_key performance off")
	failing := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		return caddyhttp.Error(http.StatusBadGateway, errors.New("dial tcp: connection refused"))
	})
	busy := `{"ok":false,"error":{"status":429,"message":"Too many requests, retry in 3s","path":"/api/v1/status"},"meta":{"version":"v1","updatedAt":1}}`
	origin := http.Header{"Origin": {"https://shop.example"}}
	keyed := keyHeader(testKey)
	keyed.Set("Origin", "https://shop.example")

	for _, c := range []struct {
		name           string
		next           caddyhttp.Handler
		method, target string
		header         http.Header
		status         int
		retryAfter     string
	}{
		{"public, filtered", addingBackend(200, playerBody), "GET", "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df", origin, 200, ""},
		{"keyed, passed through", addingBackend(200, playerBody), "GET", "/api/v1/server", keyed, 200, ""},
		{"HEAD, filtered", addingBackend(200, playerBody), "HEAD", "/api/v1/performance", origin, 200, ""},
		{"backend 429, filtered", addingBackend(429, busy, "Retry-After", "3"), "GET", "/api/v1/status", origin, 429, "3"},
		{"backend 429, passed through", addingBackend(429, busy, "Retry-After", "3"), "GET", "/api/v1/bans", keyed, 429, "3"},
		{"backend down", failing, "GET", "/api/v1/status", origin, 502, ""},
		{"backend not JSON", addingBackend(200, "<h1>hi</h1>", "Content-Type", "text/html"), "GET", "/api/v1/status", origin, 502, ""},
		{"index", nil, "GET", "/api/v1", origin, 200, ""},
		{"disguised 404", nil, "GET", "/api/v1/bans", origin, 404, ""},
		{"unknown endpoint", nil, "GET", "/api/v1/nothing", origin, 404, ""},
		{"outside /api", nil, "GET", "/favicon.ico", origin, 404, ""},
		{"405", nil, "POST", "/api/v1/server", keyed, 405, ""},
		{"preflight", nil, "OPTIONS", "/api/v1/bans", http.Header{"Origin": {"https://shop.example"}, "Access-Control-Request-Method": {"GET"}, "Access-Control-Request-Headers": {"x-api-key"}}, 204, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			next := c.next
			if next == nil {
				next = &backend{}
			}
			got := serve(t, h, next, c.method, c.target, c.header)
			hdr := got.Header()
			if got.Code != c.status {
				t.Fatalf("status %d, want %d; %s", got.Code, c.status, got.Body)
			}
			if v := hdr.Values("Access-Control-Allow-Origin"); !slices.Equal(v, []string{"*"}) {
				t.Errorf("Access-Control-Allow-Origin %q, want exactly one *", v)
			}
			if v := hdr.Values("Access-Control-Expose-Headers"); !slices.Equal(v, []string{"Retry-After"}) {
				t.Errorf("Access-Control-Expose-Headers %q, want Retry-After", v)
			}
			if v, ok := hdr["Access-Control-Allow-Credentials"]; ok {
				t.Errorf("Access-Control-Allow-Credentials %q: credentials are never allowed", v)
			}
			if v := hdr.Values("Vary"); slices.Contains(v, "Origin") {
				t.Errorf("Vary %q: the answer does not depend on Origin", v)
			}
			if v := hdr.Get("Retry-After"); v != c.retryAfter {
				t.Errorf("Retry-After %q, want %q", v, c.retryAfter)
			}
		})
	}
}

// TestCORSSameForAnyOrigin checks that the gateway's answer does not depend on
// the Origin a browser sends, or on whether it sends one: what a cache in
// front may store for one page is right for every other.
func TestCORSSameForAnyOrigin(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey)
	var first http.Header
	for _, o := range []string{"", "https://shop.example", "null", "http://127.0.0.1:8082"} {
		hdr := http.Header{}
		if o != "" {
			hdr.Set("Origin", o)
		}
		got := serve(t, h, addingBackend(200, playerBody), "GET", "/api/v1/status", hdr).Header().Clone()
		got.Del("Content-Length")
		if first == nil {
			first = got
			continue
		}
		for k, v := range got {
			if !slices.Equal(first[k], v) {
				t.Errorf("Origin %q: %s %q, without Origin %q", o, k, v, first[k])
			}
		}
	}
}

// TestCORSFromTheMicroCache checks the answers the gateway shares: the one the
// backend gave and the one served again from the micro-cache (status is
// cached for a second by default) carry the same single CORS headers.
func TestCORSFromTheMicroCache(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey)
	calls := 0
	inner := addingBackend(200, `{"ok":true,"data":{"online":[],"minecraft":0,"discord":null},"meta":{"version":"v1","updatedAt":1}}`)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		calls++
		return inner.ServeHTTP(w, r)
	})
	for i := range 2 {
		got := serve(t, h, next, "GET", "/api/v1/status", http.Header{"Origin": {"https://shop.example"}})
		hdr := got.Header()
		if got.Code != 200 || !slices.Equal(hdr.Values("Access-Control-Allow-Origin"), []string{"*"}) ||
			!slices.Equal(hdr.Values("Access-Control-Expose-Headers"), []string{"Retry-After"}) || hdr.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("answer %d: %d, headers %v", i+1, got.Code, hdr)
		}
	}
	if calls != 1 {
		t.Errorf("the backend was called %d times, want 1: the second answer was not shared", calls)
	}
}
