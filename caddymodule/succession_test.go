package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestSupersededEndsStreamsAndRefuses: the config's stopping event, on a
// reload, ends the handler's streams at once and makes it answer every
// request with 503 Backend busy and Retry-After, a stream request and a
// plain GET alike, before anything reaches the backend.
func TestSupersededEndsStreamsAndRefuses(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\ncache status 1m\nsnapshot status off\nstream_heartbeat 1h")
	be := newLiveBackend(fmt.Sprintf(liveStatus, 1))
	srv := liveServer(t, h, be)
	s := openStream(t, srv.URL+"/api/v1/status", keyHeader(testKey))
	s.nextEvent(t)
	calls := be.calls.Load()
	if err := (stopping{h.superseded, h.live}).Handle(context.Background(), caddy.Event{}); err != nil {
		t.Fatal(err)
	}
	if it := s.next(t); !it.end {
		t.Fatalf("after the stopping event the stream sent %+v, want its end", it)
	}
	for _, header := range []http.Header{keyHeader(testKey), {"Accept": {"text/event-stream"}}, nil} {
		code, hdr, body := plainGet(t, srv.URL+"/api/v1/status", header)
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") != "1" || !strings.Contains(body, `"message":"Backend busy"`) {
			t.Errorf("after the stopping event, %v: %d Retry-After %q %s", header, code, hdr.Get("Retry-After"), body)
		}
	}
	if n := be.calls.Load(); n != calls {
		t.Errorf("the backend saw %d calls after the stopping event", n-calls)
	}
}
