package live

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
)

// budget is a Budget of max bytes, counting by class.
type budget struct {
	mu                  sync.Mutex
	max                 int64
	anonHeld, keyedHeld int64
}

func (b *budget) Keep(_ string, _ any, keyed bool, ev *Event) (func(), bool) {
	n := ev.size()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.anonHeld+b.keyedHeld+n > b.max {
		return nil, false
	}
	held := &b.anonHeld
	if keyed {
		held = &b.keyedHeld
	}
	*held += n
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		*held -= n
	}, true
}

func (b *budget) held() (anon, keyed int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.anonHeld, b.keyedHeld
}

// TestMeterBoundsTopics: a topic's latest answer is charged to the meter's
// budget in its viewers' class, in place of the one before; a new topic
// whose first answer does not fit is refused (ErrNoRoom) and gives its
// place back; a topic whose next answer does not fit ends, with its
// subscriptions; an ended topic gives back what it kept.
func TestMeterBoundsTopics(t *testing.T) {
	b := &budget{max: 1000}
	m := NewMeter(b)
	seats := NewSeats(0, 0, 10)
	h := New(nil, seats, m)
	defer h.Close()
	answer := func(n int) []byte { return []byte(strings.Repeat("x", n)) }

	f := newFeed()
	a, err := h.Subscribe("a", Viewer{Answer: answer(600)}, f.newFetch)
	if err != nil {
		t.Fatalf("a first answer that fits: %v", err)
	}
	if got, _ := b.held(); got != 600 || m.Bytes() != 600 {
		t.Fatalf("charged %d, metered %d; want the first answer, 600", got, m.Bytes())
	}
	if _, err := h.Subscribe("b", Viewer{Answer: answer(401), Keyed: true}, newFeed().newFetch); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("a first answer that does not fit: %v, want ErrNoRoom", err)
	}
	if seats.Topics() != 1 || h.Topics() != 1 {
		t.Fatalf("%d places, %d topics after the refusal; want the first topic's alone", seats.Topics(), h.Topics())
	}
	k, err := h.Subscribe("b", Viewer{Answer: answer(400), Keyed: true}, newFeed().newFetch)
	if err != nil {
		t.Fatalf("a keyed first answer that fits to the byte: %v", err)
	}
	if anon, keyed := b.held(); anon != 600 || keyed != 400 || m.Bytes() != 1000 {
		t.Fatalf("charged %d anonymous and %d keyed, metered %d", anon, keyed, m.Bytes())
	}
	next(t, a)
	f.send(t, string(answer(500))) // in place of the 600
	if ev := next(t, a); len(ev.Data) != 500 {
		t.Fatalf("the next answer: %d bytes", len(ev.Data))
	}
	if got, _ := b.held(); got != 500 || m.Bytes() != 900 {
		t.Fatalf("charged %d anonymous, metered %d; want the new answer in place of the old", got, m.Bytes())
	}
	f.send(t, string(answer(601))) // 400 are the keyed topic's
	fixture.Recv(t, a.Done(), "the topic whose answer found no room to end")
	if got, _ := b.held(); got != 0 || m.Bytes() != 400 || h.Topics() != 1 || seats.Topics() != 1 {
		t.Fatalf("after the topic ended: charged %d anonymous, metered %d, %d topics, %d places", got, m.Bytes(), h.Topics(), seats.Topics())
	}
	k.Leave()
	if anon, keyed := b.held(); anon != 0 || keyed != 0 || m.Bytes() != 0 {
		t.Fatalf("after the last topic ended: charged %d and %d, metered %d", anon, keyed, m.Bytes())
	}
}

// TestTakeoversOnlyWhenSubscribed: a keyed subscriber's pending seat and
// its new topic's place take anonymous ones over only when the
// subscription is made: refused for its topic's first answer (ErrNoRoom),
// or for its seat (ErrFull: every seat keyed), it ends no anonymous seat
// or topic, claims nothing, and gives back what it took.
func TestTakeoversOnlyWhenSubscribed(t *testing.T) {
	b := &budget{max: 1000}
	seats := NewSeats(1, 0, 2)
	h := New(nil, seats, NewMeter(b))
	defer h.Close()
	answer := func(n int) []byte { return []byte(strings.Repeat("x", n)) }
	anon := take(t, seats, "198.51.100.1", false)
	anonTopic, err := h.Subscribe("anon", Viewer{Seat: anon}, newFeed().newFetch)
	if err != nil {
		t.Fatal(err)
	}
	other, err := h.Subscribe("other", Viewer{}, newFeed().newFetch)
	if err != nil {
		t.Fatal(err)
	}
	untouched := func(what string) {
		t.Helper()
		if isClosed(anon.Ended()) || isClosed(anonTopic.t.place.Ended()) || isClosed(other.t.place.Ended()) {
			t.Fatalf("%s: an anonymous seat or topic was taken over", what)
		}
		if n := len(seats.claims) + len(seats.topicClaims); n != 0 {
			t.Fatalf("%s: %d claims", what, n)
		}
	}

	// Two keys' streams, pending: the seat is anonymous.
	x, err := seats.Take("key x", true)
	if err != nil {
		t.Fatal(err)
	}
	y, err := seats.Take("key y", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Subscribe("x", Viewer{Keyed: true, Seat: x, Window: time.Hour, Answer: answer(1001)}, newFeed().newFetch); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("a keyed topic whose first answer does not fit: %v, want ErrNoRoom", err)
	}
	untouched("refused for its first answer")
	if _, keyed := b.held(); keyed != 0 || seats.Open() != 1 || seats.Topics() != 2 || h.Topics() != 2 {
		t.Fatalf("after the refusal: %d keyed bytes, %d seats, %d places, %d topics", keyed, seats.Open(), seats.Topics(), h.Topics())
	}

	// The keyed topic that fits takes the seat and a topic over, the
	// older one.
	xs, err := h.Subscribe("x", Viewer{Keyed: true, Seat: x, Window: time.Hour, Answer: answer(400)}, newFeed().newFetch)
	if err != nil {
		t.Fatalf("a keyed topic that fits: %v", err)
	}
	fixture.Recv(t, anon.Ended(), "the anonymous seat taken over")
	fixture.Recv(t, anonTopic.Done(), "the older anonymous topic taken over")
	anon.Give()
	if isClosed(other.Done()) {
		t.Fatal("the newer anonymous topic ended too")
	}

	// Every seat keyed now: the other key's stream is refused for its
	// seat, and takes the topic left over for nothing.
	_, err = h.Subscribe("y", Viewer{Keyed: true, Seat: y, Window: time.Hour}, newFeed().newFetch)
	y.Give()
	if !errors.Is(err, ErrFull) {
		t.Fatalf("a keyed stream with every seat keyed: %v, want ErrFull", err)
	}
	if isClosed(other.t.place.Ended()) {
		t.Fatal("a keyed stream refused for its seat took an anonymous topic over")
	}
	if seats.Open() != 1 || seats.Topics() != 2 {
		t.Fatalf("after the refusal: %d seats, %d places; want x's seat, x's and the anonymous topic", seats.Open(), seats.Topics())
	}
	xs.Leave()
	x.Give()
}
