package guard

// This file is what the handler, its live streams and its network ask of
// a guard besides Fetch: what it decided for itself, and the held bytes
// that answers the gateway keeps for a caller (a network's documents) are
// charged to. A live stream has a door of its own (Streams).

import (
	"fmt"
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
)

// Backend is the declared backend; nil in the form of 1.0, where the
// handlers after statusgate reach it.
func (g *Guard) Backend() *upstream.Backend { return g.backend }

// Limits are the limits in force: the newest load's.
func (g *Guard) Limits() Limits { return *g.lim.Load() }

// Prefix6 is how many bits of an IPv6 address name a client.
func (g *Guard) Prefix6() int { return g.prefix6 }

// WriteTimeout is the progress deadline of the handler's client writes;
// 0: none.
func (g *Guard) WriteTimeout() time.Duration { return g.writeTimeout }

// MaxResponse is the most of an answer the guard holds whole: the limits
// in force, which the handlers of a load sharing the guard agree on.
func (g *Guard) MaxResponse() int { return int(g.lim.Load().MaxResponse) }

// Check refuses who when its share of the held bytes is spent, as Fetch
// does before anything else: the refusal, or the zero Verdict.
func (g *Guard) Check(who Caller) Verdict {
	if err := g.held.Check(who.Holder, who.Held); err != nil {
		return HeldRefusal(err)
	}
	return Verdict{}
}

// Keep charges n bytes that the gateway keeps for the callers of a class
// (a network's document) to the class's pool; Drop gives them back.
func (g *Guard) Keep(s hold.Share, n int64) error { return g.held.Take(s, n) }
func (g *Guard) Drop(s hold.Share, n int64)       { g.held.Give(s, n) }

// Shares reports whether g and other count at one guard: the same slots,
// queue, held bytes and cache.
func (g *Guard) Shares(other *Guard) bool { return g.guardState == other.guardState }

// Scope names what the guard's answers may be shared within (Config.Scope).
func (g *Guard) Scope() string { return g.scope }

// Stats is what a guard's units count at one moment, as its metrics show
// them (Units): for a test, which waits for a request to reach a place,
// or for a look at a running gateway.
type Stats struct {
	All, Main  admission.Stats // the backend's slots, and the main-thread lane's
	Flights    coalesce.Stats
	Cache      microcache.Stats
	Held       int64 // bytes held now: charged and lent
	BigAnswers int   // anonymous answers too large to hold, streaming with their slot
	Refreshing int   // cache entries being refreshed in the background
}

// Stats is what g's units count now.
func (g *Guard) Stats() Stats {
	s := Stats{
		All: g.all.Stats(), Main: g.main.Stats(), Flights: g.flights.Stats(), Cache: g.cache.Stats(),
		Held: g.held.Held(), BigAnswers: int(g.bigAnswers.Load()),
	}
	g.refreshing.Range(func(any, any) bool { s.Refreshing++; return true })
	return s
}

// SetClock makes the guard's micro-cache and held bytes judge time by now
// instead of the machine's clock: a test moves its own clock past a time
// to live or a patience rather than sleeping through it, which a busy
// machine could stretch. It is called before the guard is used, and
// empties the cache.
func (g *Guard) SetClock(now func() time.Time) {
	g.cache = microcache.New(microcache.Config{MaxBytes: g.lim.Load().CacheSize, Grace: StaleGrace, Now: now})
	g.held.SetClock(now)
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
