package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap/zaptest/observer"
)

// TestKeyInAnotherHeaderRefused: a request whose key a handler before
// statusgate copied into another header (request_header X-Copy
// {http.request.header.X-API-Key}) is refused before any trip, in both
// forms, with a logged fix that holds no key; so is one of a key sent in
// ?key= and copied the same way.
func TestKeyInAnotherHeaderRefused(t *testing.T) {
	for _, form := range []string{"1.0", "declared"} {
		t.Run(form, func(t *testing.T) {
			be := &counter{body: playerBody}
			var h *Handler
			var logs *observer.ObservedLogs
			next := caddyhttp.Handler(be)
			if form == "1.0" {
				h, logs = newTestHandler(t, "key "+testKey+"\nallow_query_key")
			} else {
				h, logs = newDeclaredHandler(t, "key "+testKey+"\nallow_query_key", be)
				next = nothingAfter
			}
			for _, target := range []string{"/api/v1/server", "/api/v1/server?key=" + testKey} {
				header := http.Header{"X-Copy": {"copied " + testKey}}
				if !strings.Contains(target, "key=") {
					header.Set("X-Api-Key", testKey)
				}
				got := serve(t, h, next, "GET", target, header)
				if got.Code != http.StatusBadGateway {
					t.Errorf("%s: status %d, want 502", target, got.Code)
				}
			}
			if n := be.n(); n != 0 {
				t.Errorf("the backend was asked %d times", n)
			}
			fixed := 0
			for _, e := range logs.All() {
				line := e.Message + " " + strings.Join(fieldStrings(e), " ")
				if strings.Contains(line, testKey) {
					t.Errorf("a log line holds the key: %s", line)
				}
				if strings.Contains(line, "header X-Copy") && strings.Contains(line, "statusgate refused to send it") {
					fixed++
				}
			}
			if fixed != 2 {
				t.Errorf("%d log lines name the header and the fix, want 2", fixed)
			}
		})
	}
}

// fieldStrings is every field of a log entry as text.
func fieldStrings(e observer.LoggedEntry) []string {
	var out []string
	for k, v := range e.ContextMap() {
		out = append(out, k+"="+caddy.ToString(v))
		if err, ok := v.(error); ok {
			out = append(out, err.Error())
		}
	}
	return out
}

// TestKeptCopiesSealed: what Caddy keeps beside the request statusgate
// decided carries no key for the handlers after it: the original request
// (FastCGI's REQUEST_URI, {http.request.orig_uri}) has no ?key=, and a
// variable set to the key before statusgate is empty.
func TestKeptCopiesSealed(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\nallow_query_key")
	var origQuery, origURI, fwd string
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		or := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request)
		origQuery = or.URL.RawQuery
		repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		origURI, _ = repl.GetString("http.request.orig_uri")
		fwd = caddy.ToString(caddyhttp.GetVar(r.Context(), "fwd"))
		return (&backend{body: playerBody}).ServeHTTP(w, r)
	})
	r, _ := newRequest("GET", "/api/v1/bans?limit=5&key="+testKey)
	caddyhttp.SetVar(r.Context(), "fwd", "k="+testKey)
	rec := httptest.NewRecorder()
	if err := h.ServeHTTP(rec, r, next); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("%d %v", rec.Code, err)
	}
	for what, v := range map[string]string{"original query": origQuery, "{http.request.orig_uri}": origURI, "vars fwd": fwd} {
		if strings.Contains(v, testKey) {
			t.Errorf("%s holds the key: %q", what, v)
		}
	}
	if origQuery != "limit=5" || origURI != "/api/v1/bans?limit=5" {
		t.Errorf("original query %q, target %q: want the rest of the query kept", origQuery, origURI)
	}
}
