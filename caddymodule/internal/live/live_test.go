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

func (f *feed) fetch(ctx context.Context) ([]byte, time.Duration) {
	f.fetches.Add(1)
	select {
	case a := <-f.answers:
		return a, 0
	case <-ctx.Done():
		return nil, 0
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
	s, err := h.Subscribe(key, lastID, f.newFetch)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOnePollerForEverySubscriberOfATopic(t *testing.T) {
	h := New(nil)
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
	h := New(nil)
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
	h := New(nil)
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
	h := New(nil)
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
	h := New(nil)
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
	h := New(nil)
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
	h := New(nil)
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
	if _, err := h.Subscribe("a", "", f.newFetch); err != ErrClosed {
		t.Fatalf("Subscribe after Close: %v, want ErrClosed", err)
	}
	h.Close() // twice is once
}

func TestConcurrentSubscribersAndLeavers(t *testing.T) {
	h := New(nil)
	defer h.Close()
	var fetched atomic.Int32
	fetch := func(ctx context.Context) ([]byte, time.Duration) {
		n := fetched.Add(1)
		return []byte(envelope(int(n), 0)), 0
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			for j := range 50 {
				s, err := h.Subscribe(fmt.Sprint("topic", (i+j)%4), "", func() Fetch { return fetch })
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

func TestEventsAreEncodedOncePerAnswer(t *testing.T) {
	var encoded atomic.Int32
	h := New(func(ev Event) []byte {
		encoded.Add(1)
		return []byte("<" + ev.ID + ">" + string(ev.Data))
	})
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
	if ID([]byte("not json")) == ID([]byte("not json!")) {
		t.Fatal("answers that are not JSON are told apart by their bytes")
	}
}

func TestSeats(t *testing.T) {
	s := NewSeats(3, 2)
	for _, c := range []string{"a", "a", "b"} {
		if err := s.Take(c); err != nil {
			t.Fatalf("take %s: %v", c, err)
		}
	}
	if err := s.Take("a"); err != ErrClientFull {
		t.Fatalf("a's third seat: %v, want ErrClientFull", err)
	}
	if err := s.Take("c"); err != ErrFull {
		t.Fatalf("the fourth seat: %v, want ErrFull", err)
	}
	s.Give("a")
	if err := s.Take("c"); err != nil {
		t.Fatalf("a seat given back is free: %v", err)
	}
	for _, c := range []string{"a", "b", "c"} {
		s.Give(c)
	}
	if s.Open() != 0 || len(s.by) != 0 {
		t.Fatalf("%d open, %d clients after every seat was given back", s.Open(), len(s.by))
	}
	unbounded := NewSeats(0, 0)
	for range 1000 {
		if err := unbounded.Take("x"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSeatsSetBounds: a lower bound keeps the open streams counted and gives
// no seat until enough are given back.
func TestSeatsSetBounds(t *testing.T) {
	s := NewSeats(0, 0)
	for range 4 {
		if err := s.Take("a"); err != nil {
			t.Fatal(err)
		}
	}
	s.SetBounds(3, 2)
	if err := s.Take("a"); err != ErrClientFull {
		t.Errorf("4 open under a per-client bound of 2: %v, want ErrClientFull", err)
	}
	if err := s.Take("b"); err != ErrFull {
		t.Errorf("4 open under a bound of 3: %v, want ErrFull", err)
	}
	s.Give("a")
	s.Give("a")
	s.Give("a")
	if err := s.Take("b"); err != nil {
		t.Errorf("1 open under 3: %v", err)
	}
}
