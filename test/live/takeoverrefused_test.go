package live

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestLiveKeyedStreamRefusedForItsTopicEndsNobody: with max_streams 2 and
// max_topics 1 held by anonymous viewers of status, a key that took over
// its share of topics within the takeover window (4, with
// max_streams_per_client off) opens a stream of a new answer: the topic
// refuses it with 503 Backend busy, and no anonymous stream ends for it
// (each sends its next heartbeat, and the seats are still full: a new
// anonymous viewer gets the 503). Before, the key's stream took the oldest
// anonymous seat over before its topic refused it, and that viewer
// reconnected for nothing.
func TestLiveKeyedStreamRefusedForItsTopicEndsNobody(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{
		"key " + KeyA, "max_streams 2", "max_topics 1", "max_streams_per_client off",
		"stream_heartbeat 1s", "cache status 1h", "cache player 1h",
	}}.Start(t)
	const status = "/api/v1/status"
	streamsOpen := func() float64 {
		got, _ := ScrapeAdmin(t)
		n := 0.0
		for name, v := range got {
			if strings.HasPrefix(name, "caddy_http_statusgate_streams_open{") {
				n += v
			}
		}
		return n
	}
	// An anonymous viewer of status, once the places of the streams
	// before have been given back.
	openAnon := func(what string) *LiveStream {
		t.Helper()
		var s *LiveStream
		fixture.WaitEvery(t, what, 20*time.Millisecond, func() bool {
			s = OpenLive(t, nil, status)
			if s.Resp.StatusCode != http.StatusOK {
				s.Close()
				return false
			}
			return true
		})
		s.WantStream(t, what)
		s.NextEvent(t)
		return s
	}

	// The key spends its topic takeovers, a seat free each time.
	for i := range 4 {
		fixture.WaitEvery(t, "every stream before gone", 20*time.Millisecond, func() bool { return streamsOpen() == 0 })
		a := openAnon(fmt.Sprintf("anonymous viewer %d", i))
		k := OpenLive(t, nil, PlayerN(100+i), WithKey(KeyA))
		k.WantStream(t, fmt.Sprintf("the key's topic %d", i))
		k.NextEvent(t)
		if it := a.NextEvent(t); !it.End {
			t.Fatalf("takeover %d: the anonymous topic's viewer sent %+v, want its end", i, it)
		}
		k.Close()
		a.Close()
	}

	// Every seat and the topic anonymous; the key's next topic is refused.
	fixture.WaitEvery(t, "every stream before gone", 20*time.Millisecond, func() bool { return streamsOpen() == 0 })
	anon := []*LiveStream{openAnon("the first anonymous seat"), openAnon("the second anonymous seat")}
	before, _ := ScrapeAdmin(t)
	WantBusy(t, Send(t, "GET", PlayerN(200), WithKey(KeyA), "Accept: text/event-stream"), PlayerN(200))
	// Each goes on past the refusal: read in turn for two heartbeats' time
	// after it, twice each at least (a heartbeat sent before may wait
	// unread, and an ended stream's reads never wait), none is its end.
	refused := time.Now()
	for round := 0; round < 2 || time.Since(refused) < 2*time.Second; round++ {
		for i, s := range anon {
			if it := s.Next(t); it.End || !it.Comment {
				t.Fatalf("anonymous stream %d sent %+v, want its heartbeats: its seat was taken over for a stream that was refused", i, it)
			}
		}
	}
	if s := OpenLive(t, nil, status); s.Resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a new anonymous viewer: %d, want 503 with the seats still full", s.Resp.StatusCode)
	}
	after, _ := ScrapeAdmin(t)
	const topics = `caddy_http_statusgate_streams_refused_total{reason="max_topics"}`
	if n := after[topics] - before[topics]; n != 1 {
		t.Errorf("streams refused for max_topics: %v, want the key's one", n)
	}
}
