package caddymodule

import (
	"bufio"
	"fmt"
	"io"
	"net"
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

// TestStreamEventsAreThePlainAnswers: each class of caller gets, as events,
// exactly the envelope a plain GET gets, field layer and all.
func TestStreamEventsAreThePlainAnswers(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\nprotected_fields status motd\nextra_fields status motd\ncache status 1m\nsnapshot status off")
	be := newLiveBackend(fmt.Sprintf(liveStatus, 1))
	srv := liveServer(t, h, be)
	for _, who := range []struct {
		name   string
		header http.Header
	}{{"anonymous", nil}, {"keyed", keyHeader(testKey)}} {
		_, _, plain := plainGet(t, srv.URL+"/api/v1/status", who.header)
		s := openStream(t, srv.URL+"/api/v1/status", who.header)
		if ct, cc := s.resp.Header.Get("Content-Type"), s.resp.Header.Get("Cache-Control"); ct != "text/event-stream" || cc != "no-store, no-transform" {
			t.Fatalf("%s: Content-Type %q, Cache-Control %q", who.name, ct, cc)
		}
		ev := s.nextEvent(t)
		if ev.data != plain || ev.id != live.ID([]byte(plain)) {
			t.Errorf("%s: event %s %s,\nplain GET %s", who.name, ev.id, ev.data, plain)
		}
		if who.header == nil && strings.Contains(ev.data, `"motd":`) {
			t.Errorf("the anonymous stream shows a protected field: %s", ev.data)
		}
	}
	// Two plain GETs and two topics: the micro-cache served the streams.
	if n := be.calls.Load(); n != 2 {
		t.Errorf("the backend saw %d calls, want 2 (one per class)", n)
	}
}

// TestStreamRefusedLikeAPlainGet: a caller refused a plain GET gets the same
// refusal, never a stream, and an endpoint without a cache time answers JSON.
func TestStreamRefusedLikeAPlainGet(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey)
	be := newLiveBackend(`{"ok":true,"data":{},"meta":{}}`)
	srv := liveServer(t, h, be)
	stream := http.Header{"Accept": {"text/event-stream"}}
	for _, path := range []string{"/api/v1/entities", "/api/v1/bans", "/api/v1/nope"} {
		code, hdr, body := plainGet(t, srv.URL+path, stream)
		pcode, _, pbody := plainGet(t, srv.URL+path, nil)
		if code != http.StatusNotFound || code != pcode || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") ||
			body[:strings.Index(body, "updatedAt")] != pbody[:strings.Index(pbody, "updatedAt")] {
			t.Errorf("%s: stream request %d %s, plain %d %s", path, code, body, pcode, pbody)
		}
	}
	code, hdr, _ := plainGet(t, srv.URL+"/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df", stream)
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Errorf("an endpoint without a cache time: %d %s, want the plain GET's JSON", code, hdr.Get("Content-Type"))
	}
	if be.calls.Load() != 1 {
		t.Errorf("the backend saw %d calls, want the player's alone", be.calls.Load())
	}
}

// TestStreamSeats: max_streams_per_client answers 429 with Retry-After,
// max_streams 503, and a stream that ends gives its seat back.
func TestStreamSeats(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\nmax_streams 2\nmax_streams_per_client 1")
	be := newLiveBackend(fmt.Sprintf(liveStatus, 1))
	srv := liveServer(t, h, be)
	a := openStream(t, srv.URL+"/api/v1/status", nil)
	a.nextEvent(t)
	over := openStream(t, srv.URL+"/api/v1/status", nil)
	if over.resp.StatusCode != http.StatusTooManyRequests || over.resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the client's second stream: %d, Retry-After %q", over.resp.StatusCode, over.resp.Header.Get("Retry-After"))
	}
	keyed := openStream(t, srv.URL+"/api/v1/status", keyHeader(testKey)) // a client of its own: the key
	keyed.nextEvent(t)
	full := openStream(t, srv.URL+"/api/v1/status?history=true", http.Header{"X-Test-Client": {"198.51.100.7"}})
	if full.resp.StatusCode != http.StatusServiceUnavailable || full.resp.Header.Get("Retry-After") == "" {
		t.Fatalf("past max_streams: %d, Retry-After %q", full.resp.StatusCode, full.resp.Header.Get("Retry-After"))
	}
	a.resp.Body.Close()
	fixture.WaitFor(t, "the seat given back", func() bool { return h.live.seats.Open() == 1 })
	again := openStream(t, srv.URL+"/api/v1/status", nil)
	if again.resp.StatusCode != 200 {
		t.Fatalf("after the first stream ended: %d", again.resp.StatusCode)
	}
}

// TestStreamChangeReachesEveryViewerOnce: many viewers, one poller; a change
// reaches each viewer once, and nothing is polled when nobody listens.
func TestStreamChangeReachesEveryViewerOnce(t *testing.T) {
	h, _ := newTestHandler(t, "max_streams_per_client off\ncache status 50ms\nsnapshot status off\nstream_heartbeat 1h")
	be := newLiveBackend(fmt.Sprintf(liveStatus, 1))
	srv := liveServer(t, h, be)
	viewers := make([]*sse, 20)
	for i := range viewers {
		viewers[i] = openStream(t, srv.URL+"/api/status", nil)
		if ev := viewers[i].nextEvent(t); !strings.Contains(ev.data, `"updatedAt":1`) {
			t.Fatalf("viewer %d: first event %s", i, ev.data)
		}
	}
	if n := h.live.hub.Topics(); n != 1 {
		t.Fatalf("%d topics for 20 viewers of one answer", n)
	}
	// The same answer written again: no event. A changed one: one each.
	be.body.Store(fmt.Sprintf(liveStatus, 2))
	fixture.WaitFor(t, "a poll of the rewritten answer", func() bool { return be.calls.Load() >= 3 })
	changed := strings.Replace(fmt.Sprintf(liveStatus, 3), `"online":2`, `"online":3`, 1)
	be.body.Store(changed)
	for i, v := range viewers {
		if ev := v.nextEvent(t); !strings.Contains(ev.data, `"online":3`) {
			t.Fatalf("viewer %d: %s, want the change (and nothing for the unchanged answer)", i, ev.data)
		}
	}
	for _, v := range viewers {
		v.resp.Body.Close()
	}
	fixture.WaitFor(t, "the poller's end", func() bool { return h.live.hub.Polling() == 0 && h.live.seats.Open() == 0 })
	calls := be.calls.Load()
	plainGet(t, srv.URL+"/api/v1/status", nil) // the next caller: at most one more trip
	if n := be.calls.Load(); n > calls+1 {
		t.Fatalf("polled with nobody listening: %d calls, then %d", calls, n)
	}
}

// TestLastEventIDSkipsAnUnchangedAnswer: a reconnect that has the answer
// gets a heartbeat before anything else, and the next change.
func TestLastEventIDSkipsAnUnchangedAnswer(t *testing.T) {
	h, _ := newTestHandler(t, "cache status 50ms\nsnapshot status off\nstream_heartbeat 100ms")
	be := newLiveBackend(fmt.Sprintf(liveStatus, 1))
	srv := liveServer(t, h, be)
	first := openStream(t, srv.URL+"/api/v1/status", nil)
	ev := first.nextEvent(t)
	first.resp.Body.Close()

	again := openStream(t, srv.URL+"/api/v1/status", http.Header{"Last-Event-Id": {ev.id}})
	be.body.Store(fmt.Sprintf(liveStatus, 2)) // the same, written later
	if it := again.next(t); !it.comment {
		t.Fatalf("the reconnect got %+v before a heartbeat, want nothing until a change", it)
	}
	changed := `{"ok":true,"data":{"online":5},"meta":{"version":"v1","updatedAt":3}}`
	be.body.Store(changed)
	if it := again.nextEvent(t); !strings.Contains(it.data, `"online":5`) {
		t.Fatalf("got %+v, want the change", it)
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
	fixture.WaitFor(t, "the seat given back", func() bool { return h.live.seats.Open() == 0 })
	late := openStream(t, srv.URL+"/api/v1/status", nil)
	if late.resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stream to the old config after Cleanup: %d", late.resp.StatusCode)
	}
}

// TestStalledViewerIsCut: a viewer that takes nothing is cut by
// write_timeout, and its seat and held bytes are given back.
func TestStalledViewerIsCut(t *testing.T) {
	h, _ := newTestHandler(t, "cache status 50ms\nsnapshot status off\nwrite_timeout 200ms\nmax_streams_per_client off")
	var n atomic.Int32
	big := &bigAnswers{n: &n}
	srv := liveServer(t, h, big)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	fmt.Fprintf(conn, "GET /api/v1/status HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
	fixture.WaitFor(t, "the stream", func() bool { return h.live.seats.Open() == 1 })
	// It reads nothing: each new answer is a megabyte, and the writes block.
	fixture.WaitFor(t, "the stalled viewer's cut", func() bool {
		return h.live.seats.Open() == 0 && units(h).Held.Held() == 0
	})
	// The others go on: a reader gets its events.
	s := openStream(t, srv.URL+"/api/v1/status", nil)
	s.nextEvent(t)
}

// bigAnswers answers each call with a new answer of a megabyte.
type bigAnswers struct{ n *atomic.Int32 }

func (b *bigAnswers) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	i := b.n.Add(1)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, err := fmt.Fprintf(w, `{"ok":true,"data":{"n":%d,"pad":"%s"},"meta":{}}`, i, strings.Repeat("x", 1<<20))
	return err
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
	fixture.WaitFor(t, "the seat given back", func() bool { return h.live.seats.Open() == 0 })
	again := openStream(t, srv.URL+"/api/v1/status", nil)
	if again.resp.StatusCode != 200 {
		t.Fatalf("the reconnect: %d", again.resp.StatusCode)
	}
}
