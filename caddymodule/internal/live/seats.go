package live

import (
	"cmp"
	"container/list"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrFull refuses a stream past the most open at once.
	ErrFull = errors.New("live: as many streams are open as may be")
	// ErrClientFull refuses a stream past the most one client has open.
	ErrClientFull = errors.New("live: the client has as many streams open as it may")
	// ErrTopicsFull refuses a new topic past the most polled at once.
	ErrTopicsFull = errors.New("live: as many topics are polled as may be")
)

// Seats counts open streams, in all and per client (an address or prefix,
// or a key's name), and the topics polled for them, against their bounds: a
// stream costs little, and a topic a poller and a trip per interval, but a
// client that opens them without end must not take every one.
//
// Keyed first: a keyed taker (a caller whose key opens the endpoint, the
// operator's) is never refused a seat or a topic while anonymous takers
// hold one. Past the bound, the anonymous place that costs least to end
// ends (its Ended is closed), and the keyed taker takes it over: for a
// seat, the oldest anonymous stream, whose client reconnects; for a topic,
// the anonymous topic with the fewest viewers, the oldest of those. So the
// bounds hold for everyone together, no place is kept idle for keyed
// callers who may never come, and an anonymous flood that fills every place
// cannot lock the operator out. A keyed taker is refused only when keyed
// takers hold every place (or, for a seat, when its key has its share).
//
// A keyed seat past the bound ends nobody until its stream has passed every
// check of its own (Take gives it pending, Settle takes the anonymous seat
// over), and one client takes over at most its share of seats (perClient,
// DefaultTakeovers without one) within a window: each takeover is claimed
// for the window (the least a stream lives, so that a stream that lives its
// lifetime has its claim back when it ends), however soon the stream
// closes. So a keyed caller that is refused ends nothing, and one that opens
// and closes streams without end ends no more than it could keep open. A
// topic taken over is claimed the same way, by the client whose stream
// starts the keyed topic, within the same window and up to the same share,
// counted apart from its seats: a key that churns new topics ends no more
// anonymous topics than it could keep streams open. A keyed topic's place
// past the bound is pending too: a Hub settles it with the seat of the
// stream that starts the topic, both or neither, once the topic's first
// answer is kept, so that a stream refused for its topic ends no seat, and
// one refused for its seat no topic.
//
// Memory is one map entry per client with a stream open, and one per keyed
// client with a claim. Safe for concurrent use.
type Seats struct {
	mu                        sync.Mutex
	max, perClient, maxTopics int // 0: no bound
	streams, topics           ledger
	by                        map[string]int         // open streams per client, yielded and pending ones included
	claims, topicClaims       map[string][]time.Time // per keyed client, when each of its takeovers' claims ends: of seats, of topics
	now                       func() time.Time       // the clock of the claims; tests set it
}

// DefaultTakeovers is how many seats one client may take over within a
// window when there is no per-client bound: max_streams_per_client's
// default.
const DefaultTakeovers = 4

// ledger is one kind of place, seats or topics: how many are held, and the
// anonymous ones in the order they were taken, oldest first, for a keyed
// taker to end one.
type ledger struct {
	held int
	anon list.List // of *Place
}

// Place is a stream's seat or a topic's place, taken from Seats. Give it
// back with Give when the stream or topic ends; Ended is closed when a
// keyed taker took it over, and the stream or topic should then end.
type Place struct {
	s      *Seats
	l      *ledger
	client string // a seat's client; "" for a topic
	// perClient is the seat's client's bound when it was taken (TakeUpTo),
	// which bounds its takeovers too.
	perClient int
	keyed     bool
	viewers   atomic.Int32 // a topic's subscribers; 1 for a seat
	ended     chan struct{}

	// Under s.mu.
	elem           *list.Element // in l.anon; nil for a keyed place
	yielded, given bool
	pending        bool // a keyed seat or topic past the bound, not yet settled: not in l.held
}

// NewSeats returns Seats for at most max streams, perClient per client, and
// maxTopics topics; 0 is no bound.
func NewSeats(max, perClient, maxTopics int) *Seats {
	return &Seats{max: max, perClient: perClient, maxTopics: maxTopics, by: map[string]int{},
		claims: map[string][]time.Time{}, topicClaims: map[string][]time.Time{}, now: time.Now}
}

// SetBounds changes the bounds for the places taken from now on: the
// streams open and the topics polled stay counted, and past a lower bound
// nobody anonymous gets a place until enough are given back.
func (s *Seats) SetBounds(max, perClient, maxTopics int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max, s.perClient, s.maxTopics = max, perClient, maxTopics
}

// Take gives client a seat, or says why not: ErrClientFull when the client
// has its share, ErrFull when every seat is taken (for a keyed client: by
// keyed clients, or it took over as many seats as it may in the window).
// A keyed client gets a pending seat when every seat is taken: it counts in
// the client's share and ends nobody; Settle, once the stream has passed
// every check of its own, takes an anonymous seat over.
func (s *Seats) Take(client string, keyed bool) (*Place, error) {
	s.mu.Lock()
	perClient := s.perClient
	s.mu.Unlock()
	return s.TakeUpTo(client, keyed, perClient)
}

// TakeUpTo is Take with a per-client bound of the caller's own instead of
// the Seats' (each handler's max_streams_per_client, in front of one guard's
// seats): one count per client, whatever each handler's bound is. A keyed
// client's takeovers are bounded by it too (DefaultTakeovers without one).
func (s *Seats) TakeUpTo(client string, keyed bool, perClient int) (*Place, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if perClient > 0 && s.by[client] >= perClient {
		return nil, ErrClientFull
	}
	var p *Place
	if s.max > 0 && s.streams.held >= s.max {
		if !keyed || s.streams.cheapest() == nil || !mayTakeOver(s.claims, s.now(), client, perClient) {
			return nil, ErrFull
		}
		p = &Place{s: s, l: &s.streams, keyed: true, pending: true, ended: make(chan struct{})}
	} else {
		p = s.take(&s.streams, keyed)
	}
	p.client, p.perClient = client, perClient
	p.viewers.Store(1)
	s.by[client]++
	return p, nil
}

// Settle makes a pending seat (Take) a seat, for a stream that has passed
// every check of its own: a seat given back since, or the oldest anonymous
// stream's, which ends (its Ended is closed), claimed for window. ErrFull
// when there is neither (every seat keyed, or the client took over as many
// as it may), and the stream should be refused; the place is then still to
// be given back. Settle on a seat that is not pending does nothing.
func (p *Place) Settle(window time.Duration) error { return settle(p, nil, window) }

// settle settles seat, a stream's seat, and topic, the place of the topic
// the stream starts (either nil, pending or not; both of one Seats), at
// once: each gets a place given back since or takes the cheapest anonymous
// one over, claimed for window (a topic's by seat's client), or neither is
// settled and nothing ends: ErrFull when the seat has no place to take,
// ErrTopicsFull when the topic has none. So a stream refused for its topic
// has ended no seat, and one refused for its seat no topic.
func settle(seat, topic *Place, window time.Duration) error {
	s := seat
	if s == nil {
		s = topic
	}
	if s == nil {
		return nil
	}
	return s.s.settle(seat, topic, window)
}

// settle is the package's settle, at s.
func (s *Seats) settle(seat, topic *Place, window time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var seatOver, topicOver *Place
	if seat != nil && seat.pending {
		var ok bool
		if seatOver, ok = s.room(&s.streams, s.max, s.claims, now, seat); !ok {
			return ErrFull
		}
	}
	if topic != nil && topic.pending {
		var ok bool
		if topicOver, ok = s.room(&s.topics, s.maxTopics, s.topicClaims, now, seat); !ok {
			return ErrTopicsFull
		}
	}
	if seat != nil && seat.pending {
		s.settleIn(seat, seatOver, s.claims, now.Add(window), seat)
	}
	if topic != nil && topic.pending {
		s.settleIn(topic, topicOver, s.topicClaims, now.Add(window), seat)
	}
	return nil
}

// room says what p, pending in l under bound, takes over as it settles
// at now: nil when a place was given back since, or the cheapest anonymous
// place; ok false when it may take none (none is anonymous, or the client
// of claimant, a seat, took over as many of claims as it may; a nil
// claimant claims nothing). Under s.mu.
func (s *Seats) room(l *ledger, bound int, claims map[string][]time.Time, now time.Time, claimant *Place) (over *Place, ok bool) {
	if bound <= 0 || l.held < bound {
		return nil, true
	}
	v := l.cheapest()
	if v == nil || (claimant != nil && !mayTakeOver(claims, now, claimant.client, claimant.perClient)) {
		return nil, false
	}
	return v, true
}

// settleIn makes p, pending, a place of its ledger: over, the place room
// found for it (nil: one given back since), ends, and the takeover is
// claimed until until for claimant's client (a nil claimant claims
// nothing). Under s.mu.
func (s *Seats) settleIn(p, over *Place, claims map[string][]time.Time, until time.Time, claimant *Place) {
	if over != nil {
		p.l.yield(over)
		if claimant != nil {
			claims[claimant.client] = append(claims[claimant.client], until)
		}
	}
	p.l.held++
	p.pending = false
}

// mayTakeOver reports whether client may take another place over: it has
// fewer of claims (of seats, or of topics) running at now than its share,
// perClient. Under s.mu.
func mayTakeOver(claims map[string][]time.Time, now time.Time, client string, perClient int) bool {
	kept := claims[client][:0]
	for _, until := range claims[client] {
		if until.After(now) {
			kept = append(kept, until)
		}
	}
	if len(kept) == 0 {
		delete(claims, client)
	} else {
		claims[client] = kept
	}
	return len(kept) < cmp.Or(perClient, DefaultTakeovers)
}

// takeTopic gives a new topic its place, or ErrTopicsFull when every place
// is taken (for a keyed taker: by keyed takers, or the client of seat, the
// stream that starts the topic, took over as many topics as it may within
// the window; a nil seat claims nothing). A keyed topic past the bound gets
// a pending place, which ends nobody until it is settled (settle), with the
// stream's seat, once the topic has passed every check of its own. Its
// viewers are set with SetViewers.
func (s *Seats) takeTopic(keyed bool, seat *Place) (*Place, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &s.topics
	if s.maxTopics > 0 && l.held >= s.maxTopics {
		if !keyed {
			return nil, ErrTopicsFull
		}
		if _, ok := s.room(l, s.maxTopics, s.topicClaims, s.now(), seat); !ok {
			return nil, ErrTopicsFull
		}
		return &Place{s: s, l: l, keyed: true, pending: true, ended: make(chan struct{})}, nil
	}
	return s.take(l, keyed), nil
}

// take takes a place of l below its bound: it ends nobody. Under s.mu.
func (s *Seats) take(l *ledger, keyed bool) *Place {
	p := &Place{s: s, l: l, keyed: keyed, ended: make(chan struct{})}
	l.held++
	if !keyed {
		p.elem = l.anon.PushBack(p)
	}
	return p
}

// yield ends the anonymous place v for a keyed taker: v's place is the
// keyed taker's from now on; v only winds down. Under s.mu.
func (l *ledger) yield(v *Place) {
	l.anon.Remove(v.elem)
	v.yielded = true
	l.held--
	close(v.ended)
}

// cheapest is the anonymous place that costs least to end: the fewest
// viewers, the oldest of those; nil when there is none.
func (l *ledger) cheapest() *Place {
	var best *Place
	for e := l.anon.Front(); e != nil; e = e.Next() {
		if p := e.Value.(*Place); best == nil || p.viewers.Load() < best.viewers.Load() {
			best = p
			if best.viewers.Load() <= 1 {
				break // nothing ends fewer, and this one is the oldest such
			}
		}
	}
	return best
}

// Ended is closed when a keyed taker took the place over: the stream or
// topic holding it should end (and then Give it back). Nil for a nil Place.
func (p *Place) Ended() <-chan struct{} {
	if p == nil {
		return nil
	}
	return p.ended
}

// SetViewers records how many viewers a topic has: ending the topic ends
// their streams, so a keyed taker ends the topic with the fewest. A nil
// Place records nothing.
func (p *Place) SetViewers(n int) {
	if p != nil {
		p.viewers.Store(int32(n))
	}
}

// Give gives the place back; a place that was taken over gives back only
// its client's count. Give on a nil Place, or again, does nothing.
func (p *Place) Give() {
	if p == nil {
		return
	}
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.given {
		return
	}
	p.given = true
	if !p.yielded && !p.pending {
		p.l.held--
		if !p.keyed {
			p.l.anon.Remove(p.elem)
		}
	}
	if p.l == &s.topics {
		return
	}
	switch n := s.by[p.client]; {
	case n <= 0:
		panic("live: a seat given back that was not taken")
	case n == 1:
		delete(s.by, p.client)
	default:
		s.by[p.client] = n - 1
	}
}

// Open is how many seats are taken (those taken over not counted).
func (s *Seats) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams.held
}

// Topics is how many topics hold a place.
func (s *Seats) Topics() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.topics.held
}
