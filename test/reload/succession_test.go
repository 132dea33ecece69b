package reload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// An old config is gone when its successor takes over (docs/live.md, "On
// reload"): its streams end and its handlers refuse, whatever
// shutdown_delay says; a graceful stop ends the streams at once.

// TestReloadWithShutdownDelayRetiresTheOldConfig: a reload that removes a
// key, with shutdown_delay set and a listener dropped (so that Caddy keeps
// the old server accepting on the listener both configs share for the whole
// delay), serves that key nothing once the new config is in force: every
// fresh request with it is the new config's 404 (the old server hands what
// it accepts to the new one; never the old config's 200), none reaches the
// backend, and the key's open stream ends without an event made after the
// new config took over.
func TestReloadWithShutdownDelayRetiresTheOldConfig(t *testing.T) {
	be, set, _ := LiveBackend(t)
	g := Gateway{Upstream: be.Addr(), Shared: true,
		Statusgate: []string{"key " + KeyA, "cache status 100ms", "snapshot status off", "stream_heartbeat 1h"},
		Global:     []string{"log {\n\t\tlevel ERROR\n\t}", "shutdown_delay 10s"},
		// A second listener, which the reload drops: Caddy applies
		// shutdown_delay only when a listener closes.
		// It says when its server is shutting down: the old config has
		// had its stopping event by then.
		Sites: []string{fmt.Sprintf(":%d {\n\trespond \"{http.shutting_down}\"\n}", WidgetPort)},
	}
	g.Start(t)
	const server = "/api/v1/server"
	WantBackendBytes(t, Send(t, "GET", server, WithKey(KeyA)), server)
	s := OpenLive(t, nil, "/api/v1/status", WithKey(KeyA))
	s.WantStream(t, "the key's stream")
	s.NextEvent(t)

	old := caddy.ActiveContext()
	g.Statusgate[0] = "key " + KeyB
	g.Sites = nil
	loaded := make(chan error, 1)
	go func() {
		// The load returns only after the old config's shutdown_delay:
		// the requests below are sent while it waits.
		resp, err := AdminClient.Post(AdminURL+"/load", "text/caddyfile", strings.NewReader(g.Caddyfile()))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%d %s", resp.StatusCode, body)
			}
		}
		loaded <- err
	}()
	fixture.WaitFor(t, "the new config in force", func() bool {
		active := caddy.ActiveContext()
		return active.Context != nil && active.Done() != old.Done()
	})
	if !stopping(t, WidgetPort, loaded) {
		t.Fatal("the load returned before the old config's shutdown_delay began")
	}
	set(99) // an answer the old config's stream must not get
	be.Take()
	for i := range 20 {
		if r := Send(t, "GET", server, WithKey(KeyA)); r.Status != http.StatusNotFound {
			t.Fatalf("request %d with the removed key after the reload: %d %s, want the new config's 404", i, r.Status, Clip(r.Body))
		} else {
			WantNotFound(t, r, server)
		}
	}
	for _, r := range be.Take() {
		if strings.HasPrefix(r.RequestURI, server) {
			t.Errorf("%s reached the backend after the reload", r.RequestURI)
		}
	}
	if it := s.NextEvent(t); !it.End {
		t.Errorf("the removed key's stream sent %+v after the reload, want its end", it)
	}
	if err := fixture.Recv(t, loaded, "the load's end"); err != nil {
		t.Fatalf("the reload: %v", err)
	}
}

// TestStopEndsStreams: SIGTERM to a caddy process with streams open (and
// Caddy's default grace period, which waits for every handler) stops it
// gracefully: the streams end at once, where before each held the stop
// until its stream_lifetime.
func TestStopEndsStreams(t *testing.T) {
	be := NewBackend(t)
	gw := startStatusgate(t, be.Addr(), "stream_heartbeat 1h")
	var streams []*bufio.Reader
	for range 3 {
		req, _ := http.NewRequest("GET", gw.Base()+"/api/v1/status", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%d %v, want a stream", resp.StatusCode, resp.Header)
		}
		s := &LiveStream{Resp: resp, Rd: bufio.NewReader(resp.Body)}
		if ev := s.NextEvent(t); !strings.HasPrefix(ev.Data, `{"ok":true,`) {
			t.Fatalf("first event %+v", ev)
		}
		streams = append(streams, s.Rd)
	}
	if killed := gw.StopWithin(fixture.Patience); killed {
		t.Fatalf("caddy was still running %v after SIGTERM with 3 streams open; its log:\n%s", fixture.Patience, harness.Tail(gw.LogPath, 20))
	}
	for i, rd := range streams {
		if _, err := io.ReadAll(rd); err != nil {
			t.Errorf("stream %d ended with %v, want a clean end", i, err)
		}
	}
}

// startStatusgate runs this checkout's caddy as a process, the admin API and
// HTTPS off, with one site on a free loopback port: statusgate in front of
// backend, with lines in its block. The process ends with the test, unless
// the test stops it first.
func startStatusgate(t *testing.T, backend string, lines ...string) *harness.Process {
	t.Helper()
	_, bin := CheckoutCaddy(t)
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	gw, err := harness.Start(context.Background(), bin, t.TempDir(), "gateway", port, fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
}

http://:%d {
	bind 127.0.0.1
	statusgate %s {
		%s
	}
}
`, port, backend, strings.Join(lines, "\n\t\t")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Stop)
	return gw
}
