package caddymodule

import (
	"net/http"
	"net/url"
	"testing"
)

// TestBadRequestTargets checks the 400 for targets Caddy's access log could
// not filter as the gateway reads them: a '#' anywhere (which url.Parse
// takes for a fragment in an absolute-form target), and queries that
// url.ParseQuery, the log filter's parser, rejects. They are refused before
// the key is read and before the route, the same for every path under /api;
// ordinary queries, escapes included, still work.
func TestBadRequestTargets(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\nallow_query_key")
	for _, target := range []string{
		"/api/v1/bans?x=#&key=" + testKey,
		"http://example.com/api/v1/bans?x=#&key=" + testKey,
		"http://example.com/api/v1/bans?x=#%zz&key=" + testKey,
		"/api/v1/bans?key=" + testKey + "#",
		"/api/v1/worlds/a#b?key=" + testKey,
		"/api/v1/nothing?x=#",
		"/api/v1/bans?x=1;key=" + testKey,
		"/api/v1/bans?key=" + testKey + ";x=1",
		"/api/v1/bans?x=%zz&key=" + testKey,
		"/api/v1/bans?x=%2&key=" + testKey,
		"/api/v1/bans?key=" + testKey + "&x=%",
		"/api/v1/bans?k%6=1&key=" + testKey,
		"/api/v1/status?x=%G1",
	} {
		be := &backend{}
		got := serve(t, h, be, "GET", target, nil)
		if got.Code != http.StatusBadRequest || got.envelope.Error.Message != "Bad request" || len(be.calls) != 0 {
			t.Errorf("%s: %d %q, %d calls; want 400 Bad request, none", target, got.Code, got.envelope.Error.Message, len(be.calls))
		}
		if o, _ := got.repl.GetString(placeholderOutcome); o != "bad_request" {
			t.Errorf("%s: outcome %q", target, o)
		}
		if !got.logSkipped {
			t.Errorf("%s: the access log would have it", target)
		}
		u, err := url.ParseRequestURI(target)
		if err == nil && got.envelope.Error.Path != u.Path {
			t.Errorf("%s: envelope path %q, want %q", target, got.envelope.Error.Path, u.Path)
		}
	}
	for _, target := range []string{
		"/api/v1/bans?key=" + testKey,
		"/api/v1/bans?x=%2F%41+b&key=" + testKey + "&y=",
		"/api/v1/bans?k%65y=" + testKey + "&&x",
		"http://example.com/api/v1/bans?key=" + testKey,
	} {
		be := &backend{body: `{"ok":true,"meta":{}}`}
		if got := serve(t, h, be, "GET", target, nil); got.Code != 200 || len(be.calls) != 1 || got.logSkipped {
			t.Errorf("%s: %d, %d calls, log skipped %v; want 200, one, logged", target, got.Code, len(be.calls), got.logSkipped)
		}
	}
	// The preflight stays the same for every target.
	if got := serve(t, h, &backend{}, "OPTIONS", "/api/v1/bans?x=#", nil); got.Code != http.StatusNoContent {
		t.Errorf("preflight with '#': %d", got.Code)
	}
}

// plainTarget agrees with url.ParseQuery on every query: it accepts exactly
// those it parses without an error.
func TestPlainTargetIsParseQuery(t *testing.T) {
	for _, q := range []string{"", "a", "a=1&b=2", "a=%41", "a=%4", "a=%", "%41=1", "%zz", "a;b", "a=1;", "+=+", "a=%e2%82%ac", "a=%E2%82%AC&&", "a=%%41"} {
		r, _ := newRequest("GET", "/api/v1/status?"+q)
		_, err := url.ParseQuery(q)
		if got := plainTarget(r); got != (err == nil) {
			t.Errorf("%q: plainTarget %v, ParseQuery error %v", q, got, err)
		}
	}
}
