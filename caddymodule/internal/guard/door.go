package guard

// This file is what the handler and its live streams ask of a guard
// besides its doors (Fetch, Own): the limits in force, and the held bytes
// that a stream's head and events are charged to.

import (
	"fmt"

	"github.com/statusgate/statusgate/caddymodule/internal/live"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
)

// Limits are the limits in force: the newest load's.
func (g *Guard) Limits() Limits { return *g.lim.Load() }

// maxResponse is the most of an answer the guard holds whole: the limits
// in force, which the handlers of a load sharing the guard agree on.
func (g *Guard) maxResponse() int { return int(g.lim.Load().MaxResponse) }

// Seats are the live streams open at the guard's backend, and their
// topics; Topics what the topics keep, charged to the held bytes.
func (g *Guard) Seats() *live.Seats  { return g.seats }
func (g *Guard) Topics() *live.Meter { return g.topics }

// Check refuses who when its share of the held bytes is spent, as Fetch
// does before anything else: the refusal, or the zero Verdict.
func (g *Guard) Check(who Caller) Verdict {
	if err := g.check(who); err != nil {
		return HeldRefusal(err)
	}
	return Verdict{}
}

// check is why who is refused before anything else (HeldRefusal) when its
// share of the held bytes is spent; nil: it is not.
func (g *Guard) check(who Caller) error { return g.held.Check(who.Holder, who.Held) }

// Pin charges n bytes that who's request keeps while it lasts (a stream's
// head) to its share; Unpin gives them back.
func (g *Guard) Pin(who Caller, n int64) error { return g.held.Pin(who.Holder, who.Held, n) }
func (g *Guard) Unpin(who Caller, n int64)     { g.held.Unpin(who.Holder, who.Held, n) }

// HandEvent writes ev, a live stream's event, with write, held against
// who's share of the held bytes while its client takes it, as an answer is
// delivered; the bytes are its topic's, so they are lent
// (hold.Budget.LendEvent), and judged small or not on its answer, not its
// framing.
func (g *Guard) HandEvent(pw *progress.Writer, who Caller, ev live.Event, write func() error) (held bool, err error) {
	claim, err := g.held.LendEvent(who.Holder, who.Held, ev.Wire, ev.Size)
	return hand(pw, claim, err, write)
}

// Pooled names the guards in the process's pool: each is there while a
// handler uses it (Join until Leave). A test run that ends with one left
// has a handler that was never cleaned up.
func Pooled() []string {
	var names []string
	guards.Range(func(key, _ any) bool {
		names = append(names, fmt.Sprint(key))
		return true
	})
	return names
}
