package metrics

import (
	"cmp"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/live"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
)

// Guard is one backend guard's units, whose own counters the metrics read
// when they are scraped: nothing is counted for them on a request's way. A
// nil unit is one the config switched off, and its series are left out.
//
// A guard outlives a config: handlers of several loads share it, and its
// counters run from when the guard was made. Each load's registry reads the
// guards of that load's handlers, each once however many handlers share it,
// so a scrape never counts a guard twice, and a reload that keeps a guard
// carries its counts on rather than restarting them.
type Guard struct {
	// Name is the guard label's value: backend.guard, else the declared
	// server's name or the network member's id. A guard named by neither
	// has the empty name: such guards sum into one set of series, which is
	// what a config with one backend shows.
	Name string

	// All is the admission limiter in front of the whole backend, Main the
	// one of the stations that run on the game's main thread.
	All, Main *admission.Limiter
	Flights   *coalesce.Group
	Cache     *microcache.Cache
	Held      *hold.Budget
	// Topics is what the guard's live topics keep (their latest answers);
	// those of answers over 16 KiB are part of Held.
	Topics *live.Meter
	// Trips counts the trips kept past their callers.
	Trips Trips
}

// guardCollector exports the guards of one config load: Register
// registers it once per load, with the other families, and each handler
// adds its guards to it (Metrics.ExportGuard).
type guardCollector struct {
	mu     sync.Mutex
	guards []Guard
}

func guardDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, name), help, append([]string{"guard"}, labels...), nil)
}

var (
	descInFlight = guardDesc("backend_requests_in_flight",
		"Requests holding one of the backend's slots (admission control), by guard.")
	descQueued = guardDesc("backend_requests_queued",
		"Requests waiting for the backend's capacity (admission control), by guard and caller class.", "class")
	descHeld = guardDesc("held_bytes",
		"Bytes held for clients, by guard, at most max_held: answers they have not read yet (cache hits once each), what their live streams' requests keep, and their topics' events of answers over 16 KiB.")
	descHeldAnonymous = guardDesc("held_anonymous_bytes",
		"Bytes charged to the held bytes for anonymous callers, by guard: at most half of max_held, the rest being keyed callers' first.")
	descTopicBytes = guardDesc("topic_bytes",
		"Bytes the live streams' topics keep, each its latest answer as an event, by guard: those of answers over 16 KiB are counted in held_bytes too.")
	descCacheLookups = guardDesc("cache_lookups_total",
		"Micro-cache lookups, by guard and result: a fresh entry (hit), one served past its time to live while it is refreshed (stale), none (miss).", "result")
	descCacheEvictions = guardDesc("cache_evictions_total",
		"Micro-cache entries evicted, least recently used first, to make room for new ones, by guard.")
	descCacheEntries = guardDesc("cache_entries",
		"Entries in the micro-cache, by guard.")
	descCacheBytes = guardDesc("cache_bytes",
		"Bytes the micro-cache's entries take, as counted against cache_size, by guard.")
	descCoalesced = guardDesc("coalesce_requests_total",
		"Requests that could share a backend trip with identical ones, by guard and role: led a trip, shared a leader's answer, ran alone after waiting for an answer that could not be shared, abandoned the wait.", "role")
	descUnshared = guardDesc("coalesce_unshared_total",
		"Leaders' backend trips whose answer was not shared, by guard and reason: released (too large to hold, the followers went their own way at once) or unshareable (a 304 or 206 to the leader's own request, a refusal made for its caller such as a 401 or 429, a 5xx, or no answer: the leader's budget ran out or it left first).", "reason")
	descCoalesceInFlight = guardDesc("coalesce_in_flight",
		"Backend trips that identical requests can join now, by guard.")
	descCoalesceWaiting = guardDesc("coalesce_waiting",
		"Requests waiting now for a backend trip they joined, by guard.")
)

// ExportGuard has g's counters exported with those of the other guards of
// the config load m belongs to; a guard that several handlers share is
// exported once. A nil *Metrics exports nothing.
func (m *Metrics) ExportGuard(g Guard) {
	if m != nil && g != (Guard{}) {
		m.guards.add(g)
	}
}

// add makes g one of the guards exported, unless it is already: a guard is
// known by its held bytes, which every guard has and no two share. Two
// handlers in front of one guard may differ in the units they use (one
// coalesces, the other not): the guard is exported once, with every unit
// either uses.
func (c *guardCollector) add(g Guard) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.guards, func(e Guard) bool { return e.Held == g.Held })
	if i < 0 {
		c.guards = append(c.guards, g)
		return
	}
	e := &c.guards[i]
	e.Name = cmp.Or(e.Name, g.Name)
	e.All, e.Main, e.Flights = cmp.Or(e.All, g.All), cmp.Or(e.Main, g.Main), cmp.Or(e.Flights, g.Flights)
	e.Cache, e.Topics = cmp.Or(e.Cache, g.Cache), cmp.Or(e.Topics, g.Topics)
	if e.Trips == nil {
		e.Trips = g.Trips
	}
}

// Describe implements prometheus.Collector.
func (c *guardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInFlight, descQueued, descHeld, descHeldAnonymous, descTopicBytes,
		descCacheLookups, descCacheEvictions, descCacheEntries, descCacheBytes,
		descCoalesced, descUnshared, descCoalesceInFlight, descCoalesceWaiting,
		descTripsKept, descTripsKeptTotal, descUnsent} {
		ch <- d
	}
}

// guardSums is what the guards of one name count together, and which of
// their units exist.
type guardSums struct {
	hasAdmission, hasMain, hasFlights, hasCache, hasHeld, hasTopics bool

	inFlight, queuedAnonymous, queuedKeyed int
	heldBytes, heldAnonymous, topicBytes   int64
	cache                                  microcache.Stats
	flights                                coalesce.Stats
	hasTrips                               bool
	trips                                  TripStats
}

// addLimiter adds l's queue and returns how many hold its slots.
func (s *guardSums) addLimiter(l *admission.Limiter) (inFlight int) {
	st := l.Stats()
	s.queuedAnonymous += st.QueuedAnonymous
	s.queuedKeyed += st.QueuedKeyed
	return st.InFlight
}

func (s *guardSums) add(g Guard) {
	s.addTrips(g)
	if g.All != nil {
		s.hasAdmission = true
		s.inFlight += s.addLimiter(g.All)
	}
	if g.Main != nil {
		s.hasMain = true
		s.addLimiter(g.Main)
	}
	if g.Held != nil {
		s.hasHeld = true
		s.heldBytes += g.Held.Held()
		s.heldAnonymous += g.Held.Anonymous()
	}
	if g.Topics != nil {
		s.hasTopics = true
		s.topicBytes += g.Topics.Bytes()
	}
	if g.Cache != nil {
		s.hasCache = true
		st := g.Cache.Stats()
		s.cache.Entries += st.Entries
		s.cache.Bytes += st.Bytes
		s.cache.Hits += st.Hits
		s.cache.Stale += st.Stale
		s.cache.Misses += st.Misses
		s.cache.Evictions += st.Evictions
	}
	if g.Flights != nil {
		s.hasFlights = true
		st := g.Flights.Stats()
		s.flights.InFlight += st.InFlight
		s.flights.Waiting += st.Waiting
		s.flights.Led += st.Led
		s.flights.Shared += st.Shared
		s.flights.Alone += st.Alone
		s.flights.Abandoned += st.Abandoned
		s.flights.Released += st.Released
		s.flights.Unshareable += st.Unshareable
	}
}

// Collect implements prometheus.Collector: the guards' counters as they are
// now, one set of series per guard name.
func (c *guardCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	var names []string
	sums := map[string]*guardSums{}
	for _, g := range c.guards {
		s := sums[g.Name]
		if s == nil {
			s = new(guardSums)
			sums[g.Name] = s
			names = append(names, g.Name)
		}
		s.add(g)
	}
	c.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, name := range names {
		s := sums[name]
		if s.hasAdmission {
			gauge(descInFlight, float64(s.inFlight), name)
		}
		if s.hasAdmission || s.hasMain {
			gauge(descQueued, float64(s.queuedAnonymous), name, admission.Anonymous.String())
			gauge(descQueued, float64(s.queuedKeyed), name, admission.Keyed.String())
		}
		if s.hasHeld {
			gauge(descHeld, float64(s.heldBytes), name)
			gauge(descHeldAnonymous, float64(s.heldAnonymous), name)
		}
		if s.hasTopics {
			gauge(descTopicBytes, float64(s.topicBytes), name)
		}
		if s.hasCache {
			counter(descCacheLookups, s.cache.Hits, name, "hit")
			counter(descCacheLookups, s.cache.Stale, name, "stale")
			counter(descCacheLookups, s.cache.Misses, name, "miss")
			counter(descCacheEvictions, s.cache.Evictions, name)
			gauge(descCacheEntries, float64(s.cache.Entries), name)
			gauge(descCacheBytes, float64(s.cache.Bytes), name)
		}
		if s.hasFlights {
			for _, o := range []struct {
				o coalesce.Outcome
				n uint64
			}{{coalesce.Led, s.flights.Led}, {coalesce.Shared, s.flights.Shared}, {coalesce.Alone, s.flights.Alone}, {coalesce.Abandoned, s.flights.Abandoned}} {
				counter(descCoalesced, o.n, name, o.o.String())
			}
			counter(descUnshared, s.flights.Released, name, "released")
			counter(descUnshared, s.flights.Unshareable, name, "unshareable")
			gauge(descCoalesceInFlight, float64(s.flights.InFlight), name)
			gauge(descCoalesceWaiting, float64(s.flights.Waiting), name)
		}
		collectTrips(ch, name, s)
	}
}
