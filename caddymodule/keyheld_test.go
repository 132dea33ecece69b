package caddymodule

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/internal/fixture"
)

// gatedWriter is a client that takes a piece of its answer only when the
// test lets it: each Write waits for a grant (or for grants to be closed),
// and says on writing that it is waiting.
type gatedWriter struct {
	header  http.Header
	status  int
	body    bytes.Buffer
	writing chan struct{}
	grants  chan struct{}
}

func (w *gatedWriter) Header() http.Header { return w.header }
func (w *gatedWriter) WriteHeader(s int)   { w.status = s }
func (w *gatedWriter) Write(p []byte) (int, error) {
	w.writing <- struct{}{}
	<-w.grants
	return w.body.Write(p)
}

// TestKeyHeldByProgress: a key with max_held 4MiB holds one answer of 3 MB
// for a client that takes it piece by piece as the test lets it. While the
// client takes nothing for longer than the key's patience (half of
// write_timeout: 1 s), the key's next request is refused with 429; as soon as
// it takes a piece, the next is served; and when it has taken the answer,
// what it held is given back. The budget's clock is the test's, moved past
// the patience, so that a busy machine can neither stretch a check past it
// nor make a sleep stand for it.
func TestKeyHeldByProgress(t *testing.T) {
	h, _ := newTestHandler(t, "key bot "+testKey+" {\n\tmax_held 4MiB\n}\nwrite_timeout 2s\ncoalesce off")
	big := []byte(`{"ok":true,"data":{"pad":"` + strings.Repeat("x", 3<<20) + `"},"meta":{"version":"v1","updatedAt":1}}`)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.URL.Path, "/api/v1/player/") {
			_, err := w.Write(big)
			return err
		}
		_, err := w.Write([]byte(`{"ok":true,"data":{},"meta":{"version":"v1","updatedAt":1}}`))
		return err
	})
	small := func(what string, want int) {
		t.Helper()
		if r := serve(t, h, next, "GET", "/api/v1/server", keyHeader(testKey)); r.Code != want {
			t.Fatalf("%s: %d, want %d", what, r.Code, want)
		}
	}

	clk := fixture.NewClock()
	h.guard.SetClock(clk.Now)
	gw := &gatedWriter{header: http.Header{}, writing: make(chan struct{}), grants: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		r, _ := newRequest("GET", "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df")
		r.Header.Set("X-Api-Key", testKey)
		done <- h.ServeHTTP(gw, r, next)
	}()
	<-gw.writing // the answer is held, its first piece under way
	small("an answer just held, not yet taken", http.StatusOK)
	clk.Advance(1100 * time.Millisecond)
	small("the client took nothing for over 1 s", http.StatusTooManyRequests)
	gw.grants <- struct{}{}
	<-gw.writing // it took a piece; the next is under way
	small("the client just took a piece", http.StatusOK)
	clk.Advance(1100 * time.Millisecond)
	small("the client took nothing since, for over 1 s", http.StatusTooManyRequests)
	close(gw.grants)
	go func() {
		for range gw.writing {
		}
	}()
	if err := <-done; err != nil || gw.status != http.StatusOK || !bytes.Equal(gw.body.Bytes(), big) {
		t.Fatalf("the client that took its answer: %v, %d, %d of %d bytes", err, gw.status, gw.body.Len(), len(big))
	}
	close(gw.writing)
	if n := h.guard.Stats().Held; n != 0 {
		t.Fatalf("held %d bytes after the answer was taken", n)
	}
	small("after the answer was taken", http.StatusOK)
}
