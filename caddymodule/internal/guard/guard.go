package guard

import (
	"cmp"
	"context"
	"crypto/rand"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/live"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
)

// This file is the guard: what stands between the gateway's callers and one
// backend (the admission limits, the per-client and per-key counts, the held
// bytes, coalescing, the micro-cache and the stream seats), how it is named,
// and how a handler joins it. A guard is named by what the handler declares
// and by nothing else (Name); the handler's own use of it, with the
// backend it sends requests to, is a Guard.

// guardState is what a guard keeps across requests, handlers and reloads: it
// lives in the guards pool under its name (Name), and goes when the last
// handler using it is cleaned up. Its units are always there; the limits in
// force (lim) say which of them act, and a reload changes them in place
// (use), so that what is in flight, queued, held and cached stays counted.
type guardState struct {
	all     *admission.Limiter // the backend's slots; limit 0: no admission control
	main    *admission.Limiter // the main-thread stations'; limit 0: they share all
	quota   *admission.Quota   // per anonymous client, each handler's bound (Guard.perClient)
	keys    *admission.Quota   // per key, by name, each up to the key's own cap
	flights *coalesce.Group    // used by the handlers whose coalesce is on (Guard.coalesce)
	cache   *microcache.Cache  // used while lim.CacheSize > 0
	held    *hold.Budget
	seats   *live.Seats // the live streams open, in all and per client (each handler's bound), and their topics
	topics  *live.Meter // what the topics keep, charged to held
	// bigAnswers counts anonymous callers' answers streaming with their
	// slot (too large to hold: not the live streams), up to maxBigAnswers;
	// 0: no bound.
	bigAnswers    atomic.Int32
	maxBigAnswers atomic.Int32
	// refreshing holds the cache keys being refreshed in the background.
	refreshing sync.Map
	// trips counts the trips kept past their callers; times is how long
	// the backend took for each station's recent answers (answerTimes), by
	// station name. stopping ends with the guard: the trips nobody waits
	// for end then too (errand.leave).
	trips    trips
	times    sync.Map
	stopping context.Context
	stop     context.CancelFunc

	lim atomic.Pointer[Limits] // in force: the newest load's

	usersMu sync.Mutex
	users   []guardUser // the handlers using the guard, oldest load first
	// servers are the declared servers its handlers front
	// (upstream.Backend.Server), under usersMu: a guard of another name in
	// front of one of them takes it over in a later load (heir).
	servers map[string]bool
}

// guardUser is one handler's use of a guard: the limits its load gives it.
type guardUser struct {
	load   uint64
	limits Limits
}

// newGuardState makes a guard's units, sized for l, with no limits in
// force yet: use gives it its first.
func newGuardState(l Limits) *guardState {
	held := hold.New(l.MaxHeld, l.ClientShare(), l.anonymousHeld())
	stopping, stop := context.WithCancel(context.Background())
	return &guardState{
		stopping: stopping,
		stop:     stop,
		all:      admission.New(admission.Config{}),
		main:     admission.New(admission.Config{}),
		quota:    admission.NewQuota(0),
		keys:     admission.NewQuota(0),
		flights:  coalesce.New(coalesce.Config{}),
		cache:    microcache.New(microcache.Config{Grace: StaleGrace}),
		held:     held,
		seats:    live.NewSeats(0, 0, 0),
		topics:   live.NewMeter(topicBudget{held}),
	}
}

// topicBudget charges what live topics keep, each its latest answer as an
// event, to the held bytes (live.Budget): a topic's answer is memory the
// gateway keeps for its viewers, and max_held is what bounds that. A keyed
// topic's is kept in the share of the key that opened it (its Owner, a
// Caller), for as long as the topic lasts, so that a key's topics count
// against its share as its answers and its streams' heads do, and one key
// cannot spend what the others need; an anonymous topic's in anonymous
// callers' pool, under a holder of the topic's own (no address's share: a
// topic outlives its opener's stream, and is everyone's). Its viewers hold
// the same bytes as they are written (hold.Budget.LendEvent), which adds
// nothing to the total while the topic keeps them.
//
// An event of a small answer (hold.Small, judged on the answer, not the
// framing) is not charged, as a small answer is never held against a client:
// a budget that slow readers of large answers have filled must not end the
// public /status topic and every stream of it. What such topics keep is
// bounded by max_topics instead (16 KiB and the framing each), and shown in
// topic_bytes.
type topicBudget struct{ held *hold.Budget }

func (b topicBudget) Keep(topic string, owner any, keyed bool, ev *live.Event) (release func(), ok bool) {
	client, share := "topic "+topic, hold.Share{Bytes: math.MaxInt64 / 2}
	if who, isCaller := owner.(Caller); keyed && isCaller {
		client, share = who.Holder, who.Held
	}
	share.Keyed = keyed
	claim, err := b.held.Keep(client, share, ev.Wire, ev.Size)
	if err != nil {
		return nil, false
	}
	return claim.Release, true
}

// use records that a handler of the given load uses the guard with limits l,
// and puts the newest load's limits in force.
func (s *guardState) use(load uint64, l Limits) {
	s.usersMu.Lock()
	defer s.usersMu.Unlock()
	i, _ := slices.BinarySearchFunc(s.users, load, func(u guardUser, load uint64) int { return cmp.Compare(u.load, load+1) })
	s.users = slices.Insert(s.users, i, guardUser{load, l})
	s.apply(s.users[len(s.users)-1].limits)
}

// leave undoes one use of the load's: when a config stops, or a load that
// failed is cleaned up, the limits of the newest load left are in force
// again.
func (s *guardState) leave(load uint64) {
	s.usersMu.Lock()
	defer s.usersMu.Unlock()
	i := slices.IndexFunc(s.users, func(u guardUser) bool { return u.load == load })
	if i < 0 {
		return
	}
	s.users = slices.Delete(s.users, i, i+1)
	if n := len(s.users); n > 0 {
		s.apply(s.users[n-1].limits)
	}
}

// apply puts l in force, under usersMu: each unit takes its bounds in place,
// for the requests to come, and keeps counting those in flight, queued and
// held.
func (s *guardState) apply(l Limits) {
	if cur := s.lim.Load(); cur != nil && *cur == l {
		return
	}
	s.all.SetConfig(admission.Config{Limit: l.InFlight, Queue: l.Queue, Wait: l.Wait})
	mainQueue := min(l.Queue, admission.DefaultMainThreadQueue)
	s.main.SetConfig(admission.Config{Limit: l.MainThread, Queue: mainQueue, Wait: l.Wait})
	s.flights.SetConfig(coalesce.Config{MaxBody: int(l.MaxResponse), Timeout: cmp.Or(l.Timeout, coalesce.DefaultTimeout)})
	if l.CacheSize > 0 {
		s.cache.SetMaxBytes(l.CacheSize)
	} else {
		s.cache.Clear() // nothing kept under this config is served under a later one
	}
	s.held.SetSizes(l.MaxHeld, l.ClientShare(), l.anonymousHeld())
	s.seats.SetBounds(l.Streams, 0, l.Topics) // per client: each handler's own (StreamsConfig.PerClient)
	streams := int32(0)
	if l.InFlight > 0 {
		streams = int32(max(1, l.InFlight/2))
	}
	s.maxBigAnswers.Store(streams)
	s.lim.Store(&l)
}

// pooled is a guard's state as the guards pool holds it, which ends it
// (Destruct).
type pooled struct{ *guardState }

// Destruct implements caddy.Destructor: the last handler using the guard
// under one name is gone. When no handler uses the guard under any name (a
// stop, or a reload that drops the backend), the trips that nobody waits
// for any more end with it, so that a stop does not wait for them; a guard
// another name still uses (a reload that renames it and takes it over)
// keeps them counted.
func (s pooled) Destruct() error {
	s.usersMu.Lock()
	unused := len(s.users) == 0
	s.usersMu.Unlock()
	if unused {
		s.stop()
	}
	return nil
}

// guards holds every guard in the process, by guardKey.
var guards = caddy.NewUsagePool()

// Guard is one handler's use of a guard: the shared state, the backend the
// handler sends requests to, and what the handler decides for itself. Its
// doors are Fetch, for the backend's answers, Own, for the answers the
// gateway makes on its own, and Streams, for the handler's live streams.
type Guard struct {
	*guardState
	name    string            // in guards
	load    uint64            // the handler's config load (guardState.use)
	backend *upstream.Backend // the declared backend; nil: the handlers after statusgate reach it (the 1.0 form)
	// scope names what the guard's answers may be shared within: the
	// declared backend; in the 1.0 form the guard the operator named, or
	// else this handler of this load alone (it cannot know where the
	// handlers after it send requests).
	scope string
	// The front door's choices (options declared statusgate:"door"): this handler's.
	timeout   time.Duration // each request's budget at the backend; 0: none
	perClient int           // an anonymous client's places; 0: no bound
	coalesce  bool          // identical requests share a trip
	// policy names what a shared answer's bytes depend on beyond the class
	// and the request: the field lists. A reload that changes them never
	// serves what the old ones produced.
	policy string
	carry  []string // Config.Carry
	logger *zap.Logger
	own    ownAnswers // the answers the handler's gateway makes on its own (Own)
}

// Name names a guard in the pool by what the handler declares: the
// name it gives (guard <name>: handlers in front of one game server at two
// addresses), or else its backend (handlers that declare the same backend
// share one guard; any difference in the upstreams or the proxy's settings
// makes another). Handlers of the 1.0 form, which declare no backend, share
// one guard for their counts in the whole process: merging the counts of
// two backends is safe (it only spares them more), splitting one backend's
// counts would double what it is sent.
func Name(name string, b *upstream.Backend) string {
	switch {
	case name != "":
		return namedPrefix + name
	case b != nil:
		return "statusgate/guard/backend/" + b.ID()
	}
	return "statusgate/guard/undeclared"
}

// namedPrefix starts the pool name of a guard the config names (guard
// <name>).
const namedPrefix = "statusgate/guard/name/"

// Config is what a handler joins a guard with: the limits its load puts
// in force, and what it decides for itself.
type Config struct {
	// Name is the guard's name in the process's pool (Name): handlers
	// that give one name share one guard.
	Name string
	// Load is the handler's config load: the newest load's limits are in
	// force, and a load that stops gives its limits back (Leave).
	Load uint64
	// Limits are the handler's limits, resolved; the handlers of one load
	// that share a guard agree on all but the front door's choices (the
	// options declared statusgate:"door", each handler's own).
	Limits Limits
	// Backend is the declared backend; nil: the handlers after statusgate
	// reach it (the 1.0 form).
	Backend *upstream.Backend
	// Scope names what the guard's answers may be shared within: the
	// declared backend's answers, the guard the operator named, or this
	// handler alone (Join makes it so when it is "").
	Scope string
	// Policy names what a shared answer's bytes depend on beyond the class
	// and the request: the field lists. A reload that changes them never
	// serves what the old ones produced.
	Policy string
	// Carry are the placeholders of a client's request that a trip of its
	// own (BackgroundRequest) keeps: the endpoint, key and client ones.
	Carry  []string
	Logger *zap.Logger
}

// Join takes the guard c names from the pool, making it if it is new, and
// puts c's limits in force on it: the handler's use of the guard, until
// Leave.
func Join(c Config) (*Guard, error) {
	taken := heir(c) // before LoadOrNew, which holds the new name's entry
	v, _, err := guards.LoadOrNew(c.Name, func() (caddy.Destructor, error) {
		if taken != nil {
			return pooled{taken}, nil
		}
		return pooled{newGuardState(c.Limits)}, nil
	})
	if err != nil {
		return nil, err
	}
	s := v.(pooled).guardState
	s.use(c.Load, c.Limits)
	s.fronts(c.Backend)
	g := &Guard{
		guardState: s,
		name:       c.Name,
		load:       c.Load,
		backend:    c.Backend,
		scope:      cmp.Or(c.Scope, "handler "+rand.Text()),
		timeout:    c.Limits.Timeout,
		perClient:  c.Limits.PerClient,
		coalesce:   c.Limits.Coalesce,
		policy:     c.Policy,
		carry:      c.Carry,
		logger:     c.Logger,
		own:        ownAnswers{makings: coalesce.New(coalesce.Config{MaxBody: int(c.Limits.MaxResponse)})},
	}
	return g, nil
}

// BackendName is what names the guard's backend to other gateways, which
// compare it with theirs (internal/peers): the guard's name, or the
// declared backend with its identity, or, in the form of 1.0, that no
// backend is declared.
func (g *Guard) BackendName() string {
	switch {
	case strings.HasPrefix(g.name, namedPrefix):
		return "guard " + strings.TrimPrefix(g.name, namedPrefix)
	case g.backend != nil:
		return g.backend.String() + " (declaration " + g.backend.ID() + ")"
	}
	return "a backend the config does not declare (statusgate without upstreams)"
}

// Leave gives the handler's guard back to the pool: the last handler using
// it removes it, and until then the limits of the newest load still using
// it are in force.
func (g *Guard) Leave() {
	if g == nil || g.name == "" {
		return
	}
	g.leaveOwn()
	g.guardState.leave(g.load)
	_, _ = guards.Delete(g.name)
	g.name = "" // once: the pool counts each handler once
}

// ShareReason says why two handlers share the guard name.
func ShareReason(name string) string {
	switch {
	case strings.HasPrefix(name, namedPrefix):
		return "both name it guard " + strings.TrimPrefix(name, namedPrefix)
	case strings.HasPrefix(name, "statusgate/guard/backend/"):
		return "they declare the same backend"
	}
	return "neither declares its upstreams, and such handlers share one guard"
}

// Units is what the guard has on under the limits l, for its metrics:
// name is the guard's label (its guard <name>, else the declared server's
// name or a network member's id; "" for none).
func (g *Guard) Units(name string, l Limits) metrics.Guard {
	m := metrics.Guard{Name: name, Held: g.held, Topics: g.topics, Trips: &g.trips}
	if l.InFlight > 0 {
		m.All = g.all
	}
	if l.MainThread > 0 {
		m.Main = g.main
	}
	if l.Coalesce {
		m.Flights = g.flights
	}
	if l.CacheSize > 0 {
		m.Cache = g.cache
	}
	return m
}
