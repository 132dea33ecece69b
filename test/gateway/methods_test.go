package gateway

import (
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestMethodsAndHeaders checks HEAD, other methods, the CORS preflight, paths
// outside /api and the request headers the backend must never see.
func TestMethodsAndHeaders(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be)
	server, player := "/api/v1/server", "/api/v1/player/"+Alex

	t.Run("HEAD", func(t *testing.T) {
		for _, c := range []struct {
			target string
			header []string
		}{
			{player, nil},
			{server, []string{WithKey(KeyA)}},
		} {
			get := Send(t, "GET", c.target, c.header...)
			head := Send(t, "HEAD", c.target, c.header...)
			if head.Status != 200 || len(head.Body) != 0 || len(head.Trailing) != 0 || head.Err != nil {
				t.Errorf("HEAD %s: %d, body %q, trailing %q, err %v; want 200 without a body", c.target, head.Status, head.Body, head.Trailing, head.Err)
			}
			if cl := head.Header.Get("Content-Length"); cl != strconv.Itoa(len(get.Body)) {
				t.Errorf("HEAD %s: Content-Length %q, GET has %d bytes", c.target, cl, len(get.Body))
			}
			WantJSONHeaders(t, head, "HEAD "+c.target)
			be.WantSeen(t, "GET and HEAD "+c.target, c.target, c.target) // HEAD went upstream as GET
		}
		head := Send(t, "HEAD", "/api/v1")
		if head.Status != 200 || len(head.Body) != 0 || len(head.Trailing) != 0 || head.Header.Get("Content-Length") == "" {
			t.Errorf("HEAD index: %d, %q, Content-Length %q", head.Status, head.Body, head.Header.Get("Content-Length"))
		}
		head = Send(t, "HEAD", server)
		if head.Status != 404 || len(head.Body) != 0 || len(head.Trailing) != 0 {
			t.Errorf("anonymous HEAD %s: %d %q, want 404 without a body", server, head.Status, head.Body)
		}
		be.WantSeen(t, "HEAD index and hidden")
	})

	t.Run("a hidden endpoint reads like a missing one", func(t *testing.T) {
		// Same length, so that even Content-Length matches.
		hidden, missing := server, "/api/v1/sexver"
		for _, m := range []string{"POST", "GET", "DELETE", "PUT", "PATCH", "get", "BREW"} {
			h, u := Send(t, m, hidden), Send(t, m, missing)
			WantNotFound(t, h, hidden)
			WantNotFound(t, u, missing)
			if !reflect.DeepEqual(withoutDate(h.Header), withoutDate(u.Header)) {
				t.Errorf("%s: hidden and missing 404 differ in headers:\n%v\n%v", m, h.Header, u.Header)
			}
			if a, b := withoutPath(t, h.Body), withoutPath(t, u.Body); a != b {
				t.Errorf("%s: hidden and missing 404 differ in body:\n%s\n%s", m, a, b)
			}
		}
		be.WantSeen(t, "hidden and missing")
	})

	t.Run("405 after the key check", func(t *testing.T) {
		for _, c := range []struct {
			method, target string
			header         []string
		}{
			{"POST", server, []string{WithKey(KeyA)}},
			{"PUT", "/api/server", []string{WithKey(KeyA)}},
			{"DELETE", server, []string{WithKey(KeyA)}},
			{"get", server, []string{WithKey(KeyA)}},
			{"POST", player, nil},
			{"PATCH", "/api/v1/status", nil},
			{"POST", "/api/v1", nil},
		} {
			r := Send(t, c.method, c.target, c.header...)
			WantError(t, r, http.StatusMethodNotAllowed, c.target)
			if got := r.Header.Values("Allow"); !reflect.DeepEqual(got, []string{"GET, HEAD, OPTIONS"}) {
				t.Errorf("%s %s: Allow %q", c.method, c.target, got)
			}
		}
		be.WantSeen(t, "405")
	})

	t.Run("OPTIONS is the same everywhere under /api", func(t *testing.T) {
		want := map[string][]string{
			"Access-Control-Allow-Origin":  {"*"},
			"Access-Control-Allow-Methods": {"GET, HEAD, OPTIONS"},
			"Access-Control-Allow-Headers": {"X-API-Key"},
			"Access-Control-Max-Age":       {"86400"},
			"Cache-Control":                {"no-store"},
		}
		first := http.Header(nil)
		for _, target := range []string{server, "/api/v1/nothing", "/api/v1/whitelist", player, "/api/v1", "/api", "/api/v1/%73erver", "/api/v1/../../etc"} {
			for _, h := range [][]string{nil, {WithKey(KeyA)}, {"Origin: https://example.com", "Access-Control-Request-Method: GET", "Access-Control-Request-Headers: x-api-key"}} {
				r := Send(t, "OPTIONS", target, h...)
				got := withoutDate(r.Header)
				if r.Status != http.StatusNoContent || len(r.Body) != 0 {
					t.Errorf("OPTIONS %s: %d %q, want 204", target, r.Status, r.Body)
				}
				for name, v := range want {
					if !reflect.DeepEqual(got[name], v) {
						t.Errorf("OPTIONS %s: %s %q, want %q", target, name, got[name], v)
					}
				}
				if first == nil {
					first = got
				} else if !reflect.DeepEqual(got, first) {
					t.Errorf("OPTIONS %s differs:\n%v\n%v", target, got, first)
				}
			}
		}
		WantNotFound(t, Send(t, "OPTIONS", "/apiv1/server"), "/apiv1/server")
		be.WantSeen(t, "OPTIONS")
	})

	t.Run("outside /api", func(t *testing.T) {
		for _, target := range []string{"/", "/index.html", "/apix", "/apiv1/server", "/api-v1/status", "/%61pi/v1/status", "/API/v1/status", "/v1/server", "/status", "/.env"} {
			WantNotFound(t, Send(t, "GET", target), target)
			WantNotFound(t, Send(t, "GET", target, WithKey(KeyA)), target)
			WantNotFound(t, Send(t, "POST", target, WithKey(KeyA)), target)
		}
		be.WantSeen(t, "outside /api")
	})

	t.Run("headers the backend never gets", func(t *testing.T) {
		spoof := []string{"CF-Connecting-IP: 198.51.100.1", "True-Client-IP: 198.51.100.2", "X-Real-IP: 198.51.100.3", "X-Forwarded-For: 198.51.100.4", "User-Agent: statusgate-test"}
		for _, c := range []struct {
			target string
			header []string
		}{
			{server, append([]string{WithKey(KeyA)}, spoof...)},
			{player, append([]string{WithKey(BadKey)}, spoof...)},
			{player, append([]string{"x-api-key: " + KeyA}, spoof...)},
		} {
			Send(t, "GET", c.target, c.header...)
			seen := be.WantSeen(t, "spoofed headers", c.target)
			if len(seen) != 1 {
				continue
			}
			h := seen[0].Header
			if xff := h.Get("X-Forwarded-For"); xff != "127.0.0.1" {
				t.Errorf("backend got X-Forwarded-For %q, want Caddy's 127.0.0.1", xff)
			}
			if strings.Contains(FmtHeader(h), "198.51.100.") || h.Get("User-Agent") != "statusgate-test" {
				t.Errorf("backend got %v", h)
			}
		}
	})
}

// withoutDate is a copy of h without the Date header.
func withoutDate(h http.Header) http.Header {
	c := maps.Clone(h)
	delete(c, "Date")
	return c
}

// withoutPath is an error envelope without its path and updatedAt.
func withoutPath(t testing.TB, body []byte) string {
	t.Helper()
	var env struct {
		OK    bool           `json:"ok"`
		Error map[string]any `json:"error"`
		Meta  map[string]any `json:"meta"`
	}
	if err := JSONUnmarshalStrict(body, &env); err != nil {
		t.Errorf("not an envelope: %s", body)
	}
	delete(env.Error, "path")
	delete(env.Meta, "updatedAt")
	b, _ := json.Marshal(env)
	return string(b)
}
