package live

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
)

// feed is a topic's backend as the test drives it: each fetch takes the
// next answer the test sends, and counts.
type feed struct {
	answers chan []byte
	fetches atomic.Int32
}

func newFeed() *feed { return &feed{answers: make(chan []byte)} }

func (f *feed) fetch(ctx context.Context, _ any) ([]byte, time.Duration, bool) {
	f.fetches.Add(1)
	select {
	case a := <-f.answers:
		return a, 0, false
	case <-ctx.Done():
		return nil, 0, false
	}
}

func (f *feed) newFetch() Fetch { return f.fetch }

// send hands the poller its next answer.
func (f *feed) send(t *testing.T, answer string) {
	t.Helper()
	select {
	case f.answers <- []byte(answer):
	case <-time.After(fixture.Patience):
		t.Fatalf("the poller did not fetch %s", answer)
	}
}

func envelope(online int, updatedAt int64) string {
	return fmt.Sprintf(`{"ok":true,"data":{"online":%d},"meta":{"version":"v1","updatedAt":%d}}`, online, updatedAt)
}

// next waits for s's pending event.
func next(t *testing.T, s *Sub) Event {
	t.Helper()
	fixture.Recv(t, s.Ready(), "an event")
	ev, ok := s.Take()
	if !ok {
		t.Fatal("Ready signalled, but nothing was pending")
	}
	return ev
}

// nothingPending says s has no event.
func nothingPending(t *testing.T, s *Sub) {
	t.Helper()
	if ev, ok := s.Take(); ok {
		t.Fatalf("pending: %s", ev.Data)
	}
}

func subscribe(t *testing.T, h *Hub, key, lastID string, f *feed) *Sub {
	t.Helper()
	s, err := h.Subscribe(key, Viewer{LastID: lastID}, f.newFetch)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOnePollerForEverySubscriberOfATopic(t *testing.T) {
	h := New(nil, nil, nil)
	defer h.Close()
	f := newFeed()
	subs := make([]*Sub, 100)
	for i := range subs {
		subs[i] = subscribe(t, h, "status", "", f)
	}
	for _, answer := range []string{envelope(1, 1), envelope(2, 2)} {
		f.send(t, answer)
		for i, s := range subs {
			if ev := next(t, s); string(ev.Data) != answer || ev.ID != ID([]byte(answer)) {
				t.Fatalf("subscriber %d: %s %s, want %s", i, ev.ID, ev.Data, answer)
			}
			nothingPending(t, s)
		}
	}
	// The poller is waiting for its third answer: three fetches in all,
	// for a hundred subscribers.
	fixture.WaitFor(t, "the third fetch", func() bool { return f.fetches.Load() == 3 })
	if got := h.Topics(); got != 1 {
		t.Fatalf("%d topics, want 1", got)
	}
}

func TestTopicsAreApart(t *testing.T) {
	h := New(nil, nil, nil)
	defer h.Close()
	anon, keyed := newFeed(), newFeed()
	a := subscribe(t, h, "status filtered", "", anon)
	k := subscribe(t, h, "status whole", "", keyed)
	keyed.send(t, envelope(7, 1))
	if ev := next(t, k); string(ev.Data) != envelope(7, 1) {
		t.Fatalf("keyed: %s", ev.Data)
	}
	nothingPending(t, a)
	if h.Topics() != 2 {
		t.Fatalf("%d topics, want 2", h.Topics())
	}
}

func TestAnUnchangedAnswerIsNotSentAgain(t *testing.T) {
	h := New(nil, nil, nil)
	defer h.Close()
	f := newFeed()
	s := subscribe(t, h, "status", "", f)
	f.send(t, envelope(1, 1000))
	next(t, s)
	// The same answer written later: only updatedAt differs.
	f.send(t, envelope(1, 2000))
	f.send(t, envelope(2, 3000)) // the fetch after it was published
	if ev := next(t, s); string(ev.Data) != envelope(2, 3000) {
		t.Fatalf("got %s, want the changed answer", ev.Data)
	}
	nothingPending(t, s)
}

func TestLastEventIDSkipsTheAnswerTheClientHas(t *testing.T) {
	h := New(nil, nil, nil)
	defer h.Close()
	f := newFeed()
	first := subscribe(t, h, "status", "", f)
	f.send(t, envelope(1, 1000))
	had := next(t, first)

	// A reconnect that has the latest answer gets nothing at once, ...
	again := subscribe(t, h, "status", had.ID, f)
	nothingPending(t, again)
	// ... a reconnect with another one gets the latest at once, ...
	other := subscribe(t, h, "status", ID([]byte(envelope(0, 5))), f)
	if ev, ok := other.Take(); !ok || ev.ID != had.ID {
		t.Fatalf("the reconnect with an old ID got %v %s, want the latest at once", ok, ev.Data)
	}
	// ... and the first one with the same answer written anew gets nothing.
	f.send(t, envelope(1, 9000))
	f.send(t, envelope(3, 9100))
	if ev := next(t, again); string(ev.Data) != envelope(3, 9100) {
		t.Fatalf("got %s", ev.Data)
	}
}

func TestASubscriberThatDoesNotReadHasOnlyTheLatest(t *testing.T) {
	h := New(nil, nil, nil)
	defer h.Close()
	f := newFeed()
	stalled := subscribe(t, h, "status", "", f)
	reader := subscribe(t, h, "status", "", f)
	for i := range 50 {
		f.send(t, envelope(i, int64(i)))
		next(t, reader) // published
	}
	ev := next(t, stalled)
	if string(ev.Data) != envelope(49, 49) {
		t.Fatalf("the stalled subscriber's event is %s, want the latest", ev.Data)
	}
	nothingPending(t, stalled)
}

func TestTheLastToLeaveStopsThePoller(t *testing.T) {
	h := New(nil, nil, nil)
	defer h.Close()
	f := newFeed()
	a := subscribe(t, h, "status", "", f)
	b := subscribe(t, h, "status", "", f)
	f.send(t, envelope(1, 1))
	a.Leave()
	a.Leave() // twice is once
	if h.Topics() != 1 {
		t.Fatal("the topic ended with a subscriber left")
	}
	b.Leave()
	fixture.WaitFor(t, "the poller's end", func() bool { return h.Polling() == 0 })
	if h.Topics() != 0 {
		t.Fatalf("%d topics after the last left", h.Topics())
	}
	// A new subscriber starts a new poller, which fetches at once.
	g := newFeed()
	c := subscribe(t, h, "status", "", g)
	g.send(t, envelope(2, 2))
	if ev := next(t, c); string(ev.Data) != envelope(2, 2) {
		t.Fatalf("got %s", ev.Data)
	}
}

func TestCloseEndsEverySubscription(t *testing.T) {
	h := New(nil, nil, nil)
	f := newFeed()
	subs := []*Sub{subscribe(t, h, "a", "", f), subscribe(t, h, "a", "", f), subscribe(t, h, "b", "", newFeed())}
	f.send(t, envelope(1, 1))
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	fixture.Recv(t, closed, "Close") // the pollers returned
	for i, s := range subs {
		fixture.Recv(t, s.Done(), fmt.Sprint("subscription ", i, "'s end"))
		nothingPending(t, s)
		s.Leave() // after Close, harmless
	}
	if _, err := h.Subscribe("a", Viewer{}, f.newFetch); err != ErrClosed {
		t.Fatalf("Subscribe after Close: %v, want ErrClosed", err)
	}
	h.Close() // twice is once
}

func TestConcurrentSubscribersAndLeavers(t *testing.T) {
	h := New(nil, nil, nil)
	defer h.Close()
	var fetched atomic.Int32
	fetch := func(ctx context.Context, _ any) ([]byte, time.Duration, bool) {
		n := fetched.Add(1)
		return []byte(envelope(int(n), 0)), 0, false
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			for j := range 50 {
				s, err := h.Subscribe(fmt.Sprint("topic", (i+j)%4), Viewer{}, func() Fetch { return fetch })
				if err != nil {
					t.Error(err)
					return
				}
				s.Take()
				s.Leave()
			}
		})
	}
	wg.Wait()
	if h.Topics() != 0 {
		t.Fatalf("%d topics left with no subscriber", h.Topics())
	}
}

// TestConcurrentKeyedAndAnonymous: keyed and anonymous subscribers and
// seat takers at once, past both bounds, taking places over from each
// other: nothing is counted twice or lost, the bounds hold whenever a taker
// gets a place, and everything is given back.
func TestConcurrentKeyedAndAnonymous(t *testing.T) {
	seats := NewSeats(8, 0, 3)
	h := New(nil, seats, nil)
	defer h.Close()
	fetch := func(ctx context.Context, _ any) ([]byte, time.Duration, bool) {
		return []byte(envelope(1, 0)), 0, false
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 100 {
				keyed := (i+j)%3 == 0
				seat, err := seats.Take(fmt.Sprint("client", i), keyed)
				if err != nil {
					continue
				}
				if n := seats.Open(); n > 8 {
					t.Errorf("%d seats open, bound 8", n)
				}
				s, err := h.Subscribe(fmt.Sprint("topic", keyed, (i+j)%5), Viewer{Keyed: keyed}, func() Fetch { return fetch })
				if err == nil {
					if n := seats.Topics(); n > 3 {
						t.Errorf("%d topics, bound 3", n)
					}
					select {
					case <-s.Ready():
					case <-s.Done():
					case <-seat.Ended():
					}
					s.Leave()
				}
				seat.Give()
			}
		})
	}
	wg.Wait()
	fixture.WaitFor(t, "every place given back", func() bool { return seats.Open() == 0 && seats.Topics() == 0 && h.Topics() == 0 })
	if len(seats.by) != 0 || seats.streams.anon.Len() != 0 || seats.topics.anon.Len() != 0 {
		t.Fatalf("left after every place was given back: %v, %d, %d", seats.by, seats.streams.anon.Len(), seats.topics.anon.Len())
	}
}

func TestEventsAreEncodedOncePerAnswer(t *testing.T) {
	var encoded atomic.Int32
	h := New(func(ev Event) []byte {
		encoded.Add(1)
		return []byte("<" + ev.ID + ">" + string(ev.Data))
	}, nil, nil)
	defer h.Close()
	f := newFeed()
	a, b := subscribe(t, h, "status", "", f), subscribe(t, h, "status", "", f)
	f.send(t, envelope(1, 1))
	ea, eb := next(t, a), next(t, b)
	want := "<" + ID([]byte(envelope(1, 1))) + ">" + envelope(1, 1)
	if string(ea.Wire) != want || &ea.Wire[0] != &eb.Wire[0] {
		t.Fatalf("wire %q and %q, want %q, shared", ea.Wire, eb.Wire, want)
	}
	if encoded.Load() != 1 {
		t.Fatalf("encoded %d times for two subscribers", encoded.Load())
	}
}

func TestIDIgnoresUpdatedAtOnly(t *testing.T) {
	a, b := ID([]byte(envelope(1, 1))), ID([]byte(envelope(1, 99999)))
	if a != b {
		t.Fatal("two answers that differ only in meta.updatedAt have different IDs")
	}
	if a == ID([]byte(envelope(2, 1))) {
		t.Fatal("a changed answer has the same ID")
	}
	// data.updatedAt is data, not the answer's time.
	x := ID([]byte(`{"ok":true,"data":{"updatedAt":1},"meta":{}}`))
	y := ID([]byte(`{"ok":true,"data":{"updatedAt":2},"meta":{}}`))
	if x == y {
		t.Fatal("data.updatedAt was ignored")
	}
	if id := ID([]byte("not json")); len(id) != idLen {
		t.Fatalf("ID %q has %d characters, idLen says %d", id, len(id), idLen)
	}
	if ID([]byte("not json")) == ID([]byte("not json!")) {
		t.Fatal("answers that are not JSON are told apart by their bytes")
	}
}

// take takes a seat, or fails the test.
func take(t *testing.T, s *Seats, client string, keyed bool) *Place {
	t.Helper()
	p, err := s.Take(client, keyed)
	if err == nil {
		err = p.Settle(time.Hour)
	}
	if err != nil {
		t.Fatalf("%s's seat (keyed %v): %v", client, keyed, err)
	}
	return p
}

// TestSeatsKeyedTakeOverOnlyWhenSettled: a keyed seat past the bound is
// pending and ends nobody until it is settled; given back unsettled (its
// stream refused) it ended nobody. One client takes over at most its share
// of seats within the window, however soon its streams close; once the
// window has passed, it may again.
func TestSeatsKeyedTakeOverOnlyWhenSettled(t *testing.T) {
	s := NewSeats(3, 2, 0)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	anon := []*Place{take(t, s, "a", false), take(t, s, "b", false), take(t, s, "c", false)}
	for range 10 {
		p, err := s.Take("bot", true)
		if err != nil {
			t.Fatalf("a pending keyed seat: %v", err)
		}
		p.Give() // refused by a check of its own
	}
	for i, a := range anon {
		if isClosed(a.Ended()) {
			t.Fatalf("anonymous stream %d ended for keyed seats never settled", i)
		}
	}
	if _, err := s.Take("d", false); err != ErrFull {
		t.Fatalf("an anonymous seat after the refused keyed ones: %v, want ErrFull", err)
	}
	// Churn: each keyed stream settles, ending the oldest anonymous one,
	// closes, and an anonymous viewer takes the seat back.
	ended := 0
	for i := range 10 {
		p, err := s.Take("bot", true)
		if err == nil {
			err = p.Settle(time.Minute)
		}
		if err != nil {
			if err != ErrFull || i < 2 {
				t.Fatalf("keyed stream %d: %v", i, err)
			}
			if p != nil {
				p.Give()
			}
			continue
		}
		for _, a := range anon {
			if isClosed(a.Ended()) && !a.given {
				ended++
				a.Give()
			}
		}
		p.Give()
		anon = append(anon, take(t, s, fmt.Sprint("anon", i), false))
	}
	if ended != 2 {
		t.Fatalf("churning keyed streams ended %d anonymous ones, want the key's share, 2", ended)
	}
	now = now.Add(time.Minute)
	p := take(t, s, "bot", true)
	if s.Open() != 3 {
		t.Fatalf("%d open after a takeover past the window, want 3", s.Open())
	}
	p.Give()
}

func TestSeats(t *testing.T) {
	s := NewSeats(3, 2, 0)
	a1, a2, b := take(t, s, "a", false), take(t, s, "a", false), take(t, s, "b", false)
	if _, err := s.Take("a", false); err != ErrClientFull {
		t.Fatalf("a's third seat: %v, want ErrClientFull", err)
	}
	if _, err := s.Take("c", false); err != ErrFull {
		t.Fatalf("the fourth seat: %v, want ErrFull", err)
	}
	a1.Give()
	a1.Give() // twice is once
	c := take(t, s, "c", false)
	for _, p := range []*Place{a2, b, c} {
		p.Give()
	}
	if s.Open() != 0 || len(s.by) != 0 || s.streams.anon.Len() != 0 {
		t.Fatalf("%d open, %d clients after every seat was given back", s.Open(), len(s.by))
	}
	unbounded := NewSeats(0, 0, 0)
	for range 1000 {
		take(t, unbounded, "x", false)
	}
}

// TestSeatsKeyedFirst: with every seat held by anonymous streams, a keyed
// one takes the oldest anonymous stream's seat, whose Ended closes and no
// other's; the total stays at the bound. Keyed seats are never taken over:
// with every seat keyed, a keyed taker is refused too. A key still has its
// own share.
func TestSeatsKeyedFirst(t *testing.T) {
	s := NewSeats(3, 2, 0)
	anon := []*Place{take(t, s, "a", false), take(t, s, "b", false), take(t, s, "c", false)}
	k1 := take(t, s, "bot", true)
	if !isClosed(anon[0].Ended()) || isClosed(anon[1].Ended()) || isClosed(anon[2].Ended()) || isClosed(k1.Ended()) {
		t.Fatal("the keyed seat did not end the oldest anonymous stream, and only it")
	}
	if s.Open() != 3 {
		t.Fatalf("%d open, want the bound, 3", s.Open())
	}
	// The stream that ended winds down: until it gives its seat back its
	// client's count holds, and the seat is the keyed one's.
	if _, err := s.Take("d", false); err != ErrFull {
		t.Fatalf("an anonymous stream at the bound: %v, want ErrFull", err)
	}
	anon[0].Give()
	if s.Open() != 3 || s.by["a"] != 0 {
		t.Fatalf("after the ended stream gave back: %d open, a holds %d", s.Open(), s.by["a"])
	}
	k2 := take(t, s, "bot", true)
	if _, err := s.Take("bot", true); err != ErrClientFull {
		t.Fatalf("the key's third stream: %v, want ErrClientFull", err)
	}
	k3 := take(t, s, "other-bot", true)
	if !isClosed(anon[1].Ended()) || !isClosed(anon[2].Ended()) {
		t.Fatal("the anonymous streams did not end for the keyed ones")
	}
	if _, err := s.Take("third-bot", true); err != ErrFull {
		t.Fatalf("every seat keyed: %v, want ErrFull", err)
	}
	for _, p := range []*Place{anon[1], anon[2], k1, k2, k3} {
		p.Give()
	}
	if s.Open() != 0 || len(s.by) != 0 {
		t.Fatalf("%d open, %v after every seat was given back", s.Open(), s.by)
	}
}

// TestSeatsSetBounds: a lower bound keeps the open streams counted and gives
// no seat until enough are given back.
func TestSeatsSetBounds(t *testing.T) {
	s := NewSeats(0, 0, 0)
	var held []*Place
	for range 4 {
		held = append(held, take(t, s, "a", false))
	}
	s.SetBounds(3, 2, 0)
	if _, err := s.Take("a", false); err != ErrClientFull {
		t.Errorf("4 open under a per-client bound of 2: %v, want ErrClientFull", err)
	}
	if _, err := s.Take("b", false); err != ErrFull {
		t.Errorf("4 open under a bound of 3: %v, want ErrFull", err)
	}
	for _, p := range held[:3] {
		p.Give()
	}
	take(t, s, "b", false)
}

// TestTopicsBoundedKeyedFirst: past max topics a new anonymous topic is
// refused (a subscriber of a topic that exists is not); a new keyed topic
// ends the anonymous topic with the fewest viewers, the oldest of those,
// with every subscription of it, and is never ended itself: with every
// topic keyed, a new keyed topic is refused too. Hubs that share the seats
// share the bound.
func TestTopicsBoundedKeyedFirst(t *testing.T) {
	seats := NewSeats(0, 0, 3)
	h, other := New(nil, seats, nil), New(nil, seats, nil)
	defer h.Close()
	defer other.Close()
	f := newFeed()
	sub := func(h *Hub, key string, keyed bool) (*Sub, error) {
		return h.Subscribe(key, Viewer{Keyed: keyed}, f.newFetch)
	}
	must := func(s *Sub, err error) *Sub {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a1, a2 := must(sub(h, "a", false)), must(sub(h, "a", false))
	b := must(sub(h, "b", false))
	c := must(sub(other, "c", false))
	if _, err := sub(h, "d", false); err != ErrTopicsFull {
		t.Fatalf("a fourth anonymous topic: %v, want ErrTopicsFull", err)
	}
	a3 := must(sub(h, "a", false)) // a topic that exists
	k1 := must(sub(h, "k1", true))
	// b and c have one viewer each; b is the older.
	fixture.Recv(t, b.Done(), "the end of the topic with the fewest viewers")
	for _, s := range []*Sub{a1, a2, a3, c} {
		if isClosed(s.Done()) {
			t.Fatal("a topic with more viewers, or a newer one, ended")
		}
	}
	if seats.Topics() != 3 {
		t.Fatalf("%d topics, want the bound, 3", seats.Topics())
	}
	if _, err := sub(h, "b", false); err != ErrTopicsFull {
		t.Fatalf("b again: %v, want ErrTopicsFull", err)
	}
	must(sub(other, "k2", true)) // ends c, in the other hub
	fixture.Recv(t, c.Done(), "the end of the other hub's topic")
	must(sub(h, "k3", true)) // ends a, with its three viewers
	for _, s := range []*Sub{a1, a2, a3} {
		fixture.Recv(t, s.Done(), "the end of a's viewers")
	}
	if _, err := sub(h, "k4", true); err != ErrTopicsFull {
		t.Fatalf("every topic keyed: %v, want ErrTopicsFull", err)
	}
	k1.Leave()
	fixture.WaitFor(t, "k1's place given back", func() bool { return seats.Topics() == 2 })
	must(sub(h, "e", false))
	h.Close()
	other.Close()
	if n := seats.Topics(); n != 0 {
		t.Fatalf("%d topics hold a place after both hubs closed", n)
	}
}

// TestPollsChargedToSubscribers: each poll is made on behalf of one of the
// topic's subscribers (its Viewer.By); a poll refused to one ends that
// subscription alone and is made at once for another; when every one is
// refused the topic ends.
func TestPollsChargedToSubscribers(t *testing.T) {
	h := New(nil, nil, nil)
	defer h.Close()
	type ask struct {
		by      any
		refused chan bool
	}
	asks := make(chan ask)
	fetch := func(ctx context.Context, by any) ([]byte, time.Duration, bool) {
		a := ask{by: by, refused: make(chan bool)}
		select {
		case asks <- a:
		case <-ctx.Done():
			return nil, 0, false
		}
		select {
		case refused := <-a.refused:
			return []byte(envelope(1, 0)), time.Hour, refused
		case <-ctx.Done():
			return nil, 0, false
		}
	}
	subs := map[string]*Sub{}
	for _, by := range []string{"a", "b", "c"} {
		s, err := h.Subscribe("status", Viewer{By: by}, func() Fetch { return fetch })
		if err != nil {
			t.Fatal(err)
		}
		subs[by] = s
	}
	seen := map[any]bool{}
	for range 2 {
		a := fixture.Recv(t, asks, "a poll")
		seen[a.by] = true
		a.refused <- true
		fixture.Recv(t, subs[a.by.(string)].Done(), "the refused subscriber's end")
	}
	if len(seen) != 2 {
		t.Fatalf("two refused polls were charged to %v, want two subscribers", seen)
	}
	a := fixture.Recv(t, asks, "a poll for the last subscriber")
	if seen[a.by] {
		t.Fatalf("a poll charged to %v, whose subscription had ended", a.by)
	}
	a.refused <- false
	last := subs[a.by.(string)]
	if ev := next(t, last); string(ev.Data) != envelope(1, 0) {
		t.Fatalf("the last subscriber got %s", ev.Data)
	}
	if h.Topics() != 1 {
		t.Fatalf("%d topics while one subscriber is left", h.Topics())
	}
	last.Leave()
	fixture.WaitFor(t, "the topic's end", func() bool { return h.Topics() == 0 && h.Polling() == 0 })
}

// TestNewTopicStartsFromTheViewersAnswer: a new topic's first event is the
// answer its first subscriber brings, pending at once, and its poller asks
// only after that answer's Next; a later subscriber's answer is not used.
func TestNewTopicStartsFromTheViewersAnswer(t *testing.T) {
	h := New(nil, nil, nil)
	defer h.Close()
	f := newFeed()
	first := []byte(envelope(7, 0))
	s, err := h.Subscribe("status", Viewer{Answer: first, Next: time.Hour}, f.newFetch)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, s); string(ev.Data) != string(first) {
		t.Fatalf("first event %s, want the subscriber's answer", ev.Data)
	}
	s2, err := h.Subscribe("status", Viewer{Answer: []byte(envelope(8, 0))}, f.newFetch)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, s2); string(ev.Data) != string(first) {
		t.Fatalf("a later subscriber got %s, want the topic's latest", ev.Data)
	}
	if n := f.fetches.Load(); n != 0 {
		t.Fatalf("the poller fetched %d times before the answer's Next", n)
	}
	s.Leave()
	s2.Leave()
}

// TestSeatsTakeUpTo: two handlers in front of one guard's seats, each with
// its own per-client bound, count one client's streams once: past 1 the
// first refuses it, the second takes it up to 3.
func TestSeatsTakeUpTo(t *testing.T) {
	s := NewSeats(0, 0, 0)
	if _, err := s.TakeUpTo("a", false, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeUpTo("a", false, 1); err != ErrClientFull {
		t.Errorf("a second stream under a bound of 1: %v, want ErrClientFull", err)
	}
	for i := range 2 {
		if _, err := s.TakeUpTo("a", false, 3); err != nil {
			t.Errorf("stream %d under a bound of 3: %v", i+2, err)
		}
	}
	if _, err := s.TakeUpTo("a", false, 3); err != ErrClientFull {
		t.Errorf("a fourth stream under a bound of 3: %v, want ErrClientFull", err)
	}
	if _, err := s.TakeUpTo("a", false, 0); err != nil {
		t.Errorf("without a bound: %v", err)
	}
}

// TestEndDoesNotWaitForAPoll: a poll that goes on whatever its context says
// (a trip at the backend runs until the backend is done) does not hold End,
// which ends the subscription at once; Close waits for it.
func TestEndDoesNotWaitForAPoll(t *testing.T) {
	h := New(nil, nil, nil)
	release := make(chan struct{})
	polling := make(chan struct{}, 1)
	stuck := func(context.Context, any) ([]byte, time.Duration, bool) {
		polling <- struct{}{}
		<-release // deaf to its context, as a trip at the backend is
		return []byte(envelope(1, 1)), time.Hour, false
	}
	s, err := h.Subscribe("status", Viewer{}, func() Fetch { return stuck })
	if err != nil {
		t.Fatal(err)
	}
	<-polling
	h.End()
	select {
	case <-s.Done():
	case <-time.After(fixture.Patience):
		t.Fatal("End left the subscription open")
	}
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a poll was still running")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-closed
}

// TestTopicTakeoversClaimed: a key whose streams start new keyed topics
// takes anonymous topics over at most its share of times (the seat's
// per-client bound) within the window, however soon it leaves each; past
// that its new topic is refused as an anonymous one is, and once the
// window has passed it may again. Without a seat nothing is claimed.
func TestTopicTakeoversClaimed(t *testing.T) {
	seats := NewSeats(0, 0, 2)
	now := time.Unix(1000, 0)
	seats.now = func() time.Time { return now }
	h := New(nil, seats, nil)
	defer h.Close()
	f := newFeed()
	anon := 0
	fill := func() []*Sub {
		var subs []*Sub
		for seats.Topics() < 2 {
			anon++
			s, err := h.Subscribe(fmt.Sprint("anon", anon), Viewer{}, f.newFetch)
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, s)
		}
		return subs
	}
	ended := 0
	var subs []*Sub
	for i := range 6 {
		subs = append(subs, fill()...)
		seat, err := seats.TakeUpTo("key bot", true, 3)
		if err != nil {
			t.Fatal(err)
		}
		k, err := h.Subscribe(fmt.Sprint("bot", i), Viewer{Keyed: true, Seat: seat, Window: time.Minute}, f.newFetch)
		if err != nil {
			if err != ErrTopicsFull || i < 3 {
				t.Fatalf("the key's topic %d: %v", i, err)
			}
			seat.Give()
			continue
		}
		k.Leave()
		seat.Give()
		fixture.WaitFor(t, "the key's topic to give its place back", func() bool { return seats.Topics() < 2 })
	}
	for _, s := range subs {
		if isClosed(s.t.place.Ended()) { // its Done is closed a moment later
			ended++
		}
	}
	if ended != 3 {
		t.Fatalf("a key churning new topics ended %d anonymous ones, want its share, 3", ended)
	}
	now = now.Add(time.Minute)
	seat, _ := seats.TakeUpTo("key bot", true, 3)
	if _, err := h.Subscribe("bot again", Viewer{Keyed: true, Seat: seat, Window: time.Minute}, f.newFetch); err != nil {
		t.Fatalf("past the window: %v", err)
	}
}
