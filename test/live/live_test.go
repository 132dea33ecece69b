package live

import (
	"encoding/json"
	"fmt"
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

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestLiveStreamsAreThePlainAnswers: a keyed and an anonymous stream each
// get, byte for byte, the envelope a plain GET gets (the field layer for
// the anonymous one), over HTTP/1.1 and HTTP/2, through encode gzip (which
// leaves them unencoded), each event flushed as it is written (the first
// one is read while the stream is open).
func TestLiveStreamsAreThePlainAnswers(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{"key " + KeyA, "max_per_client off"},
		Site:   []string{"encode gzip"},
		Global: []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\tprotocols h1 h2c\n\t}"}}.Start(t)
	target := "/api/v1/status?history=true"
	plainAnon, plainKeyed := Send(t, "GET", target), Send(t, "GET", target, WithKey(KeyA))
	WantFiltered(t, plainAnon, target)
	WantBackendBytes(t, plainKeyed, target)
	for _, c := range []struct {
		name    string
		client  *http.Client
		headers []string
		want    []byte
	}{
		{"anonymous", nil, nil, plainAnon.Body},
		{"keyed", nil, []string{WithKey(KeyA)}, plainKeyed.Body},
		{"anonymous h2c", H2C(), nil, plainAnon.Body},
		{"keyed h2c gzip", H2C(), []string{WithKey(KeyA), "Accept-Encoding: gzip"}, plainKeyed.Body},
		{"anonymous gzip", nil, []string{"Accept-Encoding: gzip"}, plainAnon.Body},
	} {
		s := OpenLive(t, c.client, target, c.headers...)
		s.WantStream(t, c.name)
		if c.client != nil && s.Resp.ProtoMajor != 2 {
			t.Errorf("%s: %s, want HTTP/2", c.name, s.Resp.Proto)
		}
		if ce := s.Resp.Header.Get("Content-Encoding"); ce != "" {
			t.Errorf("%s: Content-Encoding %q, want none (TestLiveStreamsNotEncoded)", c.name, ce)
		}
		if ev := s.NextEvent(t); ev.Data != string(c.want) {
			t.Errorf("%s: event\n%s\nplain GET\n%s", c.name, ev.Data, c.want)
		}
		s.Close()
	}
	// Two trips, one per class: the plain GETs'; the streams had the cache.
	be.WantSeen(t, "plain GETs and streams", target, target)
}

// TestLiveStreamsNotEncoded: with the README's `encode` in front (gzip and
// zstd), a stream asked for with a browser's Accept-Encoding is sent as it
// is, not compressed: encode would hold a compressor for the stream's whole
// life (about 0.4 MiB with gzip, 1.1 MiB with zstd, against 40 KiB for the
// rest of a stream; docs/performance.md). The plain GET of the same URL is
// compressed, so encode is in force; each stream's event is that GET's
// envelope, and one trip reached the backend for both.
func TestLiveStreamsNotEncoded(t *testing.T) {
	be := NewBackend(t)
	// An answer longer than encode's minimum_length (512 bytes), which a
	// plain GET gets compressed.
	online := strings.Repeat(`"`+Alex+`",`, 20) + `"` + Steve + `"`
	be.Respond = func(u *url.URL) (int, []byte) {
		if u.Path == "/api/v1/status" {
			return 200, Envelope(`{"online":[` + online + `],"minecraft":21,"discord":3}`)
		}
		return BackendResponse(u)
	}
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{"stream_heartbeat 1h", "cache status 1h"}, Site: []string{"encode"}}.Start(t)
	const status = "/api/v1/status"
	plain := Send(t, "GET", status, "Accept-Encoding: zstd, gzip")
	if plain.Status != 200 || plain.Header.Get("Content-Encoding") != "zstd" {
		t.Fatalf("plain GET through encode: %d, Content-Encoding %q, want 200 zstd", plain.Status, plain.Header.Get("Content-Encoding"))
	}
	want := Send(t, "GET", status)
	if want.Status != 200 || !strings.Contains(string(want.Body), online) {
		t.Fatalf("plain GET: %d %s", want.Status, Clip(want.Body))
	}
	for _, ae := range []string{"zstd", "gzip", "gzip, deflate, br, zstd"} {
		s := OpenLive(t, nil, status, "Accept-Encoding: "+ae)
		if ce := s.Resp.Header.Get("Content-Encoding"); ce != "" {
			t.Fatalf("Accept-Encoding %s: %d, Content-Encoding %q, want a stream without one", ae, s.Resp.StatusCode, ce)
		}
		s.WantStream(t, "Accept-Encoding: "+ae)
		if ev := s.NextEvent(t); ev.Data != string(want.Body) {
			t.Errorf("Accept-Encoding %s: event\n%s\nplain GET\n%s", ae, ev.Data, want.Body)
		}
		s.Close()
	}
	be.WantSeen(t, "plain GETs and streams", status)
}

// TestLiveQuietHTTP2StreamLasts: an HTTP/2 stream with nothing to send for
// longer than write_timeout is not reset (the deadline of its last write
// does not outlive the write): its heartbeat comes.
func TestLiveQuietHTTP2StreamLasts(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{"write_timeout 500ms", "stream_heartbeat 2s"},
		Global: []string{"servers {\n\t\tprotocols h1 h2c\n\t}"}}.Start(t)
	s := OpenLive(t, H2C(), "/api/v1/status")
	s.WantStream(t, "h2c stream")
	if s.Resp.ProtoMajor != 2 {
		t.Fatalf("%s, want HTTP/2", s.Resp.Proto)
	}
	s.NextEvent(t)
	if it := s.Next(t); !it.Comment {
		t.Fatalf("after 2s of quiet with write_timeout 500ms: %+v, want the heartbeat", it)
	}
}

// TestLiveAsksForIdentity: a stream's trips ask the backend for an
// unencoded body, whatever the viewer's client takes (an event cannot
// carry a gzip body), also where the plain GET's answer is neither shared
// nor filtered and passes the client's Accept-Encoding on.
func TestLiveAsksForIdentity(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{"key staff " + KeyA, "coalesce off", "cache status off", "stream_heartbeat 1h"}}.Start(t)
	s := OpenLive(t, nil, "/api/v1/status", WithKey(KeyA), "Accept-Encoding: gzip")
	s.WantStream(t, "keyed stream")
	s.NextEvent(t)
	seen := be.Take()
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
	be := NewBackend(t)
	for _, hide := range [][]string{nil, {"hide_protected off"}} {
		g := ScopedGateway(be)
		g.Statusgate = append(g.Statusgate, hide...)
		g.Start(t)
		for _, c := range []struct {
			method, target string
			headers        []string
		}{
			{"GET", "/api/v1/entities", nil},
			{"GET", "/api/v1/entities", []string{WithKey(KeyA)}}, // outside the bot's scope
			{"GET", "/api/v1/nothing", nil},
			{"POST", "/api/v1/status", nil},
		} {
			plain := Send(t, c.method, c.target, c.headers...)
			stream := Send(t, c.method, c.target, append(c.headers, "Accept: text/event-stream")...)
			if plain.Status < 400 {
				t.Fatalf("%s %s: %d, want a refusal", c.method, c.target, plain.Status)
			}
			WantSameAsAnonymous(t, c.method+" "+c.target, stream, plain)
		}
	}
	be.WantSeen(t, "refusals")
}

// TestLiveScopeNarrowedByReload: a reload that takes entities out of the
// bot's scope ends its stream; the reconnect gets the disguised 404 and
// nothing of entities reaches the backend after the reload.
func TestLiveScopeNarrowedByReload(t *testing.T) {
	be := NewBackend(t)
	g := ScopedGateway(be)
	g.Statusgate[0] = "key bot " + KeyA + " {\n\t\t\tendpoints status entities\n\t\t}"
	g.Shared = true
	g.Start(t)
	s := OpenLive(t, nil, "/api/v1/entities", WithKey(KeyA))
	s.WantStream(t, "in scope")
	if ev := s.NextEvent(t); ev.Data != string(BackendBody("/api/v1/entities")) {
		t.Fatalf("in scope: %+v", ev)
	}
	g.Statusgate[0] = "key bot " + KeyA + " {\n\t\t\tendpoints status\n\t\t}"
	g.Start(t)
	if it := s.NextEvent(t); !it.End {
		t.Fatalf("after the reload the stream sent %+v, want its end", it)
	}
	be.Take()
	again := Send(t, "GET", "/api/v1/entities", WithKey(KeyA), "Accept: text/event-stream")
	WantNotFound(t, again, "/api/v1/entities")
	be.WantSeen(t, "after the reload")
}

// TestLiveChangeReachesEveryStreamOnce: many viewers of one answer cost one
// trip per cache time, like one viewer; a change reaches each of them once,
// and the next thing each reads is a heartbeat, not the answer again.
func TestLiveChangeReachesEveryStreamOnce(t *testing.T) {
	be, set, trips := LiveBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{
		"max_streams_per_client off", "cache status 200ms", "stream_heartbeat 300ms",
	}}.Start(t)
	const viewers = 50
	set(100)
	streams := make([]*LiveStream, viewers)
	for i := range streams {
		streams[i] = OpenLive(t, nil, "/api/v1/status")
		streams[i].WantStream(t, "viewer")
		// An earlier test's stale entry may come first; then this one's.
		for ev := streams[i].NextEvent(t); !strings.Contains(ev.Data, `"minecraft":100`); ev = streams[i].NextEvent(t) {
		}
	}
	before := trips()
	set(101)
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() {
			if ev := s.NextEvent(t); !strings.Contains(ev.Data, `"minecraft":101`) {
				t.Errorf("viewer %d: %+v, want the change", i, ev)
			}
			if it := s.Next(t); !it.Comment {
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
		s.Close()
	}
}

// TestLiveLastEventIDSkipsAnUnchangedAnswer: a reconnect with the ID of the
// answer it has gets a heartbeat, then the change.
func TestLiveLastEventIDSkipsAnUnchangedAnswer(t *testing.T) {
	be, set, _ := LiveBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{"cache status 100ms", "stream_heartbeat 300ms"}}.Start(t)
	set(3)
	first := OpenLive(t, nil, "/api/v1/status")
	ev := first.NextEvent(t)
	for !strings.Contains(ev.Data, `"minecraft":3`) {
		ev = first.NextEvent(t) // a stale entry of an earlier test's, then this one's
	}
	first.Close()
	again := OpenLive(t, nil, "/api/v1/status", "Last-Event-ID: "+ev.ID)
	again.WantStream(t, "reconnect")
	for {
		it := again.Next(t)
		if it.Retry {
			continue
		}
		if !it.Comment {
			t.Fatalf("the reconnect with %s (%s) got %+v, want a heartbeat before any event", ev.ID, ev.Data, it)
		}
		break
	}
	set(7)
	if it := again.NextEvent(t); !strings.Contains(it.Data, `"minecraft":7`) {
		t.Fatalf("got %+v, want the change", it)
	}
}

// TestLiveStalledViewersCut: viewers that never read are cut by
// write_timeout and hold no seat: the same client then opens as many
// streams as max_streams_per_client allows, and a reader meanwhile gets
// every change.
func TestLiveStalledViewersCut(t *testing.T) {
	be := NewBackend(t)
	var n atomic.Int32
	be.Respond = func(u *url.URL) (int, []byte) {
		// A new answer of a megabyte on every trip: the stalled viewers'
		// buffers fill.
		return 200, Envelope(fmt.Sprintf(`{"online":[],"minecraft":%d,"pad":%q}`, n.Add(1), strings.Repeat("x", 1<<20)))
	}
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{
		"cache status 100ms", "write_timeout 300ms", "max_streams_per_client 2", "max_held 256MiB",
	}}.Start(t)
	for range 2 {
		StalledClient(t, "/api/v1/status", "Accept: text/event-stream")
	}
	fixture.WaitFor(t, "the stalled viewers' cut", func() bool {
		got, _ := ScrapeAdmin(t)
		return got[`caddy_http_statusgate_stream_viewers_cut_total{endpoint="status"}`] == 2 &&
			got[`caddy_http_statusgate_streams_open{endpoint="status"}`] == 0
	})
	for range 2 {
		s := OpenLive(t, nil, "/api/v1/status")
		s.WantStream(t, "after the cut")
		s.NextEvent(t)
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
	simSite, upstream := SimSite(t, "seed 7", "frozen off", "name live-trips", "latency * 0")
	Gateway{Upstream: upstream, Shared: true, Sites: []string{simSite},
		Statusgate: []string{"key " + KeyA, "max_streams_per_client off"}}.Start(t)
	const anonymous, keyed = 60, 20
	var streams []*LiveStream
	var firsts []int64 // each viewer's first snapshot
	for i := range anonymous + keyed {
		var s *LiveStream
		if i < anonymous {
			s = OpenLive(t, nil, "/api/v1/status")
		} else {
			s = OpenLive(t, nil, "/api/v1/status", WithKey(KeyA))
		}
		s.WantStream(t, "viewer")
		at, _ := strconv.ParseInt(gjsonCachedAt(s.NextEvent(t).Data), 10, 64)
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
				ev := s.NextEvent(t)
				at, err := strconv.ParseInt(gjsonCachedAt(ev.Data), 10, 64)
				if ev.End || err != nil || at <= prev {
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
				byData[ev.Data] = true
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
	}{{"anonymous", nil}, {"keyed", []string{WithKey(KeyA)}}} {
		t.Run(c.name, func(t *testing.T) {
			be := NewBackend(t)
			Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{"key staff " + KeyA, "cache status 100ms", "stream_heartbeat 1h"}}.Start(t)
			s := OpenLive(t, nil, "/api/v1/status", c.headers...)
			s.WantStream(t, "stream")
			good := s.NextEvent(t)
			be.Misbehave(SendHTML)
			wantErrorEvent(t, s.NextEvent(t), http.StatusBadGateway, "/api/v1/status")
			be.Misbehave(Behave)
			if again := s.NextEvent(t); again.Data != good.Data {
				t.Fatalf("after the backend recovered: %+v, want the good answer again", again)
			}
		})
	}
}

// wantErrorEvent asserts an event that is the gateway's error envelope
// with status and path.
func wantErrorEvent(t *testing.T, it SSEItem, status int, path string) {
	t.Helper()
	var env struct {
		OK    bool `json:"ok"`
		Error struct {
			Status  int    `json:"status"`
			Message string `json:"message"`
			Path    string `json:"path"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(it.Data), &env); err != nil || env.OK || env.Error.Status != status ||
		env.Error.Message != ErrorMessages[status] || env.Error.Path != path {
		t.Fatalf("an event of %d bytes, want the gateway's %d for %s: %s (%v)", len(it.Data), status, path, Clip([]byte(it.Data)), err)
	}
}

// TestLiveWeightZeroIsPlain: an Accept that gives text/event-stream the
// weight 0, in any spelling of it, or a weight that is not one, is not
// asking for a stream: the plain GET's JSON. A weight above 0 is.
func TestLiveWeightZeroIsPlain(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{"max_per_client off"}}.Start(t)
	const status = "/api/v1/status"
	for _, accept := range []string{"text/event-stream;q=0.0", "text/event-stream; q=0.000", "text/event-stream;Q=0", "text/event-stream;q=.5", "text/event-stream;q=2"} {
		r := Send(t, "GET", status, "Accept: "+accept)
		WantFiltered(t, r, status)
		if ct := r.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("Accept: %s: Content-Type %q, want the plain GET's JSON", accept, ct)
		}
	}
	for _, accept := range []string{"text/event-stream;q=0.001", "application/json, text/event-stream;q=0.5"} {
		s := OpenLive(t, nil, status, "Accept: "+accept)
		s.WantStream(t, "Accept: "+accept)
		s.Close()
	}
}

// TestLiveKeyedStreamFindsASeat: with every seat held by anonymous
// viewers, a stream whose key opens the endpoint is served, and the oldest
// anonymous stream, and only it, ends cleanly (its viewer reconnects; while
// the seats are full, to a 503). Keyed streams are never ended for another:
// with every seat keyed, a keyed stream gets the 503 too.
func TestLiveKeyedStreamFindsASeat(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{
		"key " + KeyA, "max_streams 3", "max_streams_per_client off", "stream_heartbeat 1h", "cache status 1h",
	}}.Start(t)
	const status = "/api/v1/status"
	open := func(headers ...string) *LiveStream {
		t.Helper()
		s := OpenLive(t, nil, status, headers...)
		s.WantStream(t, fmt.Sprintf("a stream with %q", headers))
		s.NextEvent(t)
		return s
	}
	streamsOpen := func(n float64) func() bool {
		return func() bool {
			got, _ := ScrapeAdmin(t)
			return got[`caddy_http_statusgate_streams_open{endpoint="status"}`] == n
		}
	}
	anon := []*LiveStream{open(), open(), open()}
	fixture.WaitFor(t, "three anonymous streams", streamsOpen(3))
	keyed := open(WithKey(KeyA))
	if it := anon[0].NextEvent(t); !it.End {
		t.Fatalf("the oldest anonymous stream sent %+v, want its end", it)
	}
	fixture.WaitFor(t, "the keyed stream in the oldest one's seat", streamsOpen(3))
	WantBusy(t, Send(t, "GET", status, "Accept: text/event-stream"), status)
	open(WithKey(KeyA))
	open(WithKey(KeyA))
	for i, s := range anon[1:] {
		if it := s.NextEvent(t); !it.End {
			t.Fatalf("anonymous stream %d sent %+v, want its end", i+1, it)
		}
	}
	fixture.WaitFor(t, "three keyed streams", streamsOpen(3))
	WantBusy(t, Send(t, "GET", status, WithKey(KeyA), "Accept: text/event-stream"), status)
	keyed.Close()
	fixture.WaitFor(t, "a keyed stream gone", streamsOpen(2))
	open()
}

// TestLiveTopicsBoundedKeyedFirst: past max_topics a stream that would
// start a new answer's polling gets 503 Backend busy, and one of an answer
// polled already joins it; a keyed stream of a new answer is served, and the
// anonymous topic with the fewest viewers ends with its streams. A keyed
// topic is never ended for another: with every topic keyed, 503.
func TestLiveTopicsBoundedKeyedFirst(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{
		"key " + KeyA, "max_topics 2", "max_streams_per_client off", "stream_heartbeat 1h", "cache player 1h",
	}}.Start(t)
	open := func(target string, headers ...string) *LiveStream {
		t.Helper()
		s := OpenLive(t, nil, target, headers...)
		s.WantStream(t, target)
		s.NextEvent(t)
		return s
	}
	a := []*LiveStream{open(PlayerN(0)), open(PlayerN(0))}
	b := open(PlayerN(1))
	WantBusy(t, Send(t, "GET", PlayerN(2), "Accept: text/event-stream"), PlayerN(2))
	got, _ := ScrapeAdmin(t)
	if n := got[`caddy_http_statusgate_streams_refused_total{reason="max_topics"}`]; n != 1 {
		t.Errorf("streams refused for max_topics: %v, want 1", n)
	}
	a = append(a, open(PlayerN(0))) // an answer polled already
	open(PlayerN(3), WithKey(KeyA))
	if it := b.NextEvent(t); !it.End {
		t.Fatalf("the stream of the topic with the fewest viewers sent %+v, want its end", it)
	}
	open(PlayerN(4), WithKey(KeyA))
	for i, s := range a {
		if it := s.NextEvent(t); !it.End {
			t.Fatalf("viewer %d of the other anonymous topic sent %+v, want its end", i, it)
		}
	}
	WantBusy(t, Send(t, "GET", PlayerN(5), WithKey(KeyA), "Accept: text/event-stream"), PlayerN(5))
	WantBusy(t, Send(t, "GET", PlayerN(0), "Accept: text/event-stream"), PlayerN(0))
}

// TestLiveLongHeadersCountInMaxHeld: what a stream's request keeps while
// the stream lasts (a Last-Event-ID of 20 KB here) counts in the client's
// share of max_held: past it the next stream is refused with 429, and it is
// given back when the stream ends. Fifty streams of short headers fit.
func TestLiveLongHeadersCountInMaxHeld(t *testing.T) {
	be := NewBackend(t)
	// A client's share: max_response, 64 KiB; a stream starts while it
	// holds less than half.
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{
		"max_streams_per_client off", "max_held 1MiB", "max_response 64KiB", "stream_heartbeat 1h",
	}}.Start(t)
	const status = "/api/v1/status"
	for range 50 {
		short := OpenLive(t, nil, status)
		short.WantStream(t, "a stream with short headers")
	}
	long := "Last-Event-ID: " + strings.Repeat("x", 20_000)
	var streams []*LiveStream
	for range 2 {
		s := OpenLive(t, nil, status, long)
		s.WantStream(t, "a stream with a long Last-Event-ID")
		s.NextEvent(t)
		streams = append(streams, s)
	}
	got, _ := ScrapeAdmin(t)
	if n := got[`caddy_http_statusgate_held_bytes{guard=""}`]; n < 40_000 {
		t.Errorf("held bytes with two streams of 20 KB headers: %v", n)
	}
	r := Send(t, "GET", status, "Accept: text/event-stream", long)
	WantError(t, r, http.StatusTooManyRequests, status)
	got, _ = ScrapeAdmin(t)
	if n := got[`caddy_http_statusgate_streams_refused_total{reason="max_held"}`]; n != 1 {
		t.Errorf("streams refused for max_held: %v, want 1", n)
	}
	streams[0].Close()
	fixture.WaitFor(t, "the ended stream's head given back", func() bool {
		got, _ := ScrapeAdmin(t)
		return got[`caddy_http_statusgate_held_bytes{guard=""}`] < 40_000
	})
	s := OpenLive(t, nil, status, long)
	s.WantStream(t, "a stream with a long Last-Event-ID, after another ended")
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
	be := NewBackend(t)
	const events = 3
	Gateway{
		Upstream: be.Addr(), Shared: true,
		Statusgate: []string{"key staff " + KeyA, "max_per_client off", "require_key worlds off"},
		Global:     []string{"log {\n\t\tlevel ERROR\n\t}", "order rate_limit after statusgate"},
		Site:       []string{fmt.Sprintf("rate_limit {\n\t\tzone streams_charged {\n\t\t\tkey {http.statusgate.client}\n\t\t\tevents %d\n\t\t\twindow 1m\n\t\t}\n\t}", events)},
	}.Start(t)
	for i := 0; ; i++ {
		r := Send(t, "GET", fmt.Sprintf("/api/v1/worlds/plain%d", i))
		if r.Status == http.StatusTooManyRequests {
			break
		}
		if i == events {
			t.Fatalf("%d plain trips and no 429 from a limit of %d", i+1, events)
		}
	}
	plain := len(be.Take())
	refused := 0
	for i := range 40 {
		target := fmt.Sprintf("/api/v1/status?c=%d", i)
		if i%2 == 1 {
			target = fmt.Sprintf("/api/v1/worlds/w%d", i)
		}
		s := OpenLive(t, nil, target)
		switch s.Resp.StatusCode {
		case http.StatusTooManyRequests:
			refused++
		case http.StatusOK:
			s.NextEvent(t)
		default:
			t.Fatalf("stream %d of %s: %d", i, target, s.Resp.StatusCode)
		}
		s.Close()
	}
	// One trip at most: the plain topic's first, if /status was not cached
	// yet; every fresh world is a trip the limit refuses.
	if trips := len(be.Take()); trips > 1 || refused < 20 {
		t.Errorf("after %d plain trips used the limit of %d: the streams made %d trips, and %d of 40 were refused; want at most 1 trip and every world refused",
			plain, events, trips, refused)
	}
	// A keyed viewer's bucket is its key's.
	s := OpenLive(t, nil, "/api/v1/worlds/staff", WithKey(KeyA))
	s.WantStream(t, "the key's stream")
}

// paddedPlayer is a player answer of about n bytes, its padding in a field
// the field layer keeps.
func paddedPlayer(uuid string, n int) []byte {
	return Envelope(fmt.Sprintf(`{"uuid":%q,"name":"Alex_MC","note":%q}`, uuid, strings.Repeat("x", n)))
}

// eventWire is what a topic keeps of an event sent as it: the encoded
// event, id and data lines (one data line: the envelope is on one line).
func eventWire(it SSEItem) int {
	return len("id: \ndata: \n\n") + len(it.ID) + len(it.Data)
}

// TestLiveTopicAnswerWithinMaxResponse: a streamed endpoint (cache player
// 2m) whose backend answer, 3 MB, is larger than max_response (1MiB): the
// event is the gateway's 502 envelope for an anonymous and a keyed viewer
// alike, as a plain GET that cannot be held, never the answer; an answer
// of 200 KB, within max_response, is the event. /metrics shows what the
// topics keep, to the byte, in held_bytes too.
func TestLiveTopicAnswerWithinMaxResponse(t *testing.T) {
	be := NewBackend(t)
	big, fits := PlayerN(1), PlayerN(2)
	be.Respond = func(u *url.URL) (int, []byte) {
		switch u.Path {
		case big:
			return 200, paddedPlayer(u.Path[len("/api/v1/player/"):], 3_000_000)
		case fits:
			return 200, paddedPlayer(u.Path[len("/api/v1/player/"):], 200_000)
		}
		return BackendResponse(u)
	}
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{
		"key staff " + KeyA, "max_response 1MiB", "cache player 2m", "stream_heartbeat 1h",
	}}.Start(t)
	kept := 0
	for _, who := range [][]string{nil, {WithKey(KeyA)}} {
		s := OpenLive(t, nil, big, who...)
		s.WantStream(t, fmt.Sprintf("a stream of a 3 MB answer, %q", who))
		it := s.NextEvent(t)
		wantErrorEvent(t, it, http.StatusBadGateway, big)
		kept += eventWire(it)
		be.WantSeen(t, fmt.Sprintf("the stream of a 3 MB answer, %q", who), big)
	}
	s := OpenLive(t, nil, fits)
	s.WantStream(t, "a stream of a 200 KB answer")
	it := s.NextEvent(t)
	kept += eventWire(it)
	charged := eventWire(it) // the envelopes are small, and charged to nobody
	be.WantSeen(t, "the stream of a 200 KB answer", fits)
	plain := Send(t, "GET", fits) // from the cache: the same bytes
	WantFilteredFrom(t, plain, "a plain GET of the 200 KB answer", paddedPlayer(fits[len("/api/v1/player/"):], 200_000), PlayerFields...)
	if it.Data != string(plain.Body) {
		t.Errorf("the 200 KB answer's event is not the plain GET's answer: %s", Clip([]byte(it.Data)))
	}
	be.WantSeen(t, "a plain GET of the 200 KB answer, cached")

	got, _ := ScrapeAdmin(t)
	if n := got[`caddy_http_statusgate_topic_bytes{guard=""}`]; n != float64(kept) {
		t.Errorf("topic bytes: %v, want the three topics' events, %d", n, kept)
	}
	if n := got[`caddy_http_statusgate_held_bytes{guard=""}`]; n < float64(charged) {
		t.Errorf("held bytes %v, less than the large answer's topic keeps, %d", n, charged)
	}
}

// TestLiveTopicMemory measures what topics of large answers cost, and holds
// it to the bound the limits promise: with STATUSGATE_TOPIC_MEMORY=n set,
// n streams, each of a player of its own (a topic each) whose answer is
// 3 MB, under max_response 1MiB and cache player 2m, each read to its first
// event; then the same with answers of 900 KB, within max_response. An
// answer over max_response is no topic's: each stream gets the 502 envelope.
// One within it is kept until anonymous callers' half of max_held is spent,
// and each stream past that is refused with 503. Either way held_bytes stays
// within that half, and the live heap (after a collection) grows by no more
// than what max_held bounds, the micro-cache's cache_size and 64 KiB per
// stream (a stream costs about 40, docs/performance.md): topics that kept
// their answers whole took 584 MiB for 255 streams of 3 MB, and 243 MiB
// for 255 of 900 KB. It logs the
// heap before and after, held_bytes and topic_bytes. The gateway runs in
// this process, so the heap is the gateway's and the test's; the test keeps
// no event.
func TestLiveTopicMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STATUSGATE_TOPIC_MEMORY"))
	if n <= 0 {
		t.Skip("a measurement: set STATUSGATE_TOPIC_MEMORY to the number of topics")
	}
	const (
		maxHeld       = 64 << 20 // max_held's default
		anonymousHeld = maxHeld / 2
		cacheSize     = 16 << 20 // cache_size's default
		perStream     = 64 << 10
	)
	for _, size := range []int{3_000_000, 900_000} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			be := NewBackend(t)
			be.Respond = func(u *url.URL) (int, []byte) {
				if uuid, ok := strings.CutPrefix(u.Path, "/api/v1/player/"); ok {
					return 200, paddedPlayer(uuid, size)
				}
				return BackendResponse(u)
			}
			Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{
				"max_response 1MiB", "cache player 2m", "stream_heartbeat 1h", "max_streams_per_client off",
			}}.Start(t)
			heap := func() uint64 {
				var m runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m)
				return m.HeapAlloc
			}
			before := heap()
			codes := map[int]int{}
			for i := range n {
				target := PlayerN(100 + i)
				s := OpenLive(t, nil, target)
				codes[s.Resp.StatusCode]++
				switch s.Resp.StatusCode {
				case http.StatusOK:
					it := s.NextEvent(t)
					if size > 1<<20 {
						wantErrorEvent(t, it, http.StatusBadGateway, target)
					}
				case http.StatusServiceUnavailable:
					if size > 1<<20 {
						t.Fatalf("stream %d of an answer over max_response refused: its topic keeps an envelope", i)
					}
				default:
					t.Fatalf("stream %d: %d, want a stream or, with anonymous callers' half of max_held spent, 503", i, s.Resp.StatusCode)
				}
			}
			after := heap()
			got, _ := ScrapeAdmin(t)
			held, topics := got[`caddy_http_statusgate_held_bytes{guard=""}`], got[`caddy_http_statusgate_topic_bytes{guard=""}`]
			grew := float64(after) - float64(before)
			t.Logf("%d topics of %d-byte answers: streams %v; live heap %.1f MiB → %.1f MiB (%+.1f MiB); held_bytes %v, topic_bytes %v",
				n, size, codes, float64(before)/(1<<20), float64(after)/(1<<20), grew/(1<<20), held, topics)
			if codes[http.StatusOK] == 0 {
				t.Errorf("no stream served")
			}
			if held > anonymousHeld {
				t.Errorf("held_bytes %v, past anonymous callers' half of max_held, %d", held, anonymousHeld)
			}
			if bound := float64(maxHeld + cacheSize + n*perStream); grew > bound {
				t.Errorf("the live heap grew by %.1f MiB, past what the limits bound, %.1f MiB", grew/(1<<20), bound/(1<<20))
			}
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
	be := NewBackend(t)
	be.Respond = func(u *url.URL) (int, []byte) {
		if uuid, ok := strings.CutPrefix(u.Path, "/api/v1/player/"); ok {
			return 200, paddedPlayer(uuid, 200_000)
		}
		return BackendResponse(u)
	}
	Gateway{Upstream: be.Addr(), Shared: true,
		Statusgate: []string{"key staff " + KeyA, "max_held 1MiB", "max_response 256KiB", "cache player 2m", "stream_heartbeat 1h"},
		Global:     []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\ttrusted_proxies static 127.0.0.0/8\n\t\ttrusted_proxies_strict\n\t}"},
	}.Start(t)
	// Each viewer from an address of its own: one address's share (256 KiB)
	// holds one event of 200 KB while it is written.
	open := func(target, from string, headers ...string) *LiveStream {
		t.Helper()
		s := OpenLive(t, nil, target, append(headers, "X-Forwarded-For: "+from)...)
		s.WantStream(t, target+" from "+from)
		if it := s.NextEvent(t); it.End || !strings.Contains(it.Data, `"ok":true`) {
			t.Fatalf("%s from %s: the first event %s", target, from, Clip([]byte(it.Data)))
		}
		return s
	}
	topicBytes := func() float64 {
		got, _ := ScrapeAdmin(t)
		return got[`caddy_http_statusgate_topic_bytes{guard=""}`]
	}
	first := open(PlayerN(1), "198.51.100.1")
	open(PlayerN(2), "198.51.100.2")
	two := topicBytes()
	if two < 400_000 || two > 512<<10 {
		t.Fatalf("topic bytes with two topics of 200 KB: %v", two)
	}
	WantBusy(t, Send(t, "GET", PlayerN(3), "Accept: text/event-stream", "X-Forwarded-For: 198.51.100.3"), PlayerN(3))
	got, _ := ScrapeAdmin(t)
	if n := got[`caddy_http_statusgate_streams_refused_total{reason="max_held"}`]; n != 1 {
		t.Errorf("streams refused for max_held: %v, want 1", n)
	}
	if n := got[`caddy_http_statusgate_topic_bytes{guard=""}`]; n != two {
		t.Errorf("topic bytes after the refusal: %v, want the two topics' %v", n, two)
	}
	open(PlayerN(3), "198.51.100.4", WithKey(KeyA))
	first.Close()
	fixture.WaitFor(t, "the first topic's bytes given back", func() bool { return topicBytes() < two })
	open(PlayerN(3), "198.51.100.5")
}

// statusStreamsOpen is a wait condition: the gateway's count of open streams
// of /status is n.
func statusStreamsOpen(t *testing.T, n float64) func() bool {
	return func() bool {
		got, _ := ScrapeAdmin(t)
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
	be := NewBackend(t)
	Gateway{
		Upstream: be.Addr(), Shared: true,
		Statusgate: []string{"key " + KeyA, "max_streams 3", "max_streams_per_client off", "max_per_client off", "stream_heartbeat 1s", "cache status 1h"},
		Global:     []string{"log {\n\t\tlevel ERROR\n\t}", "order rate_limit after statusgate"},
		Site:       []string{"rate_limit {\n\t\tzone keyed_refused {\n\t\t\tkey {http.statusgate.client}\n\t\t\tevents 2\n\t\t\twindow 1h\n\t\t}\n\t}"},
	}.Start(t)
	const status = "/api/v1/status"
	var anon []*LiveStream
	for range 3 {
		s := OpenLive(t, nil, status)
		s.WantStream(t, "an anonymous stream")
		s.NextEvent(t)
		anon = append(anon, s)
	}
	fixture.WaitFor(t, "three anonymous streams", statusStreamsOpen(t, 3))
	for i := 0; ; i++ {
		if r := Send(t, "GET", fmt.Sprintf("/api/v1/worlds/plain%d", i), WithKey(KeyA)); r.Status == http.StatusTooManyRequests {
			break
		}
		if i == 2 {
			t.Fatal("the key's third plain GET was not refused by its rate_limit of 2")
		}
	}
	be.Take()
	for i := range 10 {
		target := fmt.Sprintf("/api/v1/worlds/stream%d", i)
		r := Send(t, "GET", target, WithKey(KeyA), "Accept: text/event-stream")
		WantError(t, r, http.StatusTooManyRequests, target)
	}
	be.WantSeen(t, "the refused keyed streams")
	WantBusy(t, Send(t, "GET", status, "Accept: text/event-stream"), status)
	for i, s := range anon {
		if it := s.Next(t); !it.Comment {
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
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{
		"key " + KeyA, "max_streams 3", "max_streams_per_client off", "stream_heartbeat 1h", "cache status 1h",
	}}.Start(t)
	const status = "/api/v1/status"
	openAnon := func() *LiveStream {
		t.Helper()
		s := OpenLive(t, nil, status)
		s.WantStream(t, "an anonymous stream")
		s.NextEvent(t)
		return s
	}
	anon := []*LiveStream{openAnon(), openAnon(), openAnon()}
	served := 0
	for i := range 10 {
		fixture.WaitFor(t, "every seat taken", statusStreamsOpen(t, 3))
		k := OpenLive(t, nil, status, WithKey(KeyA))
		if k.Resp.StatusCode == http.StatusServiceUnavailable {
			k.Close()
			if served < 4 {
				t.Fatalf("keyed stream %d refused after %d takeovers, want 4", i, served)
			}
			continue
		}
		k.WantStream(t, fmt.Sprintf("keyed stream %d", i))
		k.NextEvent(t)
		if it := anon[served].NextEvent(t); !it.End {
			t.Fatalf("keyed stream %d: the oldest anonymous stream sent %+v, want its end", i, it)
		}
		served++
		k.Close()
		fixture.WaitFor(t, "the keyed stream and the ended one gone", statusStreamsOpen(t, 2))
		anon = append(anon, openAnon())
	}
	if served != 4 {
		t.Fatalf("the churning key was served %d streams by taking seats over, want 4", served)
	}
	WantBusy(t, Send(t, "GET", status, "Accept: text/event-stream"), status)
}
