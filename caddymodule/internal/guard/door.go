package guard

// This file is what the handler asks of a guard besides its doors (Fetch,
// Own, Streams): the limits in force, and whether a caller's share of the
// held bytes is spent.

import (
	"fmt"
)

// Limits are the limits in force: the newest load's.
func (g *Guard) Limits() Limits { return *g.lim.Load() }

// maxResponse is the most of an answer the guard holds whole: the limits
// in force, which the handlers of a load sharing the guard agree on.
func (g *Guard) maxResponse() int { return int(g.lim.Load().MaxResponse) }

// check is why who is refused before anything else (HeldRefusal) when its
// share of the held bytes is spent; nil: it is not.
func (g *Guard) check(who Caller) error { return g.held.Check(who.Holder, who.Held) }

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
