package live

import (
	"errors"
	"strings"
	"sync"
	"testing"

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
