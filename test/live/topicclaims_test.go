package live

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestLiveTopicTakeoversClaimed: with max_topics 4 held by anonymous
// topics, one key that opens a stream of a new answer, reads its first
// event and closes it, over and over, ends one anonymous topic each time
// for as many times as it may keep streams open (4 with
// max_streams_per_client off), within the takeover window; past that its
// new topics get the 503 an anonymous one gets, and no anonymous stream
// ends for them. Before, each of its new topics ended one, as many as it
// could send requests.
func TestLiveTopicTakeoversClaimed(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{
		"key " + KeyA, "max_topics 4", "max_streams_per_client off", "stream_heartbeat 1h", "cache player 1h",
	}}.Start(t)
	var anon []*LiveStream
	for len(anon) < 4 {
		s := OpenLive(t, nil, PlayerN(len(anon)))
		s.WantStream(t, "an anonymous stream of a new answer")
		s.NextEvent(t)
		anon = append(anon, s)
	}
	next := 4
	WantBusy(t, Send(t, "GET", PlayerN(next), "Accept: text/event-stream"), PlayerN(next))
	refused := 0
	for i := range 6 {
		target := PlayerN(100 + i)
		s := OpenLive(t, nil, target, WithKey(KeyA))
		if s.Resp.StatusCode == http.StatusServiceUnavailable {
			refused++
			s.Close()
			continue
		}
		s.WantStream(t, "the key's stream of a new answer")
		s.NextEvent(t)
		// The oldest anonymous topic of one viewer ends with its stream.
		if it := anon[i].NextEvent(t); !it.End {
			t.Fatalf("takeover %d: the oldest anonymous stream sent %+v, want its end", i, it)
		}
		s.Close()
		// An anonymous viewer takes the place back once the key's topic
		// has given it up.
		fixture.WaitFor(t, "the key's topic to give its place back", func() bool {
			r := OpenLive(t, nil, PlayerN(next))
			if r.Resp.StatusCode != http.StatusOK {
				r.Close()
				return false
			}
			r.NextEvent(t)
			next++
			anon = append(anon, r)
			return true
		})
	}
	if refused != 2 {
		t.Errorf("the key's new topics refused: %d of 6, want 2, past its 4 takeovers", refused)
	}
	got, _ := ScrapeAdmin(t)
	if n := got[`caddy_http_statusgate_streams_refused_total{reason="max_topics"}`]; n < 3 {
		// And the anonymous viewers that came back before a place was.
		t.Errorf("streams refused for max_topics: %v, want the anonymous one and the key's two at least", n)
	}
}

// TestLiveTopicBytesInHeldBytes: a topic's event of an answer over 16 KiB
// (20,000 bytes here) counts in held_bytes, as it does in topic_bytes; one
// of a small answer (status) counts in topic_bytes alone, bounded by
// max_topics. Before, events of up to 32 KiB counted in neither bound but
// topic_bytes.
func TestLiveTopicBytesInHeldBytes(t *testing.T) {
	be := NewBackend(t)
	be.Respond = func(u *url.URL) (int, []byte) {
		uuid, ok := strings.CutPrefix(u.Path, "/api/v1/player/")
		if !ok {
			return BackendResponse(u)
		}
		return 200, Envelope(`{"uuid":"` + uuid + `","name":"Alex_MC","pad":"` + strings.Repeat("x", 20_000) + `"}`)
	}
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{"stream_heartbeat 1h", "cache player 1h"}}.Start(t)
	gauges := func() (held, topics float64) {
		got, _ := ScrapeAdmin(t)
		return got[`caddy_http_statusgate_held_bytes{guard=""}`], got[`caddy_http_statusgate_topic_bytes{guard=""}`]
	}
	small := OpenLive(t, nil, "/api/v1/status")
	small.WantStream(t, "a stream of status")
	small.NextEvent(t)
	heads, smallTopic := gauges() // the stream's head alone
	if smallTopic == 0 || heads > 1000 {
		t.Fatalf("a topic of a small answer: topic_bytes %v, held_bytes %v; want the event in topic_bytes and the head alone held", smallTopic, heads)
	}
	large := OpenLive(t, nil, PlayerN(1))
	large.WantStream(t, "a stream of a 20 KB player")
	large.NextEvent(t)
	held, topics := gauges()
	event := topics - smallTopic
	if event < 20_000 || held < heads+event || held > 2*heads+event+1000 {
		t.Errorf("a topic of a 20 KB answer: its event %v bytes, held_bytes %v (the heads %v before); want the event and the heads", event, held, heads)
	}
}
