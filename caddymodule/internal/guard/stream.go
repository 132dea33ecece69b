package guard

// This file is the guard's door for live streams: a handler's streams ask
// it for a stream (Streams.Open), which takes the stream's seat, charges its
// request's head to the viewer's share of the held bytes and joins or starts
// its topic; each event is then handed to the viewer within that share
// (Stream.Send).

import (
	"cmp"
	"errors"
	"net/http"
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/live"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
)

// Streams is one handler's live streams at its guard: the topics they
// watch (a hub of the handler's own, ended with it on a reload), and the
// guard's seats, topic places and held bytes, which count every handler's
// streams across reloads. The zero Streams is not ready: use Guard.Streams.
type Streams struct {
	g         *Guard
	hub       *live.Hub
	perClient int           // StreamsConfig.PerClient
	window    time.Duration // a keyed takeover's claim: the least a stream lives
	metrics   *metrics.Metrics
}

// StreamsConfig is what a handler's streams are opened with.
type StreamsConfig struct {
	// PerClient bounds the streams one client (an address or prefix, or a
	// key) has open at the guard: the handler's max_streams_per_client; 0:
	// no bound. The guard's seats count each client once, whatever each
	// handler's bound is.
	PerClient int
	// Lifetime is the longest a stream lives (stream_lifetime, or its
	// default when it is off). A keyed stream's takeover of an anonymous
	// seat or topic counts against its key for the least a stream lives,
	// Lifetime less a tenth (live.Seats), so that a key whose streams live
	// their lifetime has its claims back as they end and reconnect, and
	// one that closes them sooner cannot take another seat over in their
	// place.
	Lifetime time.Duration
	// Encode writes each answer as an event for the wire, once for every
	// stream of its topic.
	Encode live.Encoder
	// Metrics counts the streams refused, by reason; nil counts nothing.
	Metrics *metrics.Metrics
}

// Streams are the live streams of the handler whose guard g is, as c
// says: ended (End, Close) with the handler.
func (g *Guard) Streams(c StreamsConfig) *Streams {
	return &Streams{
		g:         g,
		hub:       live.New(c.Encode, g.seats, g.topics),
		perClient: c.PerClient,
		window:    c.Lifetime - c.Lifetime/10,
		metrics:   c.Metrics,
	}
}

// End ends every stream at once, and refuses new ones, without waiting for
// the topics' polls under way: their clients reconnect, to the config that
// replaces this one.
func (s *Streams) End() { s.hub.End() }

// Close is End, and waits for the topics' polls to return.
func (s *Streams) Close() { s.hub.Close() }

// Viewer is what a stream's caller brings besides its ticket.
type Viewer struct {
	// Head is what the stream's request keeps for as long as the stream
	// lasts, in bytes (its target and headers): charged to the caller's
	// share of the held bytes until the stream is closed.
	Head int64
	// LastID is the ID of the answer the viewer has (Last-Event-ID), or "".
	LastID string
	// By is what a poll of the topic is charged to when it is this
	// viewer's turn (live.Viewer.By).
	By any
}

// Open opens a stream of the answer t describes for its caller, or refuses
// it, in this order, so that a stream refused ends nobody else's:
//
//   - the caller's share of the held bytes spent: 429 or 503, as Fetch;
//   - a seat: 429 past the handler's per-client bound, 503 when every seat
//     is taken (keyed first: a keyed caller's seat past the bound is
//     pending, and ends nobody until the stream has passed every check);
//   - the request's head charged to the caller's share: 429 or 503;
//   - the topic (the answer's share key, or the one its class would have,
//     and the path the envelopes show): joined as it is if it is polled
//     already; otherwise first, the viewer's own fetch (its verdict, when
//     not zero, is the stream's refusal, as its plain GET's would be),
//     makes the topic's first answer (504 if the viewer left meanwhile:
//     the answer is nobody's first event), and poll its poller's Fetch;
//   - a new topic's place (keyed first, as the seats) and its first
//     answer kept within the held bytes of the viewer's class: 503;
//   - last, as the topic is joined or started, a keyed caller's pending
//     seat, and its new topic's place, taken over (an anonymous stream,
//     an anonymous topic ends), each claimed for the takeover window:
//     503 when every seat (topic) is keyed or the key took over its
//     share within the window. A refusal before this ends nobody.
//
// Each refusal of the guard's own is counted in the metrics' streams
// refused. The stream is the caller's to Close.
func (s *Streams) Open(r *http.Request, t *Ticket, v Viewer, first func() (answer []byte, next time.Duration, refused Verdict), poll func() live.Fetch) (*Stream, Verdict) {
	g, who := s.g, t.Caller
	if err := g.check(who); err != nil {
		s.metrics.StreamRefused(metrics.StreamRefusedHeld)
		return nil, HeldRefusal(err)
	}
	seat, err := g.seats.TakeUpTo(who.Holder, who.Keyed, s.perClient)
	if err != nil {
		if errors.Is(err, live.ErrClientFull) {
			s.metrics.StreamRefused(metrics.StreamRefusedPerClient)
			return nil, TooMany(err)
		}
		s.metrics.StreamRefused(metrics.StreamRefusedTotal)
		return nil, Busy(err, "1")
	}
	st := &Stream{g: g, streams: s, who: who, seat: seat}
	// Charged before anything of the topic is done, so that a stream
	// refused for it ends nobody else's; an opening fetch, like a plain
	// GET, starts only while the viewer holds less than half its share.
	if err := g.held.Pin(who.Holder, who.Held, v.Head); err != nil {
		st.Close()
		s.metrics.StreamRefused(metrics.StreamRefusedHeld)
		return nil, HeldRefusal(err)
	}
	st.head = v.Head

	// A viewer joins a topic polled already as it is: what it gets is the
	// answer the topic's polls (charged to its viewers in turn) keep
	// current, at no cost to the backend, as a cached answer is.
	topic := cmp.Or(t.Share, g.shareKey(r, who.Filtered(), t.Upstream)) + " " + t.Path
	lv := live.Viewer{LastID: v.LastID, Keyed: who.Keyed, Owner: who, Seat: seat, Window: s.window, By: v.By}
	st.sub, err = s.hub.Join(topic, lv)
	opening := st.sub == nil && err == nil
	if opening {
		var refused Verdict
		lv.Answer, lv.Next, refused = first()
		if refused.Status != 0 {
			st.Close()
			return nil, refused
		}
		if err := r.Context().Err(); err != nil {
			// The viewer left while its topic's first answer came: that
			// answer (the wait's end, a 504) is nobody's first event.
			st.Close()
			return nil, ContextRefusal(err)
		}
		// The hub takes an anonymous seat (and topic) over for a keyed
		// viewer only once the topic's own checks have passed, as Join
		// does: a stream refused for its topic ends nobody.
		st.sub, err = s.hub.Subscribe(topic, lv, poll)
	}
	if err != nil {
		switch {
		case errors.Is(err, live.ErrFull):
			s.metrics.StreamRefused(metrics.StreamRefusedTotal)
		case errors.Is(err, live.ErrTopicsFull):
			s.metrics.StreamRefused(metrics.StreamRefusedTopics)
		case errors.Is(err, live.ErrNoRoom):
			// The topic's first answer finds no room in the held bytes
			// of the viewer's class: as a stream's head that finds none.
			s.metrics.StreamRefused(metrics.StreamRefusedHeld)
		default:
			s.metrics.StreamRefused(metrics.StreamRefusedReload)
		}
		st.Close()
		return nil, Busy(err, "1")
	}
	return st, Verdict{}
}

// Stream is one live stream open at the guard (Streams.Open): its seat,
// its head's bytes in its caller's share, and its subscription to its
// topic, all given back by Close.
type Stream struct {
	g       *Guard
	streams *Streams
	who     Caller
	seat    *live.Place
	head    int64     // pinned to who's share; 0 until it is
	sub     *live.Sub // nil until the topic is joined
}

// Ready is signalled when an event is pending: Send writes it.
func (st *Stream) Ready() <-chan struct{} { return st.sub.Ready() }

// Done is closed when the stream's topic ended: a reload, a poll refused
// to its viewer, a keyed topic that took its place over, an answer that no
// longer fits the held bytes. The stream ends, and its client reconnects.
func (st *Stream) Done() <-chan struct{} { return st.sub.Done() }

// TakenOver is closed when a keyed caller took the stream's seat over: the
// stream ends, and its client reconnects.
func (st *Stream) TakenOver() <-chan struct{} { return st.seat.Ended() }

// Send hands the pending event, if any, to write (its bytes as the wire
// carries them, encoded once for every stream), and reports whether one
// was. The event is held for the client until it has taken it, within the
// caller's share of the held bytes, as a plain GET's answer is; its bytes
// are its topic's, charged already, and lent (hold.Budget.LendEvent),
// judged small or not on its answer, not its framing. Past the share
// nothing is written: the error says so, the refusal is counted, and the
// stream should end (its reconnect is refused until the client has taken
// what it holds). Otherwise the error is write's.
func (st *Stream) Send(pw *progress.Writer, write func(wire []byte) error) (sent bool, err error) {
	ev, ok := st.sub.Take()
	if !ok {
		return false, nil
	}
	claim, err := st.g.held.LendEvent(st.who.Holder, st.who.Held, ev.Wire, ev.Size)
	held, err := hand(pw, claim, err, func() error { return write(ev.Wire) })
	if !held {
		st.streams.metrics.StreamRefused(metrics.StreamRefusedHeld)
		return false, err
	}
	return true, err
}

// Close gives back what the stream holds: its topic's subscription, its
// head's bytes and its seat.
func (st *Stream) Close() {
	if st.sub != nil {
		st.sub.Leave()
	}
	if st.head != 0 {
		st.g.held.Unpin(st.who.Holder, st.who.Held, st.head)
	}
	st.seat.Give()
}
