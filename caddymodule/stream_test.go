package caddymodule

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/live"
	"github.com/statusgate/statusgate/internal/fixture"
)

// liveBackend is the next handler of stream tests: it answers every call
// with the body of the moment, and counts the calls.
type liveBackend struct {
	body  atomic.Value // string
	calls atomic.Int32
}

func (b *liveBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	b.calls.Add(1)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, err := io.WriteString(w, b.body.Load().(string))
	return err
}

// sse is a client's view of one stream.
type sse struct {
	resp *http.Response
	rd   *bufio.Reader
}

// item is what a stream sent next: an event, or a comment (a heartbeat).
type item struct {
	id, data string
	comment  bool
	end      bool // the stream ended
}

// next reads the next item: the lines up to a blank line.
func (s *sse) next(t *testing.T) item {
	t.Helper()
	type result struct {
		it  item
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var it item
		var data []string
		for {
			line, err := s.rd.ReadString('\n')
			if err != nil {
				ch <- result{item{end: true}, nil}
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				it.data = strings.Join(data, "\n")
				ch <- result{it, nil}
				return
			case strings.HasPrefix(line, ":"):
				it.comment = true
			case strings.HasPrefix(line, "id: "):
				it.id = line[4:]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[6:])
			}
		}
	}()
	return fixture.Recv(t, ch, "the stream's next item").it
}

// nextEvent reads past heartbeats to the next event.
func (s *sse) nextEvent(t *testing.T) item {
	t.Helper()
	for {
		it := s.next(t)
		if !it.comment {
			return it
		}
	}
}

// TestStreamOnlyWhereCached: a stream of an endpoint without a cache time
// is no stream: the plain GET's JSON, one trip. (A refused stream is the
// plain GET's refusal: test/live's TestLiveRefusedLikeAPlainGet.)
func TestStreamOnlyWhereCached(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey)
	be := newLiveBackend(`{"ok":true,"data":{},"meta":{}}`)
	srv := liveServer(t, h, be)
	stream := http.Header{"Accept": {"text/event-stream"}}
	code, hdr, _ := plainGet(t, srv.URL+"/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df", stream)
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Errorf("an endpoint without a cache time: %d %s, want the plain GET's JSON", code, hdr.Get("Content-Type"))
	}
	if be.calls.Load() != 1 {
		t.Errorf("the backend saw %d calls, want the player's alone", be.calls.Load())
	}
}

// TestCleanupEndsStreams: a reload ends every stream of the old config, and
// a request that races it is refused, not streamed under the old policy.
func TestCleanupEndsStreams(t *testing.T) {
	h, _ := newTestHandler(t, "stream_heartbeat 1h")
	be := newLiveBackend(fmt.Sprintf(liveStatus, 1))
	srv := liveServer(t, h, be)
	s := openStream(t, srv.URL+"/api/v1/status", nil)
	s.nextEvent(t)
	_ = h.Cleanup()
	if it := s.next(t); !it.end {
		t.Fatalf("after Cleanup the stream sent %+v", it)
	}
	late := openStream(t, srv.URL+"/api/v1/status", nil)
	if late.resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stream to the old config after Cleanup: %d", late.resp.StatusCode)
	}
}

func TestAppendEvent(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`{"a":1}`, "id: X\ndata: {\"a\":1}\n\n"},
		{"{\n\"a\":1\r\n}\r", "id: X\ndata: {\ndata: \"a\":1\ndata: }\ndata: \n\n"},
	} {
		if got := string(appendEvent(nil, live.Event{ID: "X", Data: []byte(c.data)})); got != c.want {
			t.Errorf("%q: %q, want %q", c.data, got, c.want)
		}
	}
}

func TestLiveInterval(t *testing.T) {
	status := &guard.Station{CacheTTL: time.Second, Snapshot: 5 * time.Second}
	at := func(d time.Duration) []byte {
		return fmt.Appendf(nil, `{"ok":true,"meta":{"cachedAt":%d}}`, time.Now().Add(d).UnixMilli())
	}
	if d := liveInterval(status, at(-time.Second)); d <= 3*time.Second || d > 4*time.Second+snapshotLag {
		t.Errorf("a snapshot a second old: next poll in %v, want when the next is due", d)
	}
	if d := liveInterval(status, at(-time.Minute)); d != overdueStep {
		t.Errorf("an overdue snapshot: %v, want %v (the cache refreshes it)", d, overdueStep)
	}
	if d := liveInterval(status, at(time.Hour)); d != time.Second {
		t.Errorf("a snapshot from the future: %v, want the cache time", d)
	}
	if d := liveInterval(status, []byte(`{"ok":false}`)); d != time.Second {
		t.Errorf("no snapshot time: %v", d)
	}
	uncached := &guard.Station{Snapshot: 20 * time.Second}
	if d := liveInterval(uncached, at(-time.Minute)); d != 4*time.Second {
		t.Errorf("overdue without a cache: %v, want a fifth of the interval", d)
	}
}

func TestWantsStream(t *testing.T) {
	h, _ := newTestHandler(t, "")
	status, player := h.table.lookup("status"), h.table.lookup("player")
	for _, c := range []struct {
		method, accept string
		ep             *endpoint
		want           bool
	}{
		{"GET", "text/event-stream", status, true},
		{"GET", "application/json, Text/Event-Stream; charset=utf-8", status, true},
		{"GET", "text/event-stream;q=0", status, false},
		{"GET", "text/event-stream;q=0.0", status, false},
		{"GET", "text/event-stream; Q=0.000", status, false},
		{"GET", "text/event-stream;q=0.001", status, true},
		{"GET", "text/event-stream;q=1", status, true},
		{"GET", "text/event-stream;q=1.000", status, true},
		{"GET", "application/json;q=1, text/event-stream;q=0.5", status, true},
		{"GET", "text/event-stream;q=0, text/event-stream;q=0.9", status, true},
		// Not weights: the plain answer.
		{"GET", "text/event-stream;q=.5", status, false},
		{"GET", "text/event-stream;q=0.0001", status, false},
		{"GET", "text/event-stream;q=1.5", status, false},
		{"GET", "text/event-stream;q=1.001", status, false},
		{"GET", "text/event-stream;q=-0", status, false},
		{"GET", "text/event-stream;q=0.5x", status, false},
		{"GET", "text/event-stream;q=", status, false},
		{"GET", "text/event-stream;q=abc", status, false},
		{"GET", "application/json", status, false},
		{"HEAD", "text/event-stream", status, false},
		{"GET", "text/event-stream", player, false},
	} {
		r := httptest.NewRequest(c.method, "/", nil)
		r.Header.Set("Accept", c.accept)
		if got := h.live.wants(r, c.ep); got != c.want {
			t.Errorf("%s %q %s: %v", c.method, c.accept, c.ep.Name, got)
		}
	}
}

// TestStreamLifetimeEndsTheStream: past stream_lifetime a stream ends
// cleanly (the client reconnects, and is checked again), and gives its seat
// back.
func TestStreamLifetimeEndsTheStream(t *testing.T) {
	h, _ := newTestHandler(t, "stream_lifetime 200ms\nstream_heartbeat 1h\nmax_streams_per_client 1")
	be := newLiveBackend(fmt.Sprintf(liveStatus, 1))
	srv := liveServer(t, h, be)
	s := openStream(t, srv.URL+"/api/v1/status", nil)
	s.nextEvent(t)
	if it := s.next(t); !it.end {
		t.Fatalf("the stream sent %+v, want its end", it)
	}
	// The client's one seat given back: its reconnect is a stream again,
	// not a 429 (the seat is given back once the handler returns, which
	// may be a moment after the client saw the end).
	fixture.WaitEvery(t, "the reconnect accepted", 10*time.Millisecond, func() bool {
		s := openStream(t, srv.URL+"/api/v1/status", nil)
		if s.resp.StatusCode != 200 {
			s.resp.Body.Close() // a refused try holds no connection until the test ends
			return false
		}
		return true
	})
}
