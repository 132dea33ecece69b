package caddymodule

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestSupersededEndsStreamsAndRefuses: the config's stopping event, on a
// reload, ends the handler's streams at once and, with no server of the
// config in force where the request arrived (here: none at all), makes it
// answer every request with 503 Backend busy and Retry-After, a stream
// request and a plain GET alike, before anything reaches the backend.
func TestSupersededEndsStreamsAndRefuses(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\ncache status 1m\nsnapshot status off\nstream_heartbeat 1h")
	be := newLiveBackend(fmt.Sprintf(liveStatus, 1))
	srv := liveServer(t, h, be)
	s := openStream(t, srv.URL+"/api/v1/status", keyHeader(testKey))
	s.nextEvent(t)
	calls := be.calls.Load()
	if err := h.app.Handle(context.Background(), caddy.Event{}); err != nil {
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

// TestListenAddress: the address of a server's that took a connection is
// the one whose ports hold the connection's local port; without a local
// address, a server's only address.
func TestListenAddress(t *testing.T) {
	tcp := func(port int) net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port} }
	for _, c := range []struct {
		listen []string
		local  net.Addr
		want   string // host:port of the address found; "": none
	}{
		{[]string{":8080"}, tcp(8080), ":8080"},
		{[]string{"127.0.0.1:8080", "127.0.0.1:9090"}, tcp(9090), "127.0.0.1:9090"},
		{[]string{"tcp/:9000-9010"}, tcp(9005), ":9000"},
		{[]string{":8080"}, tcp(8081), ""},
		{[]string{":8080"}, nil, ":8080"},
		{[]string{":8080", ":8443"}, nil, ""},
	} {
		na, ok := listenAddress(c.listen, c.local)
		got := ""
		if ok {
			got = na.JoinHostPort(0)
		}
		if got != c.want {
			t.Errorf("%v at %v: %q, want %q", c.listen, c.local, got, c.want)
		}
	}
}

// TestAsReceived: the request handed to the new config is the one the
// client sent, before the old config's routes rewrote its target.
func TestAsReceived(t *testing.T) {
	r := httptest.NewRequest("GET", "/stats/api/v1/server?x=1", nil)
	orig, _ := url.Parse("/stats/api/v1/server?x=1")
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.OriginalRequestCtxKey, http.Request{Method: "GET", URL: orig, RequestURI: "/stats/api/v1/server?x=1"}))
	r.URL.Path, r.RequestURI = "/api/v1/server", "/api/v1/server?x=1" // handle_path /stats/*
	r.Header.Set("X-API-Key", "k")
	got := asReceived(r)
	if got.URL.Path != "/stats/api/v1/server" || got.RequestURI != "/stats/api/v1/server?x=1" || got.Header.Get("X-API-Key") != "k" {
		t.Errorf("handed over as %s %q %v", got.URL, got.RequestURI, got.Header)
	}
	if r.URL.Path != "/api/v1/server" {
		t.Errorf("the old config's request changed: %s", r.URL)
	}
}
