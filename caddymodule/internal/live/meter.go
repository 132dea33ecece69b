package live

import (
	"errors"
	"sync/atomic"
)

// ErrNoRoom refuses a topic whose answer does not fit its Meter's budget.
var ErrNoRoom = errors.New("live: no room in the held bytes for the topic's answer")

// Budget is where a Meter charges what topics keep: Keep charges n bytes
// for a topic whose viewers are keyed (or not), or charges nothing and
// reports that they do not fit; Drop gives back what Keep charged.
type Budget interface {
	Keep(keyed bool, n int64) bool
	Drop(keyed bool, n int64)
}

// Meter bounds and counts what topics keep: each its latest event, which it
// holds for as long as it lasts, for viewers who may join at any time. The
// answers of 1000 topics would otherwise be outside every bound the
// gateway has (a topic's answer is no client's, so no client's share of
// the held bytes counts it, and it is no cache entry). Hubs that share
// their Seats (one guard's, across reloads) share a Meter. The nil *Meter
// bounds and counts nothing.
type Meter struct {
	budget Budget
	bytes  atomic.Int64
}

// NewMeter returns a Meter that charges what topics keep to b.
func NewMeter(b Budget) *Meter { return &Meter{budget: b} }

// Bytes is what the topics keep now.
func (m *Meter) Bytes() int64 {
	if m == nil {
		return 0
	}
	return m.bytes.Load()
}

// keep charges n bytes for a topic of the class keyed, or reports that they
// do not fit and charges nothing.
func (m *Meter) keep(keyed bool, n int64) bool {
	if m == nil || n == 0 {
		return true
	}
	if !m.budget.Keep(keyed, n) {
		return false
	}
	m.bytes.Add(n)
	return true
}

// drop gives back n bytes that keep charged for a topic of the class keyed.
func (m *Meter) drop(keyed bool, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.bytes.Add(-n)
	m.budget.Drop(keyed, n)
}

// size is what a topic keeps of ev.
func (ev *Event) size() int64 { return int64(len(ev.Wire) + len(ev.Data)) }
