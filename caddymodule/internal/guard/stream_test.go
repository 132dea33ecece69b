package guard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/live"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
	"github.com/statusgate/statusgate/internal/fixture"
)

// streamsOf are the streams of a handler at a guard of its own with limits
// l, at most perClient per client (0: no bound), closed with the test.
func streamsOf(t *testing.T, l Limits, perClient int) (*Guard, *Streams) {
	t.Helper()
	g, _ := join(t, form{"1.0", false}, newGameServer(t, false), l)
	s := g.Streams(StreamsConfig{PerClient: perClient, Lifetime: time.Hour, Encode: func(ev live.Event) []byte {
		return append([]byte("data: "), ev.Data...)
	}})
	t.Cleanup(s.Close)
	return g, s
}

// answer is a stream's opening fetch that answers body.
func answer(body string) func() ([]byte, time.Duration, Verdict) {
	return func() ([]byte, time.Duration, Verdict) { return []byte(body), time.Hour, Verdict{} }
}

// idle is a topic's poller that is never asked: its first answer lasts an
// hour.
func idle() live.Fetch {
	return func(ctx context.Context, _ any) ([]byte, time.Duration, bool) { return nil, time.Hour, false }
}

// openAs asks s for a stream of target for who, whose request keeps head
// bytes, with first as its opening fetch (the status answer when nil), from
// a request under ctx.
func openAs(ctx context.Context, s *Streams, who Caller, target string, head int64, first func() ([]byte, time.Duration, Verdict)) (*Stream, Verdict) {
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if first == nil {
		first = answer(statusBody)
	}
	t := &Ticket{Station: status(time.Minute), Caller: who, Path: r.URL.Path}
	return s.Open(r, t, Viewer{Head: head, By: who}, first, idle)
}

func open(s *Streams, who Caller, target string) (*Stream, Verdict) {
	return openAs(context.Background(), s, who, target, 100, nil)
}

var (
	viewerAt = func(addr string) Caller { return Caller{Holder: addr} } // an anonymous viewer at addr
	staff    = Caller{Holder: "key staff", Keyed: true, Authenticated: true, Held: hold.Share{Keyed: true}}
)

// TestStreamSeats: past the handler's max_streams_per_client a client's
// stream is refused with 429, past max_streams with 503 (each to ask again
// in a second), a key is a client of its own, and a stream that ends gives
// its seat back.
func TestStreamSeats(t *testing.T) {
	_, s := streamsOf(t, Limits{Streams: 2}, 1)
	a, v := open(s, viewerAt("198.51.100.1"), "/api/v1/status")
	if a == nil {
		t.Fatalf("the first stream refused: %+v", v)
	}
	if st, v := open(s, viewerAt("198.51.100.1"), "/api/v1/status"); st != nil || v.Status != http.StatusTooManyRequests || v.RetryAfter != "1" {
		t.Fatalf("the client's second stream: %d, Retry-After %q", v.Status, v.RetryAfter)
	}
	if st, v := open(s, staff, "/api/v1/status"); st == nil {
		t.Fatalf("the key's stream refused: %+v", v)
	}
	if st, v := open(s, viewerAt("198.51.100.7"), "/api/v1/status?history=true"); st != nil || v.Status != http.StatusServiceUnavailable || v.RetryAfter != "1" {
		t.Fatalf("past max_streams: %d, Retry-After %q", v.Status, v.RetryAfter)
	}
	a.Close()
	if n := s.counts().Open; n != 1 {
		t.Fatalf("%d streams open after one of two closed", n)
	}
	if st, v := open(s, viewerAt("198.51.100.1"), "/api/v1/status"); st == nil {
		t.Fatalf("after the first stream ended: %+v", v)
	}
}

// TestStreamRefusalGivesBack: a stream refused after the guard took
// something for it (its seat, its head's bytes, its topic's place) gives
// it all back, and ends nobody: a keyed stream refused by its own opening
// fetch takes no anonymous seat over.
func TestStreamRefusalGivesBack(t *testing.T) {
	// A client's share of the held bytes: max_response, 64 KiB.
	g, s := streamsOf(t, Limits{MaxHeld: 1 << 20, MaxResponse: 64 << 10, Streams: 1, Topics: 1}, 0)
	refused := func() ([]byte, time.Duration, Verdict) { return nil, 0, TooMany(nil) }
	left, leave := context.WithCancel(context.Background())
	for _, c := range []struct {
		name   string
		who    Caller
		head   int64
		first  func() ([]byte, time.Duration, Verdict)
		status int
	}{
		{"a head past the client's share", viewerAt("198.51.100.1"), 65 << 10, nil, http.StatusTooManyRequests},
		{"its opening fetch refused", viewerAt("198.51.100.1"), 100, refused, http.StatusTooManyRequests},
		{"its viewer gone while the topic's first answer came", viewerAt("198.51.100.1"), 100, func() ([]byte, time.Duration, Verdict) {
			leave()
			return []byte(statusBody), time.Hour, Verdict{}
		}, http.StatusGatewayTimeout},
	} {
		ctx := context.Background()
		if c.status == http.StatusGatewayTimeout {
			ctx = left
		}
		if st, v := openAs(ctx, s, c.who, "/api/v1/status", c.head, c.first); st != nil || v.Status != c.status {
			t.Errorf("%s: %d, want %d", c.name, v.Status, c.status)
		}
		if st, held := s.counts(), g.held.Held(); st.Open != 0 || st.Topics != 0 || held != 0 {
			t.Fatalf("%s: %d streams, %d topics, %d bytes held after the refusal", c.name, st.Open, st.Topics, held)
		}
	}

	// Every seat and topic anonymous: a keyed stream whose own fetch is
	// refused ends nobody; one that is served takes the seat over.
	a, v := open(s, viewerAt("198.51.100.1"), "/api/v1/status")
	if a == nil {
		t.Fatalf("the anonymous stream refused: %+v", v)
	}
	if st, v := openAs(context.Background(), s, staff, "/api/v1/status", 100, refused); st != nil || v.Status != http.StatusTooManyRequests {
		t.Fatalf("the keyed stream refused by its own fetch: %d", v.Status)
	}
	select {
	case <-a.TakenOver():
		t.Fatal("a keyed stream refused by its own fetch took the anonymous seat over")
	case <-a.Done():
		t.Fatal("a keyed stream refused by its own fetch ended the anonymous topic")
	default:
	}
	keyed, v := open(s, staff, "/api/v1/status")
	if keyed == nil {
		t.Fatalf("the keyed stream refused with every place anonymous: %+v", v)
	}
	fixture.Recv(t, a.TakenOver(), "the anonymous seat taken over")
	fixture.Recv(t, a.Done(), "the anonymous topic's end: its place taken over")
	a.Close()
	keyed.Close()
	if st, held := s.counts(), g.held.Held(); st.Open != 0 || st.Topics != 0 || held != 0 {
		t.Fatalf("%d streams, %d topics, %d bytes held after every stream closed", st.Open, st.Topics, held)
	}

	// A seat, and no topic's place: the seat and the head given back.
	t.Run("max_topics", func(t *testing.T) {
		g, s := streamsOf(t, Limits{Streams: 2, Topics: 1}, 0)
		if st, v := open(s, viewerAt("198.51.100.1"), "/api/v1/status"); st == nil {
			t.Fatalf("the first topic refused: %+v", v)
		}
		if st, v := open(s, viewerAt("198.51.100.2"), "/api/v1/status?history=true"); st != nil || v.Status != http.StatusServiceUnavailable {
			t.Errorf("past max_topics: %d, want 503", v.Status)
		}
		if st, held := s.counts(), g.held.Held(); st.Open != 1 || st.Topics != 1 || held != 100 {
			t.Errorf("past max_topics: %d streams, %d topics, %d bytes held, want the first stream's alone", st.Open, st.Topics, held)
		}
	})
}

// TestStreamTopicJoinedAsItIs: a stream of an answer polled already joins
// its topic without an opening fetch, and gets the topic's answer at once;
// a caller of another class (a key, whose answer is not filtered) has a
// topic of its own.
func TestStreamTopicJoinedAsItIs(t *testing.T) {
	_, s := streamsOf(t, Limits{}, 0)
	first, v := open(s, viewerAt("198.51.100.1"), "/api/v1/status")
	if first == nil {
		t.Fatalf("refused: %+v", v)
	}
	fetched := false
	second, v := openAs(context.Background(), s, viewerAt("198.51.100.2"), "/api/v1/status", 100, func() ([]byte, time.Duration, Verdict) {
		fetched = true
		return []byte(statusBody), time.Hour, Verdict{}
	})
	if second == nil || fetched {
		t.Fatalf("the second viewer of one answer: %+v, fetched %v", v, fetched)
	}
	fixture.Recv(t, second.Ready(), "the topic's answer")
	var got []byte
	if sent, err := second.Send(progress.New(httptest.NewRecorder(), 0), func(wire []byte) error { got = wire; return nil }); !sent || err != nil {
		t.Fatalf("the topic's answer: sent %v, %v", sent, err)
	}
	if string(got) != "data: "+statusBody {
		t.Errorf("the joining viewer got %q", got)
	}
	if keyed, _ := open(s, staff, "/api/v1/status"); keyed == nil || s.counts().Topics != 2 {
		t.Errorf("a key's stream of the same path: %d topics, want a topic of its class", s.counts().Topics)
	}
}

// TestStreamPollerEndsWithItsViewers: many viewers of one answer share one
// topic, opened by the first viewer's fetch alone and polled for all of
// them; once the last leaves nothing is polled, and every seat is given
// back.
func TestStreamPollerEndsWithItsViewers(t *testing.T) {
	_, s := streamsOf(t, Limits{}, 0)
	var firsts, polls atomic.Int32
	first := func() ([]byte, time.Duration, Verdict) {
		firsts.Add(1)
		return []byte(statusBody), time.Millisecond, Verdict{}
	}
	poll := func() live.Fetch {
		return func(context.Context, any) ([]byte, time.Duration, bool) {
			polls.Add(1)
			return []byte(statusBody), time.Millisecond, false
		}
	}
	viewers := make([]*Stream, 20)
	for i := range viewers {
		who := viewerAt(fmt.Sprintf("198.51.100.%d", i+1))
		r := httptest.NewRequest(http.MethodGet, "/api/v1/status", nil)
		st, v := s.Open(r, &Ticket{Station: status(time.Minute), Caller: who, Path: r.URL.Path}, Viewer{Head: 100, By: who}, first, poll)
		if st == nil {
			t.Fatalf("viewer %d refused: %+v", i, v)
		}
		viewers[i] = st
	}
	if c := s.counts(); c.Topics != 1 || c.Open != 20 || firsts.Load() != 1 {
		t.Fatalf("20 viewers of one answer: %d topics, %d streams, %d opening fetches", c.Topics, c.Open, firsts.Load())
	}
	fixture.WaitFor(t, "the topic polled for its viewers", func() bool { return polls.Load() > 0 })
	for _, st := range viewers {
		st.Close()
	}
	fixture.WaitFor(t, "the poller's end", func() bool { c := s.counts(); return c.Polling == 0 && c.Open == 0 && c.Topics == 0 })
}

// TestStreamSendWithinShare: an event is handed to its viewer within the
// viewer's share of the held bytes, beside the stream's head: past it
// nothing is written and the stream should end; within it the event's
// bytes, which its topic keeps, are lent, adding nothing to what is held.
func TestStreamSendWithinShare(t *testing.T) {
	// A client's share: max_response, 64 KiB; the event, 30 KB, is no
	// small answer.
	g, s := streamsOf(t, Limits{MaxHeld: 1 << 20, MaxResponse: 64 << 10}, 0)
	big := fmt.Sprintf(`{"ok":true,"data":{"pad":%q},"meta":{}}`, strings.Repeat("x", 30_000))
	for _, c := range []struct {
		head int64
		sent bool
	}{{40 << 10, false}, {100, true}} {
		addr := fmt.Sprintf("198.51.100.%d", c.head%250)
		st, v := openAs(context.Background(), s, viewerAt(addr), "/api/v1/player/1", c.head, answer(big))
		if st == nil {
			t.Fatalf("head %d: refused %+v", c.head, v)
		}
		fixture.Recv(t, st.Ready(), "the topic's answer")
		before := g.held.Held()
		var during int64
		written := false
		sent, err := st.Send(progress.New(httptest.NewRecorder(), 0), func([]byte) error {
			written, during = true, g.held.Held()
			return nil
		})
		if sent != c.sent || written != c.sent || (err == nil) != c.sent {
			t.Errorf("head %d: sent %v, written %v, %v", c.head, sent, written, err)
		}
		if !c.sent && !errors.Is(err, hold.ErrClientFull) {
			t.Errorf("head %d: %v, want the client's share spent", c.head, err)
		}
		if c.sent && during != before {
			t.Errorf("held %d while the event was written, %d before: a lent event's bytes counted twice", during, before)
		}
		st.Close()
	}
}

// TestKeyedStreamRefusedLateEndsNobody: with every seat anonymous, a keyed
// stream of a new topic that the topic refuses (its first answer finds no
// room in the key's share of the held bytes; max_topics reached, and the
// key took over its share of topics within the window) is refused with
// 503, and takes no anonymous seat over for it: every anonymous stream
// lives on, and everything the keyed one took is given back.
func TestKeyedStreamRefusedLateEndsNobody(t *testing.T) {
	// The anonymous streams that fill every seat, of one topic; and
	// whether any of them ended.
	fill := func(t *testing.T, s *Streams, n int) []*Stream {
		t.Helper()
		var anon []*Stream
		for i := range n {
			st, v := open(s, viewerAt(fmt.Sprintf("198.51.100.%d", 10+i)), "/api/v1/status")
			if st == nil {
				t.Fatalf("anonymous stream %d refused: %+v", i, v)
			}
			anon = append(anon, st)
		}
		return anon
	}
	livesOn := func(t *testing.T, anon []*Stream) {
		t.Helper()
		for i, a := range anon {
			select {
			case <-a.TakenOver():
				t.Errorf("anonymous stream %d's seat taken over for a keyed stream that was refused", i)
			case <-a.Done():
				t.Errorf("anonymous stream %d's topic ended for a keyed stream that was refused", i)
			default:
			}
		}
	}

	t.Run("no room for its topic's first answer", func(t *testing.T) {
		// A client's share of the held bytes: max_response, 64 KiB; the
		// keyed topic's first answer, 100 KB, is charged to the key's.
		// Every seat and the only topic are anonymous.
		g, s := streamsOf(t, Limits{MaxHeld: 1 << 20, MaxResponse: 64 << 10, Streams: 2, Topics: 1}, 0)
		anon := fill(t, s, 2)
		big := fmt.Sprintf(`{"ok":true,"data":{"pad":%q},"meta":{}}`, strings.Repeat("x", 100_000))
		if st, v := openAs(context.Background(), s, staff, "/api/v1/player/1", 100, answer(big)); st != nil || v.Status != http.StatusServiceUnavailable || v.RetryAfter != "1" {
			t.Fatalf("a keyed topic whose first answer finds no room: %d, Retry-After %q, want 503", v.Status, v.RetryAfter)
		}
		livesOn(t, anon)
		if c, held := s.counts(), g.held.Held(); c.Open != 2 || c.Topics != 1 || held != 200 {
			t.Errorf("after the refusal: %d streams, %d topics, %d bytes held; want the anonymous streams' alone", c.Open, c.Topics, held)
		}
		// A keyed stream that is served still takes a seat and the topic
		// over.
		keyed, v := open(s, staff, "/api/v1/status")
		if keyed == nil {
			t.Fatalf("a keyed stream with every place anonymous: %+v", v)
		}
		fixture.Recv(t, anon[0].TakenOver(), "the oldest anonymous seat taken over")
		fixture.Recv(t, anon[1].Done(), "the anonymous topic taken over")
	})

	t.Run("max_topics, its topic takeovers spent", func(t *testing.T) {
		// One stream per client: the key takes over one topic, and one
		// seat, within the window (an hour).
		_, s := streamsOf(t, Limits{Streams: 2, Topics: 1}, 1)
		first := fill(t, s, 1)
		keyed, v := open(s, staff, "/api/v1/status")
		if keyed == nil {
			t.Fatalf("the key's first topic, with a seat free: %+v", v)
		}
		fixture.Recv(t, first[0].Done(), "the anonymous topic taken over")
		first[0].Close()
		keyed.Close()
		fixture.WaitFor(t, "every place given back", func() bool { c := s.counts(); return c.Open == 0 && c.Topics == 0 })

		anon := fill(t, s, 2)
		if st, v := open(s, staff, "/api/v1/status"); st != nil || v.Status != http.StatusServiceUnavailable || v.RetryAfter != "1" {
			t.Fatalf("a keyed topic past its topic takeovers: %d, Retry-After %q, want 503", v.Status, v.RetryAfter)
		}
		livesOn(t, anon)
		if c := s.counts(); c.Open != 2 || c.Topics != 1 {
			t.Errorf("after the refusal: %d streams, %d topics; want the anonymous ones alone", c.Open, c.Topics)
		}
	})
}
