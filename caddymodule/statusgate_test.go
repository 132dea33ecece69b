package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

func TestDecisions(t *testing.T) {
	tests := []struct {
		name        string
		block       string
		method      string
		target      string
		header      http.Header
		wantStatus  int
		wantMessage string
		wantURI     string // what reached the backend; "" for nothing
	}{
		{name: "public endpoint anonymous", method: "GET", target: "/api/v1/status", wantStatus: 200, wantURI: "/api/v1/status"},
		{name: "alias", method: "GET", target: "/api/status?history=true", wantStatus: 200, wantURI: "/api/v1/status?history=true"},
		{name: "protected anonymous is a disguised 404", method: "GET", target: "/api/v1/server", wantStatus: 404, wantMessage: "Not found"},
		{name: "protected anonymous without disguise", block: "hide_protected off", method: "GET", target: "/api/v1/server", wantStatus: 401, wantMessage: "A valid API key is required"},
		{name: "protected wrong key", method: "GET", target: "/api/v1/server", header: keyHeader("nope-nope-nope-nope"), wantStatus: 404, wantMessage: "Not found"},
		{name: "protected keyed", method: "GET", target: "/api/v1/server", header: keyHeader(testKey), wantStatus: 200, wantURI: "/api/v1/server"},
		{name: "key trimmed like the backend", method: "GET", target: "/api/v1/server", header: keyHeader(" " + testKey + "\t"), wantStatus: 200, wantURI: "/api/v1/server"},
		{name: "query key refused by default and stripped", method: "GET", target: "/api/v1/status?key=" + testKey + "&history=true", wantStatus: 200, wantURI: "/api/v1/status?history=true"},
		{name: "query key off", method: "GET", target: "/api/v1/server?key=" + testKey, wantStatus: 404, wantMessage: "Not found"},
		{name: "query key on", block: "allow_query_key", method: "GET", target: "/api/v1/server?a=1&key=" + testKey + "&b=2", wantStatus: 200, wantURI: "/api/v1/server"},
		{name: "query key on, custom station", block: "allow_query_key\nenable custom/votes", method: "GET", target: "/api/v1/custom/votes?a=1&key=" + testKey + "&b=2", wantStatus: 200, wantURI: "/api/v1/custom/votes?a=1&b=2"},
		{name: "query key spelled with an escape", block: "allow_query_key", method: "GET", target: "/api/v1/server?k%65y=" + testKey, wantStatus: 200, wantURI: "/api/v1/server"},
		{name: "header wins over query", block: "allow_query_key", method: "GET", target: "/api/v1/server?key=" + testKey, header: keyHeader("wrong-wrong-wrong-wrong"), wantStatus: 404, wantMessage: "Not found"},
		{name: "empty header suppresses the query key", block: "allow_query_key", method: "GET", target: "/api/v1/server?key=" + testKey, header: keyHeader(""), wantStatus: 404, wantMessage: "Not found"},
		{name: "disabled by default", method: "GET", target: "/api/v1/whitelist", header: keyHeader(testKey), wantStatus: 404, wantMessage: "Not found"},
		{name: "enabled", block: "enable whitelist", method: "GET", target: "/api/v1/whitelist", header: keyHeader(testKey), wantStatus: 200, wantURI: "/api/v1/whitelist"},
		{name: "disabled", block: "disable status", method: "GET", target: "/api/v1/status", wantStatus: 404, wantMessage: "Not found"},
		{name: "require_key off", block: "require_key server off", method: "GET", target: "/api/v1/server", wantStatus: 200, wantURI: "/api/v1/server"},
		{name: "require_key on", block: "require_key status on\nhide_protected off", method: "GET", target: "/api/v1/status", wantStatus: 401, wantMessage: "A valid API key is required"},
		{name: "auth off makes everything public", block: "auth off", method: "GET", target: "/api/v1/bans?key=x", wantStatus: 200, wantURI: "/api/v1/bans"},
		{name: "custom station enabled", block: "enable custom/votes", method: "GET", target: "/api/v1/custom/votes", header: keyHeader(testKey), wantStatus: 200, wantURI: "/api/v1/custom/votes"},
		{name: "custom station unknown", block: "enable custom/votes", method: "GET", target: "/api/v1/custom/other", header: keyHeader(testKey), wantStatus: 404, wantMessage: "Not found"},
		{name: "custom station with a suffix", block: "enable custom/votes", method: "GET", target: "/api/v1/custom/votes/x", header: keyHeader(testKey), wantStatus: 404, wantMessage: "Not found"},
		{name: "custom prefix alone", block: "enable custom/votes", method: "GET", target: "/api/v1/custom", header: keyHeader(testKey), wantStatus: 404, wantMessage: "Not found"},
		{name: "player needs a uuid", method: "GET", target: "/api/v1/player", wantStatus: 404, wantMessage: "Not found"},
		{name: "player uuid", method: "GET", target: "/api/v1/player/40094F2F-ca8f-4826-8b31-11e0f4c449df?detailed=true", wantStatus: 200, wantURI: "/api/v1/player/40094F2F-ca8f-4826-8b31-11e0f4c449df?detailed=true"},
		{name: "player non-uuid", method: "GET", target: "/api/v1/player/alex", wantStatus: 404, wantMessage: "Not found"},
		{name: "world name escaped again", method: "GET", target: "/api/v1/worlds/my%20world", header: keyHeader(testKey), wantStatus: 200, wantURI: "/api/v1/worlds/my%20world"},
		{name: "world name plus kept", method: "GET", target: "/api/v1/worlds/a+b", header: keyHeader(testKey), wantStatus: 200, wantURI: "/api/v1/worlds/a+b"},
		{name: "world dot-dot", method: "GET", target: "/api/v1/worlds/%2e%2e", header: keyHeader(testKey), wantStatus: 404, wantMessage: "Not found"},
		{name: "world encoded slash", method: "GET", target: "/api/v1/worlds/..%2Fserver", header: keyHeader(testKey), wantStatus: 404, wantMessage: "Not found"},
		{name: "punishments list", method: "GET", target: "/api/v1/punishments", header: keyHeader(testKey), wantStatus: 200, wantURI: "/api/v1/punishments"},
		{name: "not under api", method: "GET", target: "/apix/v1/status", wantStatus: 404, wantMessage: "Not found"},
		{name: "root", method: "GET", target: "/", wantStatus: 404, wantMessage: "Not found"},
		{name: "options not under api", method: "OPTIONS", target: "/other", wantStatus: 404, wantMessage: "Not found"},
		{name: "post to hidden endpoint looks missing", method: "POST", target: "/api/v1/server", wantStatus: 404, wantMessage: "Not found"},
		{name: "post keyed is 405", method: "POST", target: "/api/v1/server", header: keyHeader(testKey), wantStatus: 405, wantMessage: "Method not allowed"},
		{name: "post to public is 405", method: "POST", target: "/api/v1/status", wantStatus: 405, wantMessage: "Method not allowed"},
		{name: "lower-case method is not GET", method: "get", target: "/api/v1/status", wantStatus: 405, wantMessage: "Method not allowed"},
		{name: "post to unknown is 404", method: "POST", target: "/api/v1/nothing", wantStatus: 404, wantMessage: "Not found"},
	}
	for _, tc := range tests {
		be := &backend{body: `{"ok":true,"data":{},"meta":{"authenticated":true}}`}
		t.Run(tc.name, func(t *testing.T) {
			withBothForms(t, "key "+testKey+"\n"+tc.block, be, func(t *testing.T, h *Handler, next caddyhttp.Handler) {
				be.calls = nil
				got := serve(t, h, next, tc.method, tc.target, tc.header)
				if got.Code != tc.wantStatus {
					t.Fatalf("status %d, want %d; body %s", got.Code, tc.wantStatus, got.Body)
				}
				if tc.wantMessage != "" && got.envelope.Error.Message != tc.wantMessage {
					t.Errorf("message %q, want %q", got.envelope.Error.Message, tc.wantMessage)
				}
				if tc.wantStatus == 405 && got.Header().Get("Allow") != "GET, HEAD, OPTIONS" {
					t.Errorf("Allow = %q", got.Header().Get("Allow"))
				}
				switch {
				case tc.wantURI == "" && len(be.calls) > 0:
					t.Fatalf("backend got %s %s; want nothing", be.calls[0].Method, be.calls[0].RequestURI)
				case tc.wantURI != "":
					if len(be.calls) != 1 {
						t.Fatalf("backend got %d calls, want 1", len(be.calls))
					}
					up := be.calls[0]
					if up.RequestURI != tc.wantURI || up.URL.RequestURI() != tc.wantURI {
						t.Errorf("upstream RequestURI %q, URL %q; want %q", up.RequestURI, up.URL.RequestURI(), tc.wantURI)
					}
					if up.Header.Get("X-Api-Key") != "" {
						t.Error("key header reached the backend")
					}
				}
			})
		})
	}
}

func TestHeadIsGetWithoutBody(t *testing.T) {
	be := &backend{body: playerBody}
	withBothForms(t, "key "+testKey, be, func(t *testing.T, h *Handler, next caddyhttp.Handler) {
		be.calls = nil
		got := serve(t, h, next, "HEAD", "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df", nil)
		if got.Code != 200 || got.Body.Len() != 0 {
			t.Fatalf("HEAD: %d, body %q", got.Code, got.Body)
		}
		if len(be.calls) != 1 || be.calls[0].Method != "GET" {
			t.Fatalf("upstream method %v", be.calls)
		}
		miss := serve(t, h, next, "HEAD", "/api/v1/nothing", nil)
		if miss.Code != 404 || miss.Body.Len() != 0 || len(be.calls) != 1 {
			t.Fatalf("HEAD unknown: %d %q, %d trips", miss.Code, miss.Body, len(be.calls))
		}
	})
}

func TestForwardedHeaders(t *testing.T) {
	hdr := http.Header{
		"Cf-Connecting-Ip": {"1.2.3.4"}, "True-Client-Ip": {"1.2.3.4"}, "X-Real-Ip": {"1.2.3.4"},
		"X-Api-Key": {testKey}, "Upgrade": {"websocket"}, "Accept-Encoding": {"gzip"}, "X-Other": {"kept"},
	}
	be := &backend{body: `{"ok":true,"meta":{}}`}
	withBothForms(t, "key "+testKey, be, func(t *testing.T, h *Handler, next caddyhttp.Handler) {
		be.calls = nil
		serve(t, h, next, "GET", "/api/v1/server", hdr)
		up := be.calls[0].Header
		for _, k := range []string{"Cf-Connecting-Ip", "True-Client-Ip", "X-Real-Ip", "X-Api-Key", "Upgrade"} {
			if _, ok := up[k]; ok {
				t.Errorf("%s reached the backend", k)
			}
		}
		// Keyed responses are shared by default (coalescing): one encoding for all.
		if up.Get("X-Other") != "kept" || up.Get("Accept-Encoding") != "identity" {
			t.Errorf("keyed request headers changed: %v", up)
		}
	})
	h, _ := newTestHandler(t, "key "+testKey)
	// Without coalescing a keyed caller's Accept-Encoding goes through.
	solo, _ := newTestHandler(t, "key "+testKey+"\ncoalesce off")
	be = &backend{body: `{"ok":true,"meta":{}}`}
	serve(t, solo, be, "GET", "/api/v1/server", hdr)
	if got := be.calls[0].Header.Get("Accept-Encoding"); got != "gzip" {
		t.Errorf("unshared keyed request Accept-Encoding %q, want the caller's gzip", got)
	}
	be = &backend{body: `{"ok":true,"meta":{}}`}
	serve(t, h, be, "GET", "/api/v1/status", http.Header{"Accept-Encoding": {"gzip"}})
	if got := be.calls[0].Header.Get("Accept-Encoding"); got != "identity" {
		t.Errorf("filtered request Accept-Encoding %q, want identity", got)
	}
}

func TestFieldLayer(t *testing.T) {
	const uuid = "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df"
	t.Run("anonymous", func(t *testing.T) {
		withBothForms(t, "key "+testKey, &backend{body: playerBody, header: http.Header{"Etag": {`"x"`}}}, func(t *testing.T, h *Handler, next caddyhttp.Handler) {
			got := serve(t, h, next, "GET", uuid, nil)
			want := `{"ok":true,"data":{"uuid":"u","name":"Alex","stat":{"jump":1},"detailed":{"list":[{"keep":2}]}},"meta":{"version":"v1","server":"global","updatedAt":1,"authenticated":false,"hiddenFields":["op","banned","discord"]}}`
			if got.Code != 200 || got.Body.String() != want {
				t.Fatalf("%d\n got %s\nwant %s", got.Code, got.Body, want)
			}
			if cl := got.Header().Get("Content-Length"); cl != strconv.Itoa(len(want)) {
				t.Errorf("Content-Length %s, body %d", cl, len(want))
			}
			if got.Header().Get("Etag") != "" {
				t.Error("ETag of the unfiltered body kept")
			}
		})
	})
	t.Run("keyed gets the backend's bytes", func(t *testing.T) {
		withBothForms(t, "key "+testKey, &backend{body: playerBody}, func(t *testing.T, h *Handler, next caddyhttp.Handler) {
			got := serve(t, h, next, "GET", uuid, keyHeader(testKey))
			if got.Body.String() != playerBody {
				t.Fatalf("keyed body changed:\n%s", got.Body)
			}
		})
	})
	t.Run("auth off passes everything", func(t *testing.T) {
		withBothForms(t, "auth off", &backend{body: playerBody}, func(t *testing.T, h *Handler, next caddyhttp.Handler) {
			got := serve(t, h, next, "GET", uuid, nil)
			if got.Body.String() != playerBody {
				t.Fatalf("auth off body changed:\n%s", got.Body)
			}
		})
	})
	t.Run("empty list hides nothing but tells the truth", func(t *testing.T) {
		withBothForms(t, "key "+testKey+"\nprotected_fields player", &backend{body: playerBody}, func(t *testing.T, h *Handler, next caddyhttp.Handler) {
			got := serve(t, h, next, "GET", uuid, nil)
			if !strings.Contains(got.Body.String(), `"op":true`) || !strings.HasSuffix(got.Body.String(), `"authenticated":false}}`) ||
				strings.Contains(got.Body.String(), "hiddenFields") {
				t.Fatalf("got %s", got.Body)
			}
		})
	})
	t.Run("error envelopes of the backend are filtered too", func(t *testing.T) {
		body := `{"ok":false,"error":{"status":404,"message":"World not found: x","path":"/api/v1/worlds/x"},"meta":{"version":"v1"}}`
		withBothForms(t, "key "+testKey, &backend{status: 404, body: body}, func(t *testing.T, h *Handler, next caddyhttp.Handler) {
			got := serve(t, h, next, "GET", "/api/v1/status", nil)
			if got.Code != 404 || !strings.HasSuffix(got.Body.String(), `"meta":{"version":"v1","authenticated":false}}`) {
				t.Fatalf("%d %s", got.Code, got.Body)
			}
		})
	})
}

func TestFailClosed(t *testing.T) {
	broken := func(n int) string { // valid for n bytes, then cut off inside a protected member
		return `{"ok":true,"data":{"pad":"` + strings.Repeat("x", n) + `","op":true,`
	}
	tests := []struct {
		name   string
		be     *backend
		status int
		cut    bool
	}{
		{name: "html", be: &backend{body: "<h1>404 Not Found</h1>", header: http.Header{"Content-Type": {"text/html"}}}, status: 502},
		{name: "no content type", be: &backend{body: `{"ok":true}`, header: http.Header{"Content-Type": {""}}}, status: 502},
		{name: "utf-7", be: &backend{body: playerBody, header: http.Header{"Content-Type": {"application/json; charset=utf-7"}}}, status: 502},
		{name: "two content types", be: &backend{body: playerBody, header: http.Header{"Content-Type": {"application/json; charset=utf-8", "text/html"}}}, status: 502},
		{name: "a +json type", be: &backend{body: playerBody, header: http.Header{"Content-Type": {"application/problem+json"}}}, status: 502},
		{name: "gzip", be: &backend{body: "\x1f\x8b\x08", header: http.Header{"Content-Encoding": {"gzip"}}}, status: 502},
		{name: "truncated", be: &backend{body: `{"ok":true,"data":{"a":{"op":1,"b":[1,2`}, status: 502},
		{name: "invalid", be: &backend{body: `{"ok":true,"data":{"op":tru}}`}, status: 502},
		{name: "not an object", be: &backend{body: `[1,2]`}, status: 502},
		{name: "meta not an object", be: &backend{body: `{"ok":true,"meta":[]}`}, status: 502},
		{name: "empty", be: &backend{body: ``}, status: 502},
		{name: "deep", be: &backend{body: `{"a":` + strings.Repeat("[", 200000)}, status: 502},
		{name: "unreachable", be: &backend{err: caddyhttp.Error(http.StatusBadGateway, errors.New("dial tcp: connection refused"))}, status: 502},
		{name: "timeout", be: &backend{err: caddyhttp.Error(http.StatusGatewayTimeout, errors.New("i/o timeout"))}, status: 504},
		{name: "aborted before any output", be: &backend{panic: http.ErrAbortHandler}, status: 502},
		{name: "broken within the hold-back window", be: &backend{body: broken(100 << 10)}, status: 502},
		{name: "broken past 256 KiB, within max_response", be: &backend{body: broken(256<<10 + 1)}, status: 502},
		{name: "broken past max_response", be: &backend{body: broken(defaultMaxResponse + 1)}, cut: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, logs := newTestHandler(t, "key "+testKey)
			r, repl := newRequest("GET", "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df?key="+testKey)
			r.Header.Set("X-Api-Key", "wrong-key-value-0000")
			rec := httptest.NewRecorder()
			// What a header directive before the gateway sets.
			rec.Header().Set("Strict-Transport-Security", "max-age=63072000")
			var rec2 any
			func() {
				defer func() { rec2 = recover() }()
				_ = h.ServeHTTP(rec, r, tc.be)
			}()
			if o, _ := repl.GetString(placeholderOutcome); o != "backend_error" {
				t.Errorf("outcome %q, want backend_error", o)
			}
			if tc.cut {
				if rec2 != http.ErrAbortHandler {
					t.Fatalf("want the connection cut (ErrAbortHandler), got panic %v, status %d", rec2, rec.Code)
				}
				if bytes.Contains(rec.Body.Bytes(), []byte(`"op"`)) {
					t.Fatal("a protected member was sent")
				}
				return
			}
			if rec2 != nil {
				t.Fatalf("panic %v", rec2)
			}
			var env struct {
				OK    bool
				Error struct {
					Status  int
					Message string
				}
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
				t.Fatalf("status %d, body %q is not an envelope", rec.Code, rec.Body)
			}
			if rec.Code != tc.status || env.Error.Status != tc.status || env.OK {
				t.Fatalf("status %d, envelope %+v; want %d", rec.Code, env, tc.status)
			}
			if rec.Header().Get("Content-Encoding") != "" || rec.Header().Get("Content-Type") != "application/json; charset=utf-8" {
				t.Errorf("backend headers leaked into the refusal: %v", rec.Header())
			}
			if rec.Header().Get("Strict-Transport-Security") != "max-age=63072000" {
				t.Errorf("the refusal lost the site's headers: %v", rec.Header())
			}
			if logs.FilterMessage("backend response refused").Len() != 1 {
				t.Errorf("the failure was not logged: %v", logs.All())
			}
			for _, e := range logs.All() {
				if strings.Contains(e.Message, "wrong-key") || strings.Contains(e.Message, testKey) {
					t.Fatal("key in log message")
				}
				for _, f := range e.Context {
					if strings.Contains(f.String, "wrong-key") || strings.Contains(f.String, testKey) ||
						(f.Interface != nil && strings.Contains(errString(f.Interface), testKey)) {
						t.Fatalf("key in log field %s", f.Key)
					}
				}
			}
		})
	}
}

func errString(v any) string {
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return ""
}

func TestKeyedPassthroughFailures(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey)
	gz := &backend{body: "\x1f\x8b\x08", header: http.Header{"Content-Encoding": {"gzip"}}}
	got := serve(t, h, gz, "GET", "/api/v1/server", keyHeader(testKey))
	if got.Code != 200 || got.Body.String() != "\x1f\x8b\x08" {
		t.Fatalf("keyed gzip: %d %q", got.Code, got.Body)
	}
	down := &backend{err: caddyhttp.Error(http.StatusBadGateway, errors.New("refused"))}
	if got := serve(t, h, down, "GET", "/api/v1/server", keyHeader(testKey)); got.Code != 502 || got.envelope.Error.Message != "Bad gateway" {
		t.Fatalf("keyed unreachable: %d %s", got.Code, got.Body)
	}
}

func TestStripQueryKey(t *testing.T) {
	tests := map[string]string{
		"":                        "",
		"a=1":                     "a=1",
		"key=x":                   "",
		"a=1&key=x&b=2":           "a=1&b=2",
		"k%65y=x&a=%2F":           "a=%2F",
		"key&a=1":                 "a=1",
		"KEY=x":                   "KEY=x",
		"keys=x&key=y&key=z":      "keys=x",
		"a=1&&b=2":                "a=1&&b=2",
		"p=%25player_name%25&b=+": "p=%25player_name%25&b=+",
		"+key=x":                  "+key=x",
		"k%zzey=x":                "k%zzey=x",
	}
	for in, want := range tests {
		if got := stripQueryKey(in); got != want {
			t.Errorf("stripQueryKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStartupWarnings(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	core, logs := observer.New(zap.InfoLevel)
	off := false
	h := &Handler{Auth: AuthConfig{Enabled: &off, Keys: []apikey.Key{{Name: "tiny", Secret: "short"}, {Secret: apikey.Digest("x")}}}}
	// Provision takes its logger from the context; swap it in through a
	// wrapper so the warnings can be read.
	if err := h.provisionWith(ctx, zap.New(core)); err != nil {
		t.Fatal(err)
	}
	defer h.Cleanup()
	if logs.FilterMessageSnippet("auth is off").FilterLevelExact(zap.WarnLevel).Len() != 1 {
		t.Errorf("no warn-level auth-off line: %v", logs.All())
	}
	// One warning, for the short secret, by name; a digest is never short.
	if w := logs.FilterMessageSnippet("short API key"); w.Len() != 1 || w.All()[0].ContextMap()["key"] != "tiny" {
		t.Errorf("want one short-key warning, for tiny: %v", logs.All())
	}
	for _, e := range logs.All() {
		for _, f := range e.Context {
			if f.String == "short" {
				t.Fatal("the key was logged")
			}
		}
	}
}

// TestBrokeOffMidStreamCounted: an answer too large to hold that breaks off
// while it streams ends in reverse_proxy's http.ErrAbortHandler panic, which
// must cut the connection and still be counted as backend_error, like an
// answer the field layer refuses mid-stream.
func TestBrokeOffMidStreamCounted(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		h, _ := newTestHandler(t, "key "+testKey)
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"ok":true,"data":{"pad":"`+strings.Repeat("x", defaultMaxResponse+1))
			panic(http.ErrAbortHandler)
		})
		r, repl := newRequest("GET", "/api/v1/status")
		if keyed {
			r.Header.Set("X-Api-Key", testKey)
		}
		var rec any
		func() {
			defer func() { rec = recover() }()
			_ = h.ServeHTTP(httptest.NewRecorder(), r, next)
		}()
		if rec != http.ErrAbortHandler {
			t.Errorf("keyed %v: panic %v, want the connection cut", keyed, rec)
		}
		if o, _ := repl.GetString(placeholderOutcome); o != "backend_error" {
			t.Errorf("keyed %v: outcome %q, want backend_error", keyed, o)
		}
	}
}
