package live

import (
	"errors"
	"sync/atomic"
)

// ErrNoRoom refuses a topic whose answer does not fit its Meter's budget.
var ErrNoRoom = errors.New("live: no room in the held bytes for the topic's answer")

// Budget is where a Meter charges what topics keep: Keep charges ev, the
// latest event of the topic named topic, whose viewers are keyed (or not)
// and which owner opened (the Viewer.Owner of its first subscriber), and
// returns what gives it back, or reports that it does not fit.
type Budget interface {
	Keep(topic string, owner any, keyed bool, ev *Event) (release func(), ok bool)
}

// Meter bounds and counts what topics keep: each its latest event, which it
// holds for as long as it lasts, for viewers who may join at any time. The
// answers of 1000 topics would otherwise be outside every bound the
// gateway has (a topic's answer is no client's to read, and it is no cache
// entry). Hubs that share their Seats (one guard's, across reloads) share a
// Meter. The nil *Meter bounds and counts nothing.
type Meter struct {
	budget Budget
	bytes  atomic.Int64
}

// NewMeter returns a Meter that charges what topics keep to b.
func NewMeter(b Budget) *Meter { return &Meter{budget: b} }

// Bytes is what the topics keep now, charged to the budget or not.
func (m *Meter) Bytes() int64 {
	if m == nil {
		return 0
	}
	return m.bytes.Load()
}

// keep charges ev for t, or reports that it does not fit and charges
// nothing; the release it returns gives it back.
func (m *Meter) keep(t *topic, ev *Event) (release func(), ok bool) {
	n := ev.size()
	if m == nil || n == 0 {
		return func() {}, true
	}
	give, ok := m.budget.Keep(t.key, t.owner, t.keyed, ev)
	if !ok {
		return nil, false
	}
	m.bytes.Add(n)
	return func() {
		m.bytes.Add(-n)
		give()
	}, true
}

// size is what a topic keeps of ev.
func (ev *Event) size() int64 { return int64(len(ev.Wire) + len(ev.Data)) }
