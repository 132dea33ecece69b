package test

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/internal/sim"
	"github.com/statusgate/statusgate/test/internal/harness"
)

// Live streams (docs/live.md) through a real Caddy: server-sent events on
// the same URLs, the same answers as a plain GET, one trip for everyone.

// liveStream is a client's view of one stream.
type liveStream struct {
	resp *http.Response
	rd   *bufio.Reader
}

// sseItem is what a stream sent next: an event, a comment (a heartbeat), the
// reconnection hint, or the stream's end.
type sseItem struct {
	id, data string
	comment  bool
	retry    bool
	end      bool
}

// openLive opens a stream of target on the gateway with the header lines
// given; client nil is http.DefaultClient (HTTP/1.1). The answer is the
// stream if it is one, else its status and body are in resp.
func openLive(t *testing.T, client *http.Client, target string, headers ...string) *liveStream {
	t.Helper()
	req, _ := http.NewRequest("GET", gatewayURL+target, nil)
	req.Header.Set("Accept", "text/event-stream")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = zr
	}
	return &liveStream{resp: resp, rd: bufio.NewReader(body)}
}

func (s *liveStream) close() { s.resp.Body.Close() }

// next reads the stream's next item: the lines up to a blank line.
func (s *liveStream) next(t *testing.T) sseItem {
	t.Helper()
	ch := make(chan sseItem, 1)
	go func() {
		var it sseItem
		var data []string
		for {
			line, err := s.rd.ReadString('\n')
			if err != nil {
				ch <- sseItem{end: true}
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				it.data = strings.Join(data, "\n")
				ch <- it
				return
			case strings.HasPrefix(line, ":"):
				it.comment = true
			case strings.HasPrefix(line, "retry: "):
				it.retry = true
			case strings.HasPrefix(line, "id: "):
				it.id = line[4:]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[6:])
			}
		}
	}()
	return fixture.Recv(t, ch, "the stream's next item")
}

// nextEvent reads past the hint and heartbeats to the next event, or the end.
func (s *liveStream) nextEvent(t *testing.T) sseItem {
	t.Helper()
	for {
		if it := s.next(t); !it.comment && !it.retry {
			return it
		}
	}
}

// wantStream asserts that s is a stream.
func (s *liveStream) wantStream(t *testing.T, what string) {
	t.Helper()
	if s.resp.StatusCode != 200 || s.resp.Header.Get("Content-Type") != "text/event-stream" || s.resp.Header.Get("Cache-Control") != "no-store, no-transform" {
		b, _ := io.ReadAll(io.LimitReader(s.rd, 1000))
		t.Fatalf("%s: %d %v %s, want a stream", what, s.resp.StatusCode, s.resp.Header, b)
	}
}

// liveBackend is be answering status with a body the test changes, and
// counting the status trips.
func liveBackend(t *testing.T) (be *backend, set func(online int), trips func() int) {
	be = newBackend(t)
	var online atomic.Int32
	var n atomic.Int32
	be.respond = func(u *url.URL) (int, []byte) {
		if u.Path == "/api/v1/status" {
			n.Add(1)
			return 200, envelope(fmt.Sprintf(`{"online":[%q],"minecraft":%d,"discord":3}`, alex, online.Load()))
		}
		return backendResponse(u)
	}
	return be, func(v int) { online.Store(int32(v)) }, func() int { return int(n.Load()) }
}

// h2c is a client that speaks HTTP/2 without TLS, as the gateway does with
// protocols h1 h2c.
func h2c() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// TestLiveStreamsAreThePlainAnswers: a keyed and an anonymous stream each
// get, byte for byte, the envelope a plain GET gets (the field layer for
// the anonymous one), over HTTP/1.1 and HTTP/2, through encode gzip (which
// leaves them unencoded), each event flushed as it is written (the first
// one is read while the stream is open).
func TestLiveStreamsAreThePlainAnswers(t *testing.T) {
	be := newBackend(t)
	gateway{upstream: be.addr(), shared: true, statusgate: []string{"key " + keyA, "max_per_client off"},
		site:   []string{"encode gzip"},
		global: []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\tprotocols h1 h2c\n\t}"}}.start(t)
	target := "/api/v1/status?history=true"
	plainAnon, plainKeyed := send(t, "GET", target), send(t, "GET", target, withKey(keyA))
	wantFiltered(t, plainAnon, target)
	wantBackendBytes(t, plainKeyed, target)
	for _, c := range []struct {
		name    string
		client  *http.Client
		headers []string
		want    []byte
	}{
		{"anonymous", nil, nil, plainAnon.Body},
		{"keyed", nil, []string{withKey(keyA)}, plainKeyed.Body},
		{"anonymous h2c", h2c(), nil, plainAnon.Body},
		{"keyed h2c gzip", h2c(), []string{withKey(keyA), "Accept-Encoding: gzip"}, plainKeyed.Body},
		{"anonymous gzip", nil, []string{"Accept-Encoding: gzip"}, plainAnon.Body},
	} {
		s := openLive(t, c.client, target, c.headers...)
		s.wantStream(t, c.name)
		if c.client != nil && s.resp.ProtoMajor != 2 {
			t.Errorf("%s: %s, want HTTP/2", c.name, s.resp.Proto)
		}
		if ce := s.resp.Header.Get("Content-Encoding"); ce != "" {
			t.Errorf("%s: Content-Encoding %q, want none (TestLiveStreamsNotEncoded)", c.name, ce)
		}
		if ev := s.nextEvent(t); ev.data != string(c.want) {
			t.Errorf("%s: event\n%s\nplain GET\n%s", c.name, ev.data, c.want)
		}
		s.close()
	}
	// Two trips, one per class: the plain GETs'; the streams had the cache.
	be.wantSeen(t, "plain GETs and streams", target, target)
}

// TestLiveStreamsNotEncoded: with the README's `encode` in front (gzip and
// zstd), a stream asked for with a browser's Accept-Encoding is sent as it
// is, not compressed: encode would hold a compressor for the stream's whole
// life (about 0.4 MiB with gzip, 1.1 MiB with zstd, against 40 KiB for the
// rest of a stream; docs/performance.md). The plain GET of the same URL is
// compressed, so encode is in force; each stream's event is that GET's
// envelope, and one trip reached the backend for both.
func TestLiveStreamsNotEncoded(t *testing.T) {
	be := newBackend(t)
	// An answer longer than encode's minimum_length (512 bytes), which a
	// plain GET gets compressed.
	online := strings.Repeat(`"`+alex+`",`, 20) + `"` + steve + `"`
	be.respond = func(u *url.URL) (int, []byte) {
		if u.Path == "/api/v1/status" {
			return 200, envelope(`{"online":[` + online + `],"minecraft":21,"discord":3}`)
		}
		return backendResponse(u)
	}
	gateway{upstream: be.addr(), shared: true, statusgate: []string{"stream_heartbeat 1h", "cache status 1h"}, site: []string{"encode"}}.start(t)
	const status = "/api/v1/status"
	plain := send(t, "GET", status, "Accept-Encoding: zstd, gzip")
	if plain.Status != 200 || plain.Header.Get("Content-Encoding") != "zstd" {
		t.Fatalf("plain GET through encode: %d, Content-Encoding %q, want 200 zstd", plain.Status, plain.Header.Get("Content-Encoding"))
	}
	want := send(t, "GET", status)
	if want.Status != 200 || !strings.Contains(string(want.Body), online) {
		t.Fatalf("plain GET: %d %s", want.Status, clip(want.Body))
	}
	for _, ae := range []string{"zstd", "gzip", "gzip, deflate, br, zstd"} {
		s := openLive(t, nil, status, "Accept-Encoding: "+ae)
		if ce := s.resp.Header.Get("Content-Encoding"); ce != "" {
			t.Fatalf("Accept-Encoding %s: %d, Content-Encoding %q, want a stream without one", ae, s.resp.StatusCode, ce)
		}
		s.wantStream(t, "Accept-Encoding: "+ae)
		if ev := s.nextEvent(t); ev.data != string(want.Body) {
			t.Errorf("Accept-Encoding %s: event\n%s\nplain GET\n%s", ae, ev.data, want.Body)
		}
		s.close()
	}
	be.wantSeen(t, "plain GETs and streams", status)
}

// TestLiveQuietHTTP2StreamLasts: an HTTP/2 stream with nothing to send for
// longer than write_timeout is not reset (the deadline of its last write
// does not outlive the write): its heartbeat comes.
func TestLiveQuietHTTP2StreamLasts(t *testing.T) {
	be := newBackend(t)
	gateway{upstream: be.addr(), shared: true, statusgate: []string{"write_timeout 500ms", "stream_heartbeat 2s"},
		global: []string{"servers {\n\t\tprotocols h1 h2c\n\t}"}}.start(t)
	s := openLive(t, h2c(), "/api/v1/status")
	s.wantStream(t, "h2c stream")
	if s.resp.ProtoMajor != 2 {
		t.Fatalf("%s, want HTTP/2", s.resp.Proto)
	}
	s.nextEvent(t)
	if it := s.next(t); !it.comment {
		t.Fatalf("after 2s of quiet with write_timeout 500ms: %+v, want the heartbeat", it)
	}
}

// TestLiveAsksForIdentity: a stream's trips ask the backend for an
// unencoded body, whatever the viewer's client takes (an event cannot
// carry a gzip body), also where the plain GET's answer is neither shared
// nor filtered and passes the client's Accept-Encoding on.
func TestLiveAsksForIdentity(t *testing.T) {
	be := newBackend(t)
	gateway{upstream: be.addr(), shared: true, statusgate: []string{"key staff " + keyA, "coalesce off", "cache status off", "stream_heartbeat 1h"}}.start(t)
	s := openLive(t, nil, "/api/v1/status", withKey(keyA), "Accept-Encoding: gzip")
	s.wantStream(t, "keyed stream")
	s.nextEvent(t)
	seen := be.take()
	if len(seen) == 0 {
		t.Fatal("nothing reached the backend")
	}
	for _, r := range seen {
		if ae := r.Header.Get("Accept-Encoding"); ae != "identity" {
			t.Errorf("%s reached the backend with Accept-Encoding %q, want identity", r.RequestURI, ae)
		}
	}
}

// TestLiveRefusedLikeAPlainGet: a caller refused a plain GET gets the same
// answer to a stream request, byte for byte (the disguised 404, the 401, the
// 405); nothing reaches the backend.
func TestLiveRefusedLikeAPlainGet(t *testing.T) {
	be := newBackend(t)
	for _, hide := range [][]string{nil, {"hide_protected off"}} {
		g := scopedGateway(be)
		g.statusgate = append(g.statusgate, hide...)
		g.start(t)
		for _, c := range []struct {
			method, target string
			headers        []string
		}{
			{"GET", "/api/v1/entities", nil},
			{"GET", "/api/v1/entities", []string{withKey(keyA)}}, // outside the bot's scope
			{"GET", "/api/v1/nothing", nil},
			{"POST", "/api/v1/status", nil},
		} {
			plain := send(t, c.method, c.target, c.headers...)
			stream := send(t, c.method, c.target, append(c.headers, "Accept: text/event-stream")...)
			if plain.Status < 400 {
				t.Fatalf("%s %s: %d, want a refusal", c.method, c.target, plain.Status)
			}
			wantSameAsAnonymous(t, c.method+" "+c.target, stream, plain)
		}
	}
	be.wantSeen(t, "refusals")
}

// TestLiveScopeNarrowedByReload: a reload that takes entities out of the
// bot's scope ends its stream; the reconnect gets the disguised 404 and
// nothing of entities reaches the backend after the reload.
func TestLiveScopeNarrowedByReload(t *testing.T) {
	be := newBackend(t)
	g := scopedGateway(be)
	g.statusgate[0] = "key bot " + keyA + " {\n\t\t\tendpoints status entities\n\t\t}"
	g.shared = true
	g.start(t)
	s := openLive(t, nil, "/api/v1/entities", withKey(keyA))
	s.wantStream(t, "in scope")
	if ev := s.nextEvent(t); ev.data != string(backendBody("/api/v1/entities")) {
		t.Fatalf("in scope: %+v", ev)
	}
	g.statusgate[0] = "key bot " + keyA + " {\n\t\t\tendpoints status\n\t\t}"
	g.start(t)
	if it := s.nextEvent(t); !it.end {
		t.Fatalf("after the reload the stream sent %+v, want its end", it)
	}
	be.take()
	again := send(t, "GET", "/api/v1/entities", withKey(keyA), "Accept: text/event-stream")
	wantNotFound(t, again, "/api/v1/entities")
	be.wantSeen(t, "after the reload")
}

// TestLiveChangeReachesEveryStreamOnce: many viewers of one answer cost one
// trip per cache time, like one viewer; a change reaches each of them once,
// and the next thing each reads is a heartbeat, not the answer again.
func TestLiveChangeReachesEveryStreamOnce(t *testing.T) {
	be, set, trips := liveBackend(t)
	gateway{upstream: be.addr(), shared: true, statusgate: []string{
		"max_streams_per_client off", "cache status 200ms", "stream_heartbeat 300ms",
	}}.start(t)
	const viewers = 50
	set(100)
	streams := make([]*liveStream, viewers)
	for i := range streams {
		streams[i] = openLive(t, nil, "/api/v1/status")
		streams[i].wantStream(t, "viewer")
		// An earlier test's stale entry may come first; then this one's.
		for ev := streams[i].nextEvent(t); !strings.Contains(ev.data, `"minecraft":100`); ev = streams[i].nextEvent(t) {
		}
	}
	before := trips()
	set(101)
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() {
			if ev := s.nextEvent(t); !strings.Contains(ev.data, `"minecraft":101`) {
				t.Errorf("viewer %d: %+v, want the change", i, ev)
			}
			if it := s.next(t); !it.comment {
				t.Errorf("viewer %d: after the change %+v, want a heartbeat", i, it)
			}
		})
	}
	wg.Wait()
	// Each trip is a poll: at most one per cache time came between the
	// change and the last viewer's heartbeat, whatever the number of
	// viewers; 50 pollers would have made 50 each time.
	if n := trips() - before; n > viewers/5 {
		t.Errorf("%d trips for %d viewers of one answer", n, viewers)
	}
	for _, s := range streams {
		s.close()
	}
}

// TestLiveLastEventIDSkipsAnUnchangedAnswer: a reconnect with the ID of the
// answer it has gets a heartbeat, then the change.
func TestLiveLastEventIDSkipsAnUnchangedAnswer(t *testing.T) {
	be, set, _ := liveBackend(t)
	gateway{upstream: be.addr(), shared: true, statusgate: []string{"cache status 100ms", "stream_heartbeat 300ms"}}.start(t)
	set(3)
	first := openLive(t, nil, "/api/v1/status")
	ev := first.nextEvent(t)
	for !strings.Contains(ev.data, `"minecraft":3`) {
		ev = first.nextEvent(t) // a stale entry of an earlier test's, then this one's
	}
	first.close()
	again := openLive(t, nil, "/api/v1/status", "Last-Event-ID: "+ev.id)
	again.wantStream(t, "reconnect")
	for {
		it := again.next(t)
		if it.retry {
			continue
		}
		if !it.comment {
			t.Fatalf("the reconnect with %s (%s) got %+v, want a heartbeat before any event", ev.id, ev.data, it)
		}
		break
	}
	set(7)
	if it := again.nextEvent(t); !strings.Contains(it.data, `"minecraft":7`) {
		t.Fatalf("got %+v, want the change", it)
	}
}

// TestLiveStalledViewersCut: viewers that never read are cut by
// write_timeout and hold no seat: the same client then opens as many
// streams as max_streams_per_client allows, and a reader meanwhile gets
// every change.
func TestLiveStalledViewersCut(t *testing.T) {
	be := newBackend(t)
	var n atomic.Int32
	be.respond = func(u *url.URL) (int, []byte) {
		// A new answer of a megabyte on every trip: the stalled viewers'
		// buffers fill.
		return 200, envelope(fmt.Sprintf(`{"online":[],"minecraft":%d,"pad":%q}`, n.Add(1), strings.Repeat("x", 1<<20)))
	}
	gateway{upstream: be.addr(), shared: true, statusgate: []string{
		"cache status 100ms", "write_timeout 300ms", "max_streams_per_client 2", "max_held 256MiB",
	}}.start(t)
	for range 2 {
		stalledClient(t, "/api/v1/status", "Accept: text/event-stream")
	}
	fixture.WaitFor(t, "the stalled viewers' cut", func() bool {
		got, _ := scrapeAdmin(t)
		return got[`caddy_http_statusgate_stream_viewers_cut_total{endpoint="status"}`] == 2 &&
			got[`caddy_http_statusgate_streams_open{endpoint="status"}`] == 0
	})
	for range 2 {
		s := openLive(t, nil, "/api/v1/status")
		s.wantStream(t, "after the cut")
		s.nextEvent(t)
	}
}

// TestLiveOneSimTripPerSnapshot: viewers of both classes watch the
// simulated server's /status, whose snapshot (meta.cachedAt) changes every
// 5 s, and the sim sees about one trip per snapshot and class (the poller
// asks when the next snapshot is due), however many viewers there are.
// It asserts what streams promise (docs/live.md) and no more: each viewer
// gets snapshots in order, each once; every viewer of a class that gets a
// snapshot gets the same bytes, filtered once for all; and the trips are
// counted by the snapshots the viewers saw. A viewer that falls behind on a
// busy machine may rightly skip a snapshot (a newer event replaces the one
// it has not taken), so which snapshots a viewer sees is not asserted.
func TestLiveOneSimTripPerSnapshot(t *testing.T) {
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	simSite := fmt.Sprintf(":%d {\n\tstatusgate_sim {\n\t\tseed 7\n\t\tfrozen off\n\t\tname live-trips\n\t\tlatency * 0\n\t}\n}", ports[0])
	gateway{upstream: fmt.Sprintf("127.0.0.1:%d", ports[0]), shared: true, sites: []string{simSite},
		statusgate: []string{"key " + keyA, "max_streams_per_client off"}}.start(t)
	const anonymous, keyed = 60, 20
	var streams []*liveStream
	var firsts []int64 // each viewer's first snapshot
	for i := range anonymous + keyed {
		var s *liveStream
		if i < anonymous {
			s = openLive(t, nil, "/api/v1/status")
		} else {
			s = openLive(t, nil, "/api/v1/status", withKey(keyA))
		}
		s.wantStream(t, "viewer")
		at, _ := strconv.ParseInt(gjsonCachedAt(s.nextEvent(t).data), 10, 64)
		firsts = append(firsts, at)
		streams = append(streams, s)
	}
	stats := sim.Lookup("live-trips")
	// Each viewer's next two events: two later snapshots, in order.
	var mu sync.Mutex
	seen := map[bool]map[int64]map[string]bool{false: {}, true: {}} // by keyed, snapshot: the data written
	var wg sync.WaitGroup
	stats.Reset()
	for i, s := range streams {
		wg.Go(func() {
			prev := firsts[i]
			for n := range 2 {
				ev := s.nextEvent(t)
				at, err := strconv.ParseInt(gjsonCachedAt(ev.data), 10, 64)
				if ev.end || err != nil || at <= prev {
					t.Errorf("viewer %d, event %d after snapshot %d: %+v, want a later snapshot", i, n, prev, ev)
					return
				}
				prev = at
				mu.Lock()
				byData := seen[i >= anonymous][at]
				if byData == nil {
					byData = map[string]bool{}
					seen[i >= anonymous][at] = byData
				}
				byData[ev.data] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	trips := stats.Snapshot().Stations["status"].Requests
	snapshots := map[int64]bool{}
	for keyed, bySnapshot := range seen {
		for at, data := range bySnapshot {
			snapshots[at] = true
			if len(data) != 1 {
				t.Errorf("snapshot %d, keyed %t: the viewers got %d different events, want one for all", at, keyed, len(data))
			}
		}
	}
	t.Logf("%d viewers, %d snapshots seen: %d trips to the sim's /status", anonymous+keyed, len(snapshots), trips)
	// One trip per snapshot and class is the aim; a snapshot the sim had
	// not yet taken when asked costs one more.
	if trips > int64(2*2*len(snapshots)) {
		t.Errorf("%d trips for %d snapshots, 2 classes", trips, len(snapshots))
	}
}

// gjsonCachedAt is an envelope's meta.cachedAt, as written.
func gjsonCachedAt(data string) string {
	_, rest, ok := strings.Cut(data, `"cachedAt":`)
	if !ok {
		return ""
	}
	end := strings.IndexAny(rest, ",}")
	return rest[:end]
}

// TestLiveBackendFailureIsAnEvent: a backend failure (an HTML page where
// its JSON should be) is an event with the envelope a plain GET gets, the
// gateway's 502, for an anonymous viewer and for a keyed one, whose plain
// GET gets the backend's bytes as they come; the stream goes on to the
// next good answer.
func TestLiveBackendFailureIsAnEvent(t *testing.T) {
	for _, c := range []struct {
		name    string
		headers []string
	}{{"anonymous", nil}, {"keyed", []string{withKey(keyA)}}} {
		t.Run(c.name, func(t *testing.T) {
			be := newBackend(t)
			gateway{upstream: be.addr(), shared: true, statusgate: []string{"key staff " + keyA, "cache status 100ms", "stream_heartbeat 1h"}}.start(t)
			s := openLive(t, nil, "/api/v1/status", c.headers...)
			s.wantStream(t, "stream")
			good := s.nextEvent(t)
			be.misbehave(sendHTML)
			wantErrorEvent(t, s.nextEvent(t), http.StatusBadGateway, "/api/v1/status")
			be.misbehave(behave)
			if again := s.nextEvent(t); again.data != good.data {
				t.Fatalf("after the backend recovered: %+v, want the good answer again", again)
			}
		})
	}
}

// wantErrorEvent asserts an event that is the gateway's error envelope
// with status and path.
func wantErrorEvent(t *testing.T, it sseItem, status int, path string) {
	t.Helper()
	var env struct {
		OK    bool `json:"ok"`
		Error struct {
			Status  int    `json:"status"`
			Message string `json:"message"`
			Path    string `json:"path"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(it.data), &env); err != nil || env.OK || env.Error.Status != status ||
		env.Error.Message != errorMessages[status] || env.Error.Path != path {
		t.Fatalf("an event of %d bytes, want the gateway's %d for %s: %s (%v)", len(it.data), status, path, clip([]byte(it.data)), err)
	}
}

// TestLiveWeightZeroIsPlain: an Accept that gives text/event-stream the
// weight 0, in any spelling of it, or a weight that is not one, is not
// asking for a stream: the plain GET's JSON. A weight above 0 is.
func TestLiveWeightZeroIsPlain(t *testing.T) {
	be := newBackend(t)
	gateway{upstream: be.addr(), shared: true, statusgate: []string{"max_per_client off"}}.start(t)
	const status = "/api/v1/status"
	for _, accept := range []string{"text/event-stream;q=0.0", "text/event-stream; q=0.000", "text/event-stream;Q=0", "text/event-stream;q=.5", "text/event-stream;q=2"} {
		r := send(t, "GET", status, "Accept: "+accept)
		wantFiltered(t, r, status)
		if ct := r.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("Accept: %s: Content-Type %q, want the plain GET's JSON", accept, ct)
		}
	}
	for _, accept := range []string{"text/event-stream;q=0.001", "application/json, text/event-stream;q=0.5"} {
		s := openLive(t, nil, status, "Accept: "+accept)
		s.wantStream(t, "Accept: "+accept)
		s.close()
	}
}

// wantBusy asserts the gateway's 503 Backend busy with Retry-After.
func wantBusy(t *testing.T, r response, path string) {
	t.Helper()
	wantError(t, r, http.StatusServiceUnavailable, path)
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("%s: 503 without Retry-After", path)
	}
}

// TestLiveKeyedStreamFindsASeat: with every seat held by anonymous
// viewers, a stream whose key opens the endpoint is served, and the oldest
// anonymous stream, and only it, ends cleanly (its viewer reconnects; while
// the seats are full, to a 503). Keyed streams are never ended for another:
// with every seat keyed, a keyed stream gets the 503 too.
func TestLiveKeyedStreamFindsASeat(t *testing.T) {
	be := newBackend(t)
	gateway{upstream: be.addr(), shared: true, statusgate: []string{
		"key " + keyA, "max_streams 3", "max_streams_per_client off", "stream_heartbeat 1h", "cache status 1h",
	}}.start(t)
	const status = "/api/v1/status"
	open := func(headers ...string) *liveStream {
		t.Helper()
		s := openLive(t, nil, status, headers...)
		s.wantStream(t, fmt.Sprintf("a stream with %q", headers))
		s.nextEvent(t)
		return s
	}
	streamsOpen := func(n float64) func() bool {
		return func() bool {
			got, _ := scrapeAdmin(t)
			return got[`caddy_http_statusgate_streams_open{endpoint="status"}`] == n
		}
	}
	anon := []*liveStream{open(), open(), open()}
	fixture.WaitFor(t, "three anonymous streams", streamsOpen(3))
	keyed := open(withKey(keyA))
	if it := anon[0].nextEvent(t); !it.end {
		t.Fatalf("the oldest anonymous stream sent %+v, want its end", it)
	}
	fixture.WaitFor(t, "the keyed stream in the oldest one's seat", streamsOpen(3))
	wantBusy(t, send(t, "GET", status, "Accept: text/event-stream"), status)
	open(withKey(keyA))
	open(withKey(keyA))
	for i, s := range anon[1:] {
		if it := s.nextEvent(t); !it.end {
			t.Fatalf("anonymous stream %d sent %+v, want its end", i+1, it)
		}
	}
	fixture.WaitFor(t, "three keyed streams", streamsOpen(3))
	wantBusy(t, send(t, "GET", status, withKey(keyA), "Accept: text/event-stream"), status)
	keyed.close()
	fixture.WaitFor(t, "a keyed stream gone", streamsOpen(2))
	open()
}

// TestLiveTopicsBoundedKeyedFirst: past max_topics a stream that would
// start a new answer's polling gets 503 Backend busy, and one of an answer
// polled already joins it; a keyed stream of a new answer is served, and the
// anonymous topic with the fewest viewers ends with its streams. A keyed
// topic is never ended for another: with every topic keyed, 503.
func TestLiveTopicsBoundedKeyedFirst(t *testing.T) {
	be := newBackend(t)
	gateway{upstream: be.addr(), shared: true, statusgate: []string{
		"key " + keyA, "max_topics 2", "max_streams_per_client off", "stream_heartbeat 1h", "cache player 1h",
	}}.start(t)
	open := func(target string, headers ...string) *liveStream {
		t.Helper()
		s := openLive(t, nil, target, headers...)
		s.wantStream(t, target)
		s.nextEvent(t)
		return s
	}
	a := []*liveStream{open(playerN(0)), open(playerN(0))}
	b := open(playerN(1))
	wantBusy(t, send(t, "GET", playerN(2), "Accept: text/event-stream"), playerN(2))
	got, _ := scrapeAdmin(t)
	if n := got[`caddy_http_statusgate_streams_refused_total{reason="max_topics"}`]; n != 1 {
		t.Errorf("streams refused for max_topics: %v, want 1", n)
	}
	a = append(a, open(playerN(0))) // an answer polled already
	open(playerN(3), withKey(keyA))
	if it := b.nextEvent(t); !it.end {
		t.Fatalf("the stream of the topic with the fewest viewers sent %+v, want its end", it)
	}
	open(playerN(4), withKey(keyA))
	for i, s := range a {
		if it := s.nextEvent(t); !it.end {
			t.Fatalf("viewer %d of the other anonymous topic sent %+v, want its end", i, it)
		}
	}
	wantBusy(t, send(t, "GET", playerN(5), withKey(keyA), "Accept: text/event-stream"), playerN(5))
	wantBusy(t, send(t, "GET", playerN(0), "Accept: text/event-stream"), playerN(0))
}

// TestLiveLongHeadersCountInMaxHeld: what a stream's request keeps while
// the stream lasts (a Last-Event-ID of 20 KB here) counts in the client's
// share of max_held: past it the next stream is refused with 429, and it is
// given back when the stream ends. Fifty streams of short headers fit.
func TestLiveLongHeadersCountInMaxHeld(t *testing.T) {
	be := newBackend(t)
	// A client's share: max_response, 64 KiB; a stream starts while it
	// holds less than half.
	gateway{upstream: be.addr(), shared: true, statusgate: []string{
		"max_streams_per_client off", "max_held 1MiB", "max_response 64KiB", "stream_heartbeat 1h",
	}}.start(t)
	const status = "/api/v1/status"
	for range 50 {
		short := openLive(t, nil, status)
		short.wantStream(t, "a stream with short headers")
	}
	long := "Last-Event-ID: " + strings.Repeat("x", 20_000)
	var streams []*liveStream
	for range 2 {
		s := openLive(t, nil, status, long)
		s.wantStream(t, "a stream with a long Last-Event-ID")
		s.nextEvent(t)
		streams = append(streams, s)
	}
	got, _ := scrapeAdmin(t)
	if n := got[`caddy_http_statusgate_held_bytes{guard=""}`]; n < 40_000 {
		t.Errorf("held bytes with two streams of 20 KB headers: %v", n)
	}
	r := send(t, "GET", status, "Accept: text/event-stream", long)
	wantError(t, r, http.StatusTooManyRequests, status)
	got, _ = scrapeAdmin(t)
	if n := got[`caddy_http_statusgate_streams_refused_total{reason="max_held"}`]; n != 1 {
		t.Errorf("streams refused for max_held: %v, want 1", n)
	}
	streams[0].close()
	fixture.WaitFor(t, "the ended stream's head given back", func() bool {
		got, _ := scrapeAdmin(t)
		return got[`caddy_http_statusgate_held_bytes{guard=""}`] < 40_000
	})
	s := openLive(t, nil, status, long)
	s.wantStream(t, "a stream with a long Last-Event-ID, after another ended")
}

// TestLiveStreamsChargedToTheViewer: a client that has spent its
// rate_limit (after statusgate, by {http.statusgate.client}) on plain GETs
// opens streams, one after another, of fresh queries (junk ones, which join
// the plain topic, and worlds of random names, each a topic of its own),
// each read to its first event and closed: the streams are charged like
// the requests they stand for, so the backend sees no trip past what the
// limit allows, and each stream past it is the plain GET's 429. Another
// client's bucket is its own.
func TestLiveStreamsChargedToTheViewer(t *testing.T) {
	be := newBackend(t)
	const events = 3
	gateway{
		upstream: be.addr(), shared: true,
		statusgate: []string{"key staff " + keyA, "max_per_client off", "require_key worlds off"},
		global:     []string{"log {\n\t\tlevel ERROR\n\t}", "order rate_limit after statusgate"},
		site:       []string{fmt.Sprintf("rate_limit {\n\t\tzone streams_charged {\n\t\t\tkey {http.statusgate.client}\n\t\t\tevents %d\n\t\t\twindow 1m\n\t\t}\n\t}", events)},
	}.start(t)
	for i := 0; ; i++ {
		r := send(t, "GET", fmt.Sprintf("/api/v1/worlds/plain%d", i))
		if r.Status == http.StatusTooManyRequests {
			break
		}
		if i == events {
			t.Fatalf("%d plain trips and no 429 from a limit of %d", i+1, events)
		}
	}
	plain := len(be.take())
	refused := 0
	for i := range 40 {
		target := fmt.Sprintf("/api/v1/status?c=%d", i)
		if i%2 == 1 {
			target = fmt.Sprintf("/api/v1/worlds/w%d", i)
		}
		s := openLive(t, nil, target)
		switch s.resp.StatusCode {
		case http.StatusTooManyRequests:
			refused++
		case http.StatusOK:
			s.nextEvent(t)
		default:
			t.Fatalf("stream %d of %s: %d", i, target, s.resp.StatusCode)
		}
		s.close()
	}
	// One trip at most: the plain topic's first, if /status was not cached
	// yet; every fresh world is a trip the limit refuses.
	if trips := len(be.take()); trips > 1 || refused < 20 {
		t.Errorf("after %d plain trips used the limit of %d: the streams made %d trips, and %d of 40 were refused; want at most 1 trip and every world refused",
			plain, events, trips, refused)
	}
	// A keyed viewer's bucket is its key's.
	s := openLive(t, nil, "/api/v1/worlds/staff", withKey(keyA))
	s.wantStream(t, "the key's stream")
}

// paddedPlayer is a player answer of about n bytes, its padding in a field
// the field layer keeps.
func paddedPlayer(uuid string, n int) []byte {
	return envelope(fmt.Sprintf(`{"uuid":%q,"name":"Alex_MC","note":%q}`, uuid, strings.Repeat("x", n)))
}

// eventWire is what a topic keeps of an event sent as it: the encoded
// event, id and data lines (one data line: the envelope is on one line).
func eventWire(it sseItem) int {
	return len("id: \ndata: \n\n") + len(it.id) + len(it.data)
}

// TestLiveTopicAnswerWithinMaxResponse: a streamed endpoint (cache player
// 2m) whose backend answer, 3 MB, is larger than max_response (1MiB): the
// event is the gateway's 502 envelope for an anonymous and a keyed viewer
// alike, as a plain GET that cannot be held, never the answer; an answer
// of 200 KB, within max_response, is the event. /metrics shows what the
// topics keep, to the byte, in held_bytes too.
func TestLiveTopicAnswerWithinMaxResponse(t *testing.T) {
	be := newBackend(t)
	big, fits := playerN(1), playerN(2)
	be.respond = func(u *url.URL) (int, []byte) {
		switch u.Path {
		case big:
			return 200, paddedPlayer(u.Path[len("/api/v1/player/"):], 3_000_000)
		case fits:
			return 200, paddedPlayer(u.Path[len("/api/v1/player/"):], 200_000)
		}
		return backendResponse(u)
	}
	gateway{upstream: be.addr(), shared: true, statusgate: []string{
		"key staff " + keyA, "max_response 1MiB", "cache player 2m", "stream_heartbeat 1h",
	}}.start(t)
	kept := 0
	for _, who := range [][]string{nil, {withKey(keyA)}} {
		s := openLive(t, nil, big, who...)
		s.wantStream(t, fmt.Sprintf("a stream of a 3 MB answer, %q", who))
		it := s.nextEvent(t)
		wantErrorEvent(t, it, http.StatusBadGateway, big)
		kept += eventWire(it)
		be.wantSeen(t, fmt.Sprintf("the stream of a 3 MB answer, %q", who), big)
	}
	s := openLive(t, nil, fits)
	s.wantStream(t, "a stream of a 200 KB answer")
	it := s.nextEvent(t)
	kept += eventWire(it)
	charged := eventWire(it) // the envelopes are small, and charged to nobody
	be.wantSeen(t, "the stream of a 200 KB answer", fits)
	plain := send(t, "GET", fits) // from the cache: the same bytes
	wantFilteredFrom(t, plain, "a plain GET of the 200 KB answer", paddedPlayer(fits[len("/api/v1/player/"):], 200_000), playerFields...)
	if it.data != string(plain.Body) {
		t.Errorf("the 200 KB answer's event is not the plain GET's answer: %s", clip([]byte(it.data)))
	}
	be.wantSeen(t, "a plain GET of the 200 KB answer, cached")

	got, _ := scrapeAdmin(t)
	if n := got[`caddy_http_statusgate_topic_bytes{guard=""}`]; n != float64(kept) {
		t.Errorf("topic bytes: %v, want the three topics' events, %d", n, kept)
	}
	if n := got[`caddy_http_statusgate_held_bytes{guard=""}`]; n < float64(charged) {
		t.Errorf("held bytes %v, less than the large answer's topic keeps, %d", n, charged)
	}
}

// TestLiveTopicMemory measures what topics of large answers cost: with
// STATUSGATE_TOPIC_MEMORY=n set, n streams, each of a player of its own
// (a topic each) whose answer is 3 MB, under max_response 1MiB and cache
// player 2m, each read to its first event; then the same with answers of
// 900 KB, within max_response. It logs the live heap (after a collection)
// before and after, held_bytes and topic_bytes (docs/performance.md). The
// gateway runs in this process, so the heap is the gateway's and the
// test's; the test keeps no event.
func TestLiveTopicMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STATUSGATE_TOPIC_MEMORY"))
	if n <= 0 {
		t.Skip("a measurement: set STATUSGATE_TOPIC_MEMORY to the number of topics")
	}
	for _, size := range []int{3_000_000, 900_000} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			be := newBackend(t)
			be.respond = func(u *url.URL) (int, []byte) {
				if uuid, ok := strings.CutPrefix(u.Path, "/api/v1/player/"); ok {
					return 200, paddedPlayer(uuid, size)
				}
				return backendResponse(u)
			}
			gateway{upstream: be.addr(), shared: true, statusgate: []string{
				"max_response 1MiB", "cache player 2m", "stream_heartbeat 1h", "max_streams_per_client off",
			}}.start(t)
			heap := func() uint64 {
				var m runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m)
				return m.HeapAlloc
			}
			before := heap()
			codes := map[int]int{}
			for i := range n {
				s := openLive(t, nil, playerN(100+i))
				codes[s.resp.StatusCode]++
				if s.resp.StatusCode == http.StatusOK {
					s.nextEvent(t)
				}
			}
			after := heap()
			got, _ := scrapeAdmin(t)
			t.Logf("%d topics of %d-byte answers: streams %v; live heap %.1f MiB → %.1f MiB (%+.1f MiB); held_bytes %v, topic_bytes %v",
				n, size, codes, float64(before)/(1<<20), float64(after)/(1<<20), (float64(after)-float64(before))/(1<<20),
				got[`caddy_http_statusgate_held_bytes{guard=""}`], got[`caddy_http_statusgate_topic_bytes{guard=""}`])
		})
	}
}

// TestLiveTopicsWithinMaxHeld: what topics keep is charged to max_held in
// their viewers' class. With max_held 1MiB (anonymous callers' half:
// 512 KiB) and answers of 200 KB, two anonymous topics fit and a third is
// refused with 503 Backend busy, before a stream; a keyed topic of the same
// answer is served from the other half; once a topic ends, its bytes are
// given back and the third anonymous topic is served.
func TestLiveTopicsWithinMaxHeld(t *testing.T) {
	be := newBackend(t)
	be.respond = func(u *url.URL) (int, []byte) {
		if uuid, ok := strings.CutPrefix(u.Path, "/api/v1/player/"); ok {
			return 200, paddedPlayer(uuid, 200_000)
		}
		return backendResponse(u)
	}
	gateway{upstream: be.addr(), shared: true,
		statusgate: []string{"key staff " + keyA, "max_held 1MiB", "max_response 256KiB", "cache player 2m", "stream_heartbeat 1h"},
		global:     []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\ttrusted_proxies static 127.0.0.0/8\n\t\ttrusted_proxies_strict\n\t}"},
	}.start(t)
	// Each viewer from an address of its own: one address's share (256 KiB)
	// holds one event of 200 KB while it is written.
	open := func(target, from string, headers ...string) *liveStream {
		t.Helper()
		s := openLive(t, nil, target, append(headers, "X-Forwarded-For: "+from)...)
		s.wantStream(t, target+" from "+from)
		if it := s.nextEvent(t); it.end || !strings.Contains(it.data, `"ok":true`) {
			t.Fatalf("%s from %s: the first event %s", target, from, clip([]byte(it.data)))
		}
		return s
	}
	topicBytes := func() float64 {
		got, _ := scrapeAdmin(t)
		return got[`caddy_http_statusgate_topic_bytes{guard=""}`]
	}
	first := open(playerN(1), "198.51.100.1")
	open(playerN(2), "198.51.100.2")
	two := topicBytes()
	if two < 400_000 || two > 512<<10 {
		t.Fatalf("topic bytes with two topics of 200 KB: %v", two)
	}
	wantBusy(t, send(t, "GET", playerN(3), "Accept: text/event-stream", "X-Forwarded-For: 198.51.100.3"), playerN(3))
	got, _ := scrapeAdmin(t)
	if n := got[`caddy_http_statusgate_streams_refused_total{reason="max_held"}`]; n != 1 {
		t.Errorf("streams refused for max_held: %v, want 1", n)
	}
	if n := got[`caddy_http_statusgate_topic_bytes{guard=""}`]; n != two {
		t.Errorf("topic bytes after the refusal: %v, want the two topics' %v", n, two)
	}
	open(playerN(3), "198.51.100.4", withKey(keyA))
	first.close()
	fixture.WaitFor(t, "the first topic's bytes given back", func() bool { return topicBytes() < two })
	open(playerN(3), "198.51.100.5")
}

// statusStreamsOpen is a wait condition: the gateway's count of open streams
// of /status is n.
func statusStreamsOpen(t *testing.T, n float64) func() bool {
	return func() bool {
		got, _ := scrapeAdmin(t)
		return got[`caddy_http_statusgate_streams_open{endpoint="status"}`] == n
	}
}

// TestLiveRefusedKeyedStreamEndsNobody: with every seat held by anonymous
// viewers, a key whose rate_limit bucket is spent opens streams of answers
// nobody streams yet: each is its plain GET's 429, nothing reaches the
// backend, and no anonymous stream ends (each sends its next heartbeat, and
// the seats are still full: a new anonymous viewer gets the 503). A keyed
// stream takes a seat over only once it has passed its own limits.
func TestLiveRefusedKeyedStreamEndsNobody(t *testing.T) {
	be := newBackend(t)
	gateway{
		upstream: be.addr(), shared: true,
		statusgate: []string{"key " + keyA, "max_streams 3", "max_streams_per_client off", "max_per_client off", "stream_heartbeat 1s", "cache status 1h"},
		global:     []string{"log {\n\t\tlevel ERROR\n\t}", "order rate_limit after statusgate"},
		site:       []string{"rate_limit {\n\t\tzone keyed_refused {\n\t\t\tkey {http.statusgate.client}\n\t\t\tevents 2\n\t\t\twindow 1h\n\t\t}\n\t}"},
	}.start(t)
	const status = "/api/v1/status"
	var anon []*liveStream
	for range 3 {
		s := openLive(t, nil, status)
		s.wantStream(t, "an anonymous stream")
		s.nextEvent(t)
		anon = append(anon, s)
	}
	fixture.WaitFor(t, "three anonymous streams", statusStreamsOpen(t, 3))
	for i := 0; ; i++ {
		if r := send(t, "GET", fmt.Sprintf("/api/v1/worlds/plain%d", i), withKey(keyA)); r.Status == http.StatusTooManyRequests {
			break
		}
		if i == 2 {
			t.Fatal("the key's third plain GET was not refused by its rate_limit of 2")
		}
	}
	be.take()
	for i := range 10 {
		target := fmt.Sprintf("/api/v1/worlds/stream%d", i)
		r := send(t, "GET", target, withKey(keyA), "Accept: text/event-stream")
		wantError(t, r, http.StatusTooManyRequests, target)
	}
	be.wantSeen(t, "the refused keyed streams")
	wantBusy(t, send(t, "GET", status, "Accept: text/event-stream"), status)
	for i, s := range anon {
		if it := s.next(t); !it.comment {
			t.Errorf("anonymous stream %d sent %+v, want its heartbeat", i, it)
		}
	}
}

// TestLiveKeyedChurnEndsABoundedNumber: a key that opens a stream, reads its
// first event and closes it, again and again, while anonymous viewers fill
// every seat it leaves, ends at most as many anonymous streams as it may
// keep open (max_streams_per_client, 4 when off) within a stream_lifetime:
// its first four streams each take the oldest anonymous seat over, and every
// later one gets the 503 an anonymous viewer gets.
func TestLiveKeyedChurnEndsABoundedNumber(t *testing.T) {
	be := newBackend(t)
	gateway{upstream: be.addr(), shared: true, statusgate: []string{
		"key " + keyA, "max_streams 3", "max_streams_per_client off", "stream_heartbeat 1h", "cache status 1h",
	}}.start(t)
	const status = "/api/v1/status"
	openAnon := func() *liveStream {
		t.Helper()
		s := openLive(t, nil, status)
		s.wantStream(t, "an anonymous stream")
		s.nextEvent(t)
		return s
	}
	anon := []*liveStream{openAnon(), openAnon(), openAnon()}
	served := 0
	for i := range 10 {
		fixture.WaitFor(t, "every seat taken", statusStreamsOpen(t, 3))
		k := openLive(t, nil, status, withKey(keyA))
		if k.resp.StatusCode == http.StatusServiceUnavailable {
			k.close()
			if served < 4 {
				t.Fatalf("keyed stream %d refused after %d takeovers, want 4", i, served)
			}
			continue
		}
		k.wantStream(t, fmt.Sprintf("keyed stream %d", i))
		k.nextEvent(t)
		if it := anon[served].nextEvent(t); !it.end {
			t.Fatalf("keyed stream %d: the oldest anonymous stream sent %+v, want its end", i, it)
		}
		served++
		k.close()
		fixture.WaitFor(t, "the keyed stream and the ended one gone", statusStreamsOpen(t, 2))
		anon = append(anon, openAnon())
	}
	if served != 4 {
		t.Fatalf("the churning key was served %d streams by taking seats over, want 4", served)
	}
	wantBusy(t, send(t, "GET", status, "Accept: text/event-stream"), status)
}
