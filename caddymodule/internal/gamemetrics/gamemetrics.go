// Package gamemetrics exports the game's own figures for Prometheus: the
// minecraft_* families (players, TPS, tick time, heap, start time, chunks
// and entities per world, the server's software), one set per game server
// the config declares, labelled server="<name>" with the name the config
// gives it, read from the answers of its ServerAPI endpoints.
//
// A scrape costs the servers nothing of its own: each (server, endpoint)
// keeps the reading of its last answer until that answer's time is up (the
// plugin's snapshot period, or a floor of the endpoint's for the live
// ones), and only a scrape that finds it out of date asks again, once,
// however many scrapes come at once (the others wait for that trip). The
// trip itself is the caller's (Trip): statusgate sends it through the
// server's guard, where it meets the same micro-cache and coalescing as
// the network's member trips. With nobody scraping, nothing is asked. A
// scrape waits for no trip longer than Bound, counted from the trip's
// start: all servers and endpoints are asked at once, and one that has not
// answered by then is left out of that scrape. A server whose last trip
// took its whole bound (one that hangs) is left out of the next scrapes at
// once, while their trip goes on for the scrape after: a hung server
// costs one scrape its bound, not every scrape.
//
// Down means down: a server whose status trip fails, times out, answers
// something that is no status, or is still starting, has minecraft_up 0
// and no data series, so that Prometheus marks them stale and a sum over a
// network counts the others; its minecraft_snapshot_timestamp_seconds
// keeps the time of its last good answer, so that time() minus it grows
// through the outage. One other endpoint that fails (a station the plugin
// has switched off) drops only its own families.
//
// Label values from the backend (world names, versions, entity types) are
// cleaned (Clean), and a server's worlds beyond Options.MaxWorlds are
// summed under world="_other"; worlds whose names clean up to the same
// value are one world. No sample can be invalid or collide: one that could
// would turn the whole /metrics answer into an error.
package gamemetrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Endpoint is a ServerAPI endpoint the figures come from.
type Endpoint uint8

const (
	Status      Endpoint = iota // /api/v1/status: players online
	Performance                 // /api/v1/performance: TPS, tick time, heap, start time (live)
	Entities                    // /api/v1/entities: entities per world
	Worlds                      // /api/v1/worlds: loaded chunks per world, the world list
	ServerInfo                  // /api/v1/server: the player limit, the software (live)
	numEndpoints
)

// Endpoints are all of them, in their order.
var Endpoints = []Endpoint{Status, Performance, Entities, Worlds, ServerInfo}

var endpointNames = [numEndpoints]string{"status", "performance", "entities", "worlds", "server"}

// String is the endpoint's name, as the endpoint table and the endpoint
// label write it.
func (e Endpoint) String() string { return endpointNames[e] }

// floors are how long an answer is read as current at least, by endpoint:
// the live endpoints, which have no snapshot, get a time of their own, so
// that they too cost a server one trip per that time at most.
var floors = [numEndpoints]time.Duration{time.Second, 5 * time.Second, 5 * time.Second, 30 * time.Second, time.Minute}

// failureTime is how long a failed answer is kept: each failing endpoint
// of a server that is down costs it one trip per this time, and a server
// that is back is seen back within it.
func failureTime(ep Endpoint) time.Duration { return min(floors[ep], 5*time.Second) }

// Bound is the longest a scrape waits for a trip, counted from the trip's
// start, whatever the backend's timeout (even off); the trip is given
// that long.
const Bound = 5 * time.Second

// Answer is what a trip brought back.
type Answer struct {
	// Body is the server's answer, a 200, when Err is nil.
	Body []byte
	// Err is why there is no answer: the trip failed or timed out, or the
	// server answered another status.
	Err error
	// Busy says the server's guard had no room for the trip now: the
	// server is not to blame, nothing is learnt, and nothing is kept.
	Busy bool
	// TTL is how long Body is the server's current answer: its snapshot's
	// remaining time, or the endpoint's cache time (at least the
	// endpoint's floor is used).
	TTL time.Duration
}

// Trip asks a server for ep's answer, under ctx (which ends at Bound).
type Trip func(ctx context.Context, ep Endpoint) Answer

// Server is a game server to export.
type Server struct {
	// Name is the server label's value, from the config.
	Name string
	// Key names its backend (a comparable value): two Servers of one key
	// are one server, asked once, under one name.
	Key any
	// Where says where the config declares it, for errors.
	Where string
	// Explicit says Name is the config's own word for the server (a
	// declared server's name, a network member's id, a guard name), not
	// its upstream as written, which gives way to an explicit name.
	Explicit bool
	// Trip asks it for an endpoint's answer.
	Trip Trip
}

// Collector is the game metrics of one config load, a
// prometheus.Collector registered in the load's registry.
type Collector struct {
	opts   Options
	now    func() time.Time
	bound  time.Duration
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	servers  []*server
	networks [][2]string // network, server
}

type server struct {
	Server
	entries [numEndpoints]entry
}

// entry is one (server, endpoint): its last reading, and the trip under
// way.
type entry struct {
	mu     sync.Mutex
	last   *reading  // nil: none yet
	until  time.Time // last is current until then
	good   float64   // the data time of the last good reading; 0: none
	flight chan struct{}
	ends   time.Time // when the trip under way has had its Bound
	// slow says the last trip failed by taking its whole Bound (a server
	// that hangs): scrapes do not wait for the next one, which goes on
	// for the scrape after.
	slow bool

	trips, failures atomic.Uint64
}

// New is a collector with the options o; it makes no trip until it is
// scraped, and none once closed.
func New(o Options) *Collector {
	ctx, cancel := context.WithCancel(context.Background())
	return &Collector{opts: o, now: time.Now, bound: Bound, ctx: ctx, cancel: cancel}
}

// Close ends the trips under way and makes no more: the config load is
// over.
func (c *Collector) Close() { c.cancel() }

// Add exports s. A server already added under the same key is the same
// server: an explicit name replaces an upstream as written, two explicit
// names are an error, and so is one name for two keys (the two would
// export the same series, which fails the whole scrape). Both errors name
// both places.
func (c *Collector) Add(s Server) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.servers {
		if e.Key != s.Key || e.Name == s.Name {
			continue
		}
		switch {
		case e.Explicit && s.Explicit:
			return fmt.Errorf("game metrics: %s and %s are one backend under two names (server=%q and server=%q): its series would be exported twice; give it one name in both places", e.Where, s.Where, e.Name, s.Name)
		case s.Explicit:
			if err := c.nameFree(s); err != nil {
				return err
			}
			e.Name, e.Where, e.Explicit = s.Name, s.Where, true
		}
		return nil
	}
	if i := slices.IndexFunc(c.servers, func(e *server) bool { return e.Key == s.Key }); i >= 0 {
		return nil // the same server under the same name
	}
	if err := c.nameFree(s); err != nil {
		return err
	}
	c.servers = append(c.servers, &server{Server: s})
	return nil
}

// nameFree refuses s's name when another backend has it.
func (c *Collector) nameFree(s Server) error {
	for _, e := range c.servers {
		if e.Name != s.Name || e.Key == s.Key {
			continue
		}
		if !e.Explicit && !s.Explicit {
			return fmt.Errorf("%w: %s and %s are two backends of the same upstreams as written (server=%q), told apart by their proxy blocks: the second has no game metrics; give each handler a guard <name>, or declare each server by name in the global statusgate option", ErrUnnamed, e.Where, s.Where, s.Name)
		}
		return fmt.Errorf("game metrics: %s and %s are two backends under one name (server=%q): their series would collide; give each its own name", e.Where, s.Where, s.Name)
	}
	return nil
}

// ErrUnnamed is the kind of Add's error for two backends that the config
// names by their upstreams as written alone, the same: a config that
// worked before the game metrics keeps working, without the second's.
var ErrUnnamed = errors.New("game metrics: two backends with one name")

// AddNetwork records that the network's members include server: the
// network_member_info series. Adding it twice changes nothing.
func (c *Collector) AddNetwork(network, server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.networks, [2]string{network, server}) {
		c.networks = append(c.networks, [2]string{network, server})
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: every server's figures as of
// its current answers, each endpoint asked anew (all at once) where its
// reading is out of date.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	servers := slices.Clone(c.servers)
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.Name
	}
	networks := slices.Clone(c.networks)
	c.mu.Unlock()

	deadline := c.now().Add(c.tripBound())
	readings := make([][numEndpoints]*reading, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		for _, ep := range Endpoints {
			wg.Go(func() { readings[i][ep] = c.current(s, ep, deadline) })
		}
	}
	wg.Wait()

	emit := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		if m, err := prometheus.NewConstMetric(d, t, v, labels...); err == nil {
			ch <- m
		}
	}
	for i, s := range servers {
		name := names[i]
		status := readings[i][Status]
		up := status != nil && status.err == nil
		emit(descUp, prometheus.GaugeValue, boolValue(up), name)
		for _, ep := range Endpoints {
			e := &s.entries[ep]
			e.mu.Lock()
			good := e.good
			e.mu.Unlock()
			if good > 0 {
				emit(descSnapshotTime, prometheus.GaugeValue, good, name, ep.String())
			}
			emit(descTrips, prometheus.CounterValue, float64(e.trips.Load()), name, ep.String())
			emit(descTripFailures, prometheus.CounterValue, float64(e.failures.Load()), name, ep.String())
			r := readings[i][ep]
			if !up || r == nil || r.err != nil {
				continue
			}
			for _, smp := range r.samples {
				emit(smp.desc, prometheus.GaugeValue, smp.value, append([]string{name}, smp.labels...)...)
			}
		}
	}
	for _, n := range networks {
		emit(descNetworkMember, prometheus.GaugeValue, 1, n[0], n[1])
	}
}

// tripBound is how long a trip is given (Bound; a test's own).
func (c *Collector) tripBound() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bound
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// current is s's reading of ep for a scrape that waits until deadline at
// most: the one kept while it is current, else the one the trip under way
// (or one this call starts) brings back, if it does by the deadline or
// its own bound; nil if none comes by then.
func (c *Collector) current(s *server, ep Endpoint, deadline time.Time) *reading {
	e := &s.entries[ep]
	e.mu.Lock()
	now := c.now()
	if e.last != nil && now.Before(e.until) {
		r := e.last
		e.mu.Unlock()
		return r
	}
	if e.flight == nil {
		if c.ctx.Err() != nil {
			e.mu.Unlock()
			return nil
		}
		e.flight, e.ends = make(chan struct{}), now.Add(c.tripBound())
		go c.trip(s, ep, e.flight)
	}
	done, ends, slow := e.flight, e.ends, e.slow
	e.mu.Unlock()
	if slow {
		return nil // left out of this scrape at once, rather than once more after its bound
	}
	if deadline.Before(ends) {
		ends = deadline
	}
	timer := time.NewTimer(ends.Sub(now))
	defer timer.Stop()
	select {
	case <-done:
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.last
	case <-timer.C:
		return nil
	}
}

// trip asks s for ep, within the bound, and keeps what it read.
func (c *Collector) trip(s *server, ep Endpoint, done chan struct{}) {
	e := &s.entries[ep]
	bound := c.tripBound()
	ctx, cancel := context.WithTimeout(c.ctx, bound)
	a := s.Trip(ctx, ep)
	slow := a.Err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) // it took its whole bound
	cancel()
	e.trips.Add(1)
	if a.Busy {
		// Nothing learnt of the server: its last reading stands, and the
		// next scrape asks again.
		e.mu.Lock()
		e.flight, e.slow = nil, false
		e.mu.Unlock()
		close(done)
		return
	}
	now := c.now()
	var r *reading
	var until time.Time
	switch {
	case slow:
		// A server that hangs: one trip at a time, each its bound.
		r, until = &reading{err: a.Err}, now.Add(max(failureTime(ep), bound))
	case a.Err != nil:
		r, until = &reading{err: a.Err}, now.Add(failureTime(ep))
	default:
		read := read(ep, a.Body, now, c.opts)
		r, until = &read, now.Add(max(a.TTL, floors[ep]))
		if read.err != nil {
			until = now.Add(failureTime(ep))
		}
	}
	if r.err != nil {
		e.failures.Add(1)
	}
	e.mu.Lock()
	e.last, e.until, e.flight, e.slow = r, until, nil, slow
	if r.err == nil {
		e.good = r.at
	}
	e.mu.Unlock()
	close(done)
}
