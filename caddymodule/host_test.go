package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestHostSent: the backend gets the client's Host in the one spelling its
// answers are shared under (guard.SentHost), and no client-supplied
// X-Forwarded-Host or X-Forwarded-Proto, which reverse_proxy keeps from a
// trusted proxy: what it writes in them is made of the Host sent and the
// connection's scheme. Two spellings of one Host are one shared answer.
func TestHostSent(t *testing.T) {
	be := &backend{body: `{"ok":true,"data":{},"meta":{}}`}
	withBothForms(t, "key "+testKey+"\ncache server 1h", be, func(t *testing.T, h *Handler, next caddyhttp.Handler) {
		be.calls = nil
		for _, host := range []string{"SURVIVAL.TEST.:8080", "survival.test"} {
			r, _ := newRequest("GET", "/api/v1/server")
			r.Host = host
			r.Header.Set("X-Api-Key", testKey)
			r.Header.Set("X-Forwarded-Host", "evil.test")
			r.Header.Set("X-Forwarded-Proto", "gopher")
			rec := httptest.NewRecorder()
			if err := h.ServeHTTP(rec, r, next); err != nil || rec.Code != http.StatusOK {
				t.Fatalf("Host %s: %d %v", host, rec.Code, err)
			}
		}
		if len(be.calls) != 1 {
			t.Fatalf("two spellings of one Host made %d trips, want 1", len(be.calls))
		}
		up := be.calls[0]
		if up.Host != "survival.test" {
			t.Errorf("the backend got Host %q, want survival.test", up.Host)
		}
		// Declared, the proxy writes its own; in the form of 1.0 the
		// next handler gets none.
		for k, want := range map[string]string{"X-Forwarded-Host": "survival.test", "X-Forwarded-Proto": "http"} {
			if v, ok := up.Header[k]; ok && (len(v) != 1 || v[0] != want) {
				t.Errorf("the backend got %s %q, want none or the proxy's %s", k, v, want)
			}
		}
	})
}
