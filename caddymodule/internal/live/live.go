// Package live fans one backend answer out to every viewer of a live stream.
//
// Viewers of a live stream (server-sent events on the same URL as the JSON)
// all want the same thing: the answer a plain GET would get, whenever it
// changes. Asking the backend once per viewer would make 10,000 open pages
// 10,000 trips per snapshot interval; a Hub makes it one. Each topic (one
// answer: the guard, the endpoint and query, and the class of caller that
// decides its bytes) has one poller, started by its first subscriber and
// stopped when its last one leaves, so that nothing is polled when nobody
// listens. The poller's Fetch goes through the gateway's normal path, with
// its admission, queue, coalescing and micro-cache, and says when to ask
// again; each answer is published to every subscriber of the topic.
//
// Subscribers hold nothing shared: each has at most one pending event, and a
// newer one replaces it (latest wins), so a viewer that does not read costs
// one event's worth of memory, however long it stalls; the writer that
// serves it decides when to cut it off. An event's ID is a digest of the
// answer that ignores meta.updatedAt (the time the answer was written, which
// changes every time), so a subscriber is never sent the answer it has, and
// a client reconnecting with Last-Event-ID skips an unchanged answer.
//
// Close ends every subscription (a config reload: the streams of the old
// policy end, and their clients reconnect under the new one). Seats counts
// open streams against a total and a per-client bound, and a Hub's topics
// against a bound of their own, keyed callers first; a Meter bounds and
// counts the bytes the topics keep.
package live

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// ErrClosed refuses a subscription to a Hub that is closed.
var ErrClosed = errors.New("live: the hub is closed")

// Event is one answer as subscribers get it.
type Event struct {
	ID string // ID of the answer
	// Data is the answer; shared, never modified. Nil with an encoder,
	// whose Wire is all a subscriber writes: a topic keeps one copy of
	// its latest answer, not two.
	Data []byte
	// Wire is the event as the hub's encoder wrote it, once for every
	// subscriber; shared, never modified. Nil without an encoder.
	Wire []byte
	// Size is the answer's length: what is judged small or not
	// (hold.Small), whatever the framing adds.
	Size int
}

// Encoder writes an event for the wire, once per answer: what every
// subscriber's writer then writes as it is.
type Encoder func(ev Event) []byte

// Fetch gets a topic's answer on behalf of one of its subscribers, by (the
// Viewer.By it subscribed with), and says how long until it is worth asking
// again (at least MinInterval). It is called by the topic's poller alone,
// with a context that ends when the topic does. refused says the fetch was
// refused to by itself (over a limit of its own): the hub then ends that
// subscription, and asks again at once on behalf of another.
type Fetch func(ctx context.Context, by any) (answer []byte, next time.Duration, refused bool)

// Viewer is what a subscriber brings to a topic.
type Viewer struct {
	// LastID is the ID of the answer the subscriber has already (a
	// reconnect's Last-Event-ID), or empty.
	LastID string
	// Keyed says the subscriber is keyed: a new topic takes a keyed place
	// (a topic's subscribers are all of one class).
	Keyed bool
	// Owner is who a new topic's answers are charged to (Budget.Keep)
	// for as long as it lasts, when the subscriber starts it: its
	// opener.
	Owner any
	// Seat is the subscriber's seat, of the hub's Seats, whose client a
	// keyed topic that takes an anonymous one's place over claims the
	// takeover for, for Window; nil claims nothing. A pending seat (Take)
	// is settled (Settle) as the subscription is made, once every check
	// of the hub's has passed, and with a new topic's place, both or
	// neither: the subscription is refused with ErrFull when it cannot
	// be, and then nothing was taken over.
	Seat   *Place
	Window time.Duration
	// By is what a poll is charged to when it is made on this
	// subscriber's behalf: the topic's polls are charged to its
	// subscribers in turn, so that a topic costs its viewers what their
	// plain GETs would, and 10,000 viewers of one topic share its cost.
	By any
	// Answer, when not nil, is the answer the subscriber was given as it
	// subscribed, and Next when it is worth asking again: a new topic's
	// first event, so that its poller does not ask at once for what was
	// just fetched.
	Answer []byte
	Next   time.Duration
}

// MinInterval is the shortest wait between two fetches of a topic, whatever
// Fetch says: a bound on what one topic can cost.
const MinInterval = 50 * time.Millisecond

// Hub is a set of topics and their subscribers. The zero Hub is not ready:
// use New.
type Hub struct {
	encode  Encoder // nil: none
	seats   *Seats  // where each topic takes its place; nil: no bound
	meter   *Meter  // where each topic's latest event is charged; nil: none
	mu      sync.Mutex
	topics  map[string]*topic
	closed  bool
	wg      sync.WaitGroup // pollers
	polling atomic.Int32   // pollers running
}

// New returns an open Hub whose events encode writes for the wire (nil:
// Event.Wire stays nil), whose topics take their places from seats (nil:
// topics are not bounded) and keep their latest event within meter (nil:
// not bounded); hubs may share seats and a meter.
func New(encode Encoder, seats *Seats, meter *Meter) *Hub {
	return &Hub{encode: encode, seats: seats, meter: meter, topics: map[string]*topic{}}
}

// topic is one answer, its poller and its subscribers.
type topic struct {
	key    string
	cancel context.CancelFunc
	place  *Place // nil without seats
	subs   map[*Sub]struct{}
	keyed  bool   // its viewers are keyed: the class its answer is charged in
	owner  any    // Viewer.Owner of its opener: who its answers are charged to
	last   *Event // the latest answer; nil before the first
	give   func() // gives back what the hub's meter charged for last; nil: nothing
	ended  bool   // under hub.mu
}

// Sub is one subscription. Ready signals that an event is pending; Take
// takes it. Done is closed when the subscription ends from the hub's side
// (Close); the subscriber ends it with Leave.
type Sub struct {
	hub   *Hub
	t     *topic
	ready chan struct{} // cap 1: an event is pending
	done  chan struct{}

	// Under hub.mu.
	pending *Event
	lastID  string // of the last event taken or skipped
	left    bool
	by      any // Viewer.By
}

// Subscribe subscribes v to the topic key, starting its poller with the
// Fetch newFetch makes if the topic is new (only then: a Fetch may cost
// something to make, and most subscribers join a topic that exists). A new
// topic takes a place from the hub's seats, keyed if v is: ErrTopicsFull
// when there is none; its first event is v's Answer, if v has one, kept
// within the hub's meter: ErrNoRoom when it does not fit. Only then are
// v's seat and the topic's place settled, taking anonymous ones over
// (Viewer.Seat): a subscription refused ends nobody. The topic's latest
// answer, if any, is pending at once unless it is the one v has
// (v.LastID).
func (h *Hub) Subscribe(key string, v Viewer, newFetch func() Fetch) (*Sub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	t := h.topics[key]
	if t != nil && isClosed(t.place.Ended()) {
		h.end(t) // taken over by a keyed topic: its poller has not seen it yet
		t = nil
	}
	if t == nil {
		var place *Place
		if h.seats != nil {
			var err error
			if place, err = h.seats.takeTopic(v.Keyed, v.Seat); err != nil {
				return nil, err
			}
		}
		var first time.Duration
		t = &topic{key: key, place: place, subs: map[*Sub]struct{}{}, keyed: v.Keyed, owner: v.Owner}
		if v.Answer != nil {
			if !h.keep(t, h.event(v.Answer)) {
				place.Give()
				return nil, ErrNoRoom
			}
			first = v.Next
		}
		if err := settle(v.Seat, place, v.Window); err != nil {
			t.drop()
			place.Give()
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.cancel = cancel
		h.topics[key] = t
		h.wg.Add(1)
		go h.poll(ctx, t, newFetch(), first)
	} else if err := v.Seat.Settle(v.Window); err != nil {
		return nil, err
	}
	return h.join(t, v), nil
}

// Join subscribes v to the topic key if it is polled now (settling v's
// seat as Subscribe does), and returns nil otherwise: for a subscriber that
// fetches an answer to start a topic with (Viewer.Answer) only when there
// is none, and then calls Subscribe.
func (h *Hub) Join(key string, v Viewer) (*Sub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	t := h.topics[key]
	if t == nil || isClosed(t.place.Ended()) {
		return nil, nil
	}
	if err := v.Seat.Settle(v.Window); err != nil {
		return nil, err
	}
	return h.join(t, v), nil
}

// join adds v to t's subscribers. Under h.mu.
func (h *Hub) join(t *topic, v Viewer) *Sub {
	lastID := v.LastID
	if len(lastID) != idLen {
		lastID = "" // it could be no answer's ID: nothing to skip, and nothing to keep
	}
	s := &Sub{hub: h, t: t, ready: make(chan struct{}, 1), done: make(chan struct{}), lastID: lastID, by: v.By}
	t.subs[s] = struct{}{}
	t.place.SetViewers(len(t.subs))
	if t.last != nil {
		s.offer(t.last)
	}
	return s
}

// isClosed reports whether c is closed; a nil c never is.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// poll fetches t's answer until t ends, the first time after first, each
// on behalf of one of its subscribers (turn), and publishes each.
func (h *Hub) poll(ctx context.Context, t *topic, fetch Fetch, first time.Duration) {
	h.polling.Add(1)
	defer h.wg.Done()
	defer h.polling.Add(-1)
	if ended := t.place.Ended(); ended != nil {
		// A keyed topic that takes t's place over ends t at once, with
		// every subscription and the fetch under way.
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			select {
			case <-ended:
				h.mu.Lock()
				h.end(t)
				h.mu.Unlock()
			case <-ctx.Done():
			}
		}()
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		s, ok := h.turn(t)
		if !ok {
			return // no subscriber left: the topic has ended
		}
		answer, next, refused := fetch(ctx, s.by)
		if ctx.Err() != nil {
			return // what a cancelled fetch answers is nobody's
		}
		if refused {
			// Over a limit of its own: its stream ends (its reconnect is
			// refused as its plain GET would be), and another subscriber
			// is asked at once.
			h.remove(s, true)
			timer.Reset(0)
			continue
		}
		h.publish(t, h.event(answer))
		timer.Reset(max(next, MinInterval))
	}
}

// event is answer as subscribers get it.
func (h *Hub) event(answer []byte) *Event {
	ev := &Event{ID: ID(answer), Data: answer, Size: len(answer)}
	if h.encode != nil {
		ev.Wire, ev.Data = h.encode(*ev), nil
	}
	return ev
}

// turn is the subscriber of t whose turn it is to be charged a poll: any
// of them, as the map gives them (in no fixed order, so that every viewer
// pays its part over time), or none when t has ended.
func (h *Hub) turn(t *topic) (*Sub, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range t.subs {
		return s, true
	}
	return nil, false
}

// remove takes s out of its topic, once, closing its Done when the hub is
// the one ending it (a subscriber that leaves knows already); the topic's
// last subscriber to go stops it.
func (h *Hub) remove(s *Sub, closeDone bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.left {
		return
	}
	if closeDone {
		close(s.done)
	}
	s.left = true
	s.pending = nil
	t := s.t
	delete(t.subs, s)
	t.place.SetViewers(len(t.subs))
	if len(t.subs) == 0 {
		h.end(t)
	}
}

// publish makes ev t's latest answer and offers it to every subscriber;
// t ends, with its subscriptions, when ev does not fit the hub's meter:
// its viewers reconnect, and are refused while there is no room.
func (h *Hub) publish(t *topic, ev *Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.ended {
		return
	}
	if !h.keep(t, ev) {
		h.end(t)
		return
	}
	for s := range t.subs {
		s.offer(ev)
	}
}

// keep makes ev t's latest answer, charged to the hub's meter in place of
// the one before, or reports that it does not fit: t then keeps nothing.
// Under h.mu, or before t is known to anyone else.
func (h *Hub) keep(t *topic, ev *Event) bool {
	t.drop()
	give, ok := h.meter.keep(t, ev)
	if !ok {
		return false
	}
	t.last, t.give = ev, give
	return true
}

// drop gives back what t's latest answer was charged, and forgets it.
// Under h.mu.
func (t *topic) drop() {
	if t.give != nil {
		t.give()
	}
	t.last, t.give = nil, nil
}

// offer makes ev pending unless the subscriber has it; a pending event not
// yet taken is replaced. Under hub.mu.
func (s *Sub) offer(ev *Event) {
	if ev.ID == s.lastID {
		return
	}
	s.lastID = ev.ID
	s.pending = ev
	select {
	case s.ready <- struct{}{}:
	default: // already signalled
	}
}

// Ready is signalled when an event is pending.
func (s *Sub) Ready() <-chan struct{} { return s.ready }

// Done is closed when the hub ends the subscription (Close, a poll refused
// to the subscriber, a keyed topic taking the place over).
func (s *Sub) Done() <-chan struct{} { return s.done }

// Take returns the pending event, if any, and clears it.
func (s *Sub) Take() (Event, bool) {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	ev := s.pending
	s.pending = nil
	if ev == nil {
		return Event{}, false
	}
	return *ev, true
}

// Leave ends the subscription; the topic's last subscriber to leave stops
// its poller. Leave may be called more than once.
func (s *Sub) Leave() { s.hub.remove(s, false) }

// end ends t: its poller stops, its subscriptions end (each Done is
// closed), and it gives its place back. Under h.mu; end may be called more
// than once.
func (h *Hub) end(t *topic) {
	if t.ended {
		return
	}
	t.ended = true
	if h.topics[t.key] == t {
		delete(h.topics, t.key)
	}
	t.cancel()
	for s := range t.subs {
		close(s.done)
		s.left = true
		s.pending = nil
	}
	t.subs = nil
	t.drop()
	t.place.Give()
}

// Topics is how many topics are polled now.
func (h *Hub) Topics() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics)
}

// Polling is how many pollers are running: a topic's goes on for a moment
// after its last subscriber leaves, until it sees that it has ended.
func (h *Hub) Polling() int { return int(h.polling.Load()) }

// Close ends every subscription (each Done is closed), stops every poller
// and refuses new subscriptions; it returns when the pollers have returned.
func (h *Hub) Close() {
	h.End()
	h.wg.Wait()
}

// End ends every topic, and with them every subscription, and refuses new
// ones, without waiting for the polls under way: a poll at the backend runs
// on until the backend is done with it (its trip is the backend's), and
// whoever ends a hub in a hurry (a config that a newer one replaced) must
// not wait for that. Close waits.
func (h *Hub) End() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for _, t := range h.topics {
		h.end(t)
	}
}

// ID is an answer's event ID: a digest of the answer without the value of
// its meta.updatedAt, which says when the answer was written and so differs
// between two answers that say the same. 128 bits: a viewer who could make
// two answers collide would only keep a viewer from seeing one of them.
func ID(answer []byte) string {
	d := sha256.New()
	if v := gjson.GetBytes(answer, "meta.updatedAt"); v.Index > 0 {
		d.Write(answer[:v.Index])
		d.Write(answer[v.Index+len(v.Raw):])
	} else {
		d.Write(answer)
	}
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(d.Sum(sum[:0])[:idBytes])
}

// idBytes is how many bytes of the digest an ID has, and idLen its length.
const (
	idBytes = 16
	idLen   = (idBytes*8 + 5) / 6
)
