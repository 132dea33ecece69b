package live

// A refusal is its caller's own: a stream's first event is never a refusal
// made for the request of the viewer who opened its topic.

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestLiveOpeningRefusalIsTheViewersOwn: behind the gateway, a panel that
// refuses requests with a bad credential of its own (401) or over its rate
// for a client (429), and answers every other one. A viewer whose request
// the panel refuses gets the refusal as its answer, not a stream; the
// viewers who open the same stream next get the status as their first
// event (before, the refusal was the topic's first event, and every viewer
// who joined while the first one watched got it).
func TestLiveOpeningRefusalIsTheViewersOwn(t *testing.T) {
	panel := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Panel-Auth") {
		case "bad":
			WriteBackend(w, http.StatusUnauthorized, ErrorEnvelope(http.StatusUnauthorized, "Unauthorized", r.URL.Path))
		case "flood":
			WriteBackend(w, http.StatusTooManyRequests, ErrorEnvelope(http.StatusTooManyRequests, "Too many requests", r.URL.Path))
		default:
			WriteBackend(w, http.StatusOK, Envelope(`{"online":[],"minecraft":1,"discord":null}`))
		}
	}))
	t.Cleanup(panel.Close)
	Gateway{Upstream: panel.Listener.Addr().String(), Shared: true, Statusgate: []string{"key " + KeyA, "max_per_client off"}}.Start(t)
	// A target of each case's own: a viewer who finds its topic open joins
	// it, and its request is not sent.
	for _, c := range []struct {
		header, target string
		status         int
	}{{"bad", "/api/v1/status", http.StatusUnauthorized}, {"flood", "/api/v1/status?history=true", http.StatusTooManyRequests}} {
		for _, key := range [][]string{nil, {WithKey(KeyA)}} {
			first := OpenLive(t, nil, c.target, append([]string{"X-Panel-Auth: " + c.header}, key...)...)
			if first.Resp.StatusCode != c.status || first.Resp.Header.Get("Content-Type") == "text/event-stream" {
				t.Errorf("%s %v: the refused viewer got %d %s, want its own %d", c.header, key, first.Resp.StatusCode, first.Resp.Header.Get("Content-Type"), c.status)
			}
			next := OpenLive(t, nil, c.target, key...)
			next.WantStream(t, "the next viewer")
			if ev := next.NextEvent(t); !strings.HasPrefix(ev.Data, `{"ok":true,`) {
				t.Errorf("%s %v: the next viewer's first event: %s", c.header, key, ev.Data)
			}
			first.Close()
			next.Close()
		}
	}
}
