package guard

import (
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
)

// unitCounts is what a guard's units count at one moment, as its metrics
// show them (Units): for a test, which waits for a request to reach a
// place.
type unitCounts struct {
	All, Main  admission.Stats // the backend's slots, and the main-thread lane's
	Flights    coalesce.Stats
	Cache      microcache.Stats
	Held       int64 // bytes held now: charged and lent
	BigAnswers int   // anonymous answers too large to hold, streaming with their slot
	Refreshing int   // cache entries being refreshed in the background
}

// counts is what g's units count now.
func (g *Guard) counts() unitCounts {
	s := unitCounts{
		All: g.all.Stats(), Main: g.main.Stats(), Flights: g.flights.Stats(), Cache: g.cache.Stats(),
		Held: g.held.Held(), BigAnswers: int(g.bigAnswers.Load()),
	}
	g.refreshing.Range(func(any, any) bool { s.Refreshing++; return true })
	return s
}

// streamCounts is what a handler's streams count at one moment: for a
// test, which waits for a stream's end.
type streamCounts struct {
	Open    int // the streams open at the guard, every handler's (seats taken, those taken over not counted)
	Topics  int // the topics polled at the guard, every handler's
	Polling int // the handler's topics' pollers running, a poll under way included
}

// counts is what s counts now.
func (s *Streams) counts() streamCounts {
	return streamCounts{Open: s.g.seats.Open(), Topics: s.g.seats.Topics(), Polling: s.hub.Polling()}
}

// setClock makes the guard's micro-cache and held bytes judge time by now
// instead of the machine's clock: a test moves its own clock past a time
// to live or a patience rather than sleeping through it, which a busy
// machine could stretch. It is called before the guard is used, and
// empties the cache.
func (g *Guard) setClock(now func() time.Time) {
	g.cache = microcache.New(microcache.Config{MaxBytes: g.lim.Load().CacheSize, Grace: StaleGrace, Now: now})
	g.held.SetClock(now)
}
