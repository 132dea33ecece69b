package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// staticBackend answers every request with the same JSON body.
type staticBackend struct{ body []byte }

func (s staticBackend) ServeHTTP(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(s.body)
	return err
}

// BenchmarkServeHTTP is the whole request path in process, without
// sockets: an anonymous /status from the micro-cache (after the first
// trip), a keyed one through coalescing and a trip of its own, and an
// anonymous /player (not cached by default) through the field layer. Compare two trees with
// benchstat; scripts/perf.sh measures the same paths in a real Caddy.
func BenchmarkServeHTTP(b *testing.B) {
	h, _ := newTestHandler(b, "key "+testKey)
	next := staticBackend{body: []byte(`{"ok":true,"data":{"online":3,"name":"steve","op":true,"banned":false,"discord":"steve#1"},"meta":{"authenticated":false,"cachedAt":1}}`)}
	for _, tc := range []struct {
		name, path string
		key        bool
	}{
		{"anonymous status cached", "/api/v1/status", false},
		{"keyed status", "/api/v1/status", true},
		{"anonymous player filtered", "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df", false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, _ := newRequest("GET", tc.path)
				if tc.key {
					r.Header.Set("X-API-Key", testKey)
				}
				w := httptest.NewRecorder()
				_ = h.ServeHTTP(w, r, next)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", tc.path, w.Code, w.Body)
				}
			}
		})
	}
}
