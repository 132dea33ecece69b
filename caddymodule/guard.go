package caddymodule

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/live"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
	"github.com/statusgate/statusgate/caddymodule/internal/place"
)

// guardState is what a guard keeps across requests, handlers and reloads: it
// lives in the guards pool under its name (guardKey), and goes when the last
// handler using it is cleaned up. Its units are always there; the limits in
// force (lim) say which of them act, and a reload changes them in place
// (use), so that what is in flight, queued, held and cached stays counted.
type guardState struct {
	all     *admission.Limiter // the backend's slots; limit 0: no admission control
	main    *admission.Limiter // the main-thread stations'; limit 0: they share all
	quota   *admission.Quota   // per anonymous client; 0: counted, no bound
	keys    *admission.Quota   // per key, by name, each up to the key's own cap
	flights *coalesce.Group    // used while lim.Coalesce
	cache   *microcache.Cache  // used while lim.CacheSize > 0
	held    *hold.Budget
	seats   *live.Seats // the live streams open, in all and per client, and their topics
	// streams counts anonymous callers' answers streaming with their slot
	// (too large to hold), up to maxStreams; 0: no bound.
	streams    atomic.Int32
	maxStreams atomic.Int32
	// refreshing holds the cache keys being refreshed in the background.
	refreshing sync.Map

	lim atomic.Pointer[guardLimits] // in force: the newest load's

	usersMu sync.Mutex
	users   []guardUser // the handlers using the guard, oldest load first
}

// guardUser is one handler's use of a guard: the limits its load gives it.
type guardUser struct {
	load   uint64
	limits guardLimits
}

// newGuardState makes a guard's units, with no limits in force yet: use
// gives it its first.
func newGuardState() *guardState {
	return &guardState{
		all:     admission.New(admission.Config{}),
		main:    admission.New(admission.Config{}),
		quota:   admission.NewQuota(0),
		keys:    admission.NewQuota(0),
		flights: coalesce.New(coalesce.Config{}),
		cache:   microcache.New(microcache.Config{Grace: staleGrace}),
		held:    hold.New(defaultMaxHeld, defaultMaxHeld),
		seats:   live.NewSeats(0, 0, 0),
	}
}

// use records that a handler of the given load uses the guard with limits l,
// and puts the newest load's limits in force.
func (s *guardState) use(load uint64, l guardLimits) {
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
func (s *guardState) apply(l guardLimits) {
	if cur := s.lim.Load(); cur != nil && *cur == l {
		return
	}
	s.all.SetConfig(admission.Config{Limit: l.InFlight, Queue: l.Queue, Wait: l.Wait})
	mainQueue := min(l.Queue, admission.DefaultMainThreadQueue)
	s.main.SetConfig(admission.Config{Limit: l.MainThread, Queue: mainQueue, Wait: l.Wait})
	s.quota.SetMax(l.PerClient)
	s.flights.SetConfig(coalesce.Config{MaxBody: int(l.MaxResponse), Timeout: cmp.Or(l.Timeout, coalesce.DefaultTimeout)})
	if l.CacheSize > 0 {
		s.cache.SetMaxBytes(l.CacheSize)
	} else {
		s.cache.Clear() // nothing kept under this config is served under a later one
	}
	s.held.SetSizes(l.MaxHeld, min(l.MaxHeld, max(l.MaxHeld/16, l.MaxResponse)))
	s.seats.SetBounds(l.Streams, l.StreamsPerClient, l.Topics)
	streams := int32(0)
	if l.InFlight > 0 {
		streams = int32(max(1, l.InFlight/2))
	}
	s.maxStreams.Store(streams)
	s.lim.Store(&l)
}

// Destruct implements caddy.Destructor: a guard holds nothing to close.
func (*guardState) Destruct() error { return nil }

// guards holds every guard in the process, by guardKey.
var guards = caddy.NewUsagePool()

// backendGuard is one handler's use of a guard: the shared state and what
// the handler decides for itself.
type backendGuard struct {
	*guardState
	key          string        // in guards
	load         uint64        // the handler's config load (guardState.use)
	timeout      time.Duration // each request's budget at the backend; 0: none
	writeTimeout time.Duration // progress deadline of client writes; 0: none
	maxResponse  int
	prefix6      int // bits of an IPv6 address that name a client
	// policy names what a shared answer's bytes depend on beyond the class
	// and the request: the field lists. A reload that changes them never
	// serves what the old ones produced.
	policy string
}

// provisionGuard takes this handler's guard from the pool, making it if it is
// new, and puts the limits l, resolved from h.Backend, in force: the guard
// named by backend.guard, or the handler's own, named by its place (see
// guardName). own is the handler's config as Caddy gave it.
func (h *Handler) provisionGuard(ctx caddy.Context, l guardLimits, own []byte) error {
	c := h.Backend
	lg := loadOf(ctx)
	site, placed := lg.placeOf(ctx, own)
	if c.Guard != "" {
		if err := lg.named(c.Guard, l, site); err != nil {
			return err
		}
	} else if !placed && len(site.Listen) > 0 {
		h.logger.Warn("cannot see where this handler stands in its server's routes (a named route, or routes inside another module): its guard is named by its server's addresses and its config; name it with guard <name> to be sure it is the backend's",
			zap.String("site", site.String()))
	}
	key, err := lg.guardKey(c.Guard, site, placed)
	if err != nil {
		return err
	}
	v, _, err := guards.LoadOrNew(key, func() (caddy.Destructor, error) { return newGuardState(), nil })
	if err != nil {
		return err
	}
	g := v.(*guardState)
	g.use(lg.seq, l)
	h.guard = backendGuard{
		guardState:   g,
		key:          key,
		load:         lg.seq,
		timeout:      l.Timeout,
		writeTimeout: durationOr(c.WriteTimeout, defaultWriteTimeout),
		maxResponse:  int(l.MaxResponse),
		prefix6:      cmp.Or(c.ClientPrefix6, defaultClientPrefix6),
		policy:       policyOf(h.authOn, h.table),
	}
	// The units this load has on, for its metrics.
	m := metrics.Guard{Name: c.Guard, Held: g.held}
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
	h.metrics.ExportGuard(m)
	return nil
}

// loads tells config loads apart, by the metrics registry Caddy makes for
// each, to find each handler's place and to check named guards. An entry goes
// when its config stops.
var loads sync.Map // *prometheus.Registry → *loadGuards

// loadSeq numbers config loads in the order their first handler is
// provisioned: a guard's newest load's limits are in force.
var loadSeq atomic.Uint64

type loadGuards struct {
	seq     uint64
	mu      sync.Mutex
	servers map[*caddyhttp.Server]*serverPlaces
	counts  map[string]int         // handlers by identity, to number the equal ones
	names   map[string]namedLimits // named guards' limits and where they were first seen
}

// serverPlaces are the places of a server's handlers (place.Find), taken one
// by one as the handlers are provisioned.
type serverPlaces struct {
	list []place.Place
	next int
	lost bool // a handler was not where the list said: the rest are unplaced
}

type namedLimits struct {
	limits guardLimits
	site   place.Place
}

func loadOf(ctx caddy.Context) *loadGuards {
	reg := ctx.GetMetricsRegistry()
	v, loaded := loads.LoadOrStore(reg, &loadGuards{
		seq:     loadSeq.Add(1), // numbers left unused when loaded keep the order
		servers: map[*caddyhttp.Server]*serverPlaces{}, counts: map[string]int{}, names: map[string]namedLimits{},
	})
	if !loaded && reg != nil {
		ctx.OnCancel(func() { loads.Delete(reg) })
	}
	return v.(*loadGuards)
}

// placeOf is the place of the handler being provisioned, whose config is
// own, and whether it was found: Caddy provisions a server's handlers in the
// order place.Find lists them, and a handler whose config is not its
// place's is one Find could not see (and so are the server's handlers after
// it). An unplaced handler's place has only its server's addresses.
func (lg *loadGuards) placeOf(ctx caddy.Context, own []byte) (place.Place, bool) {
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil {
		return place.Place{Config: own}, false // outside an HTTP server: in tests
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	sp := lg.servers[srv]
	if sp == nil {
		sp = &serverPlaces{list: place.Find(srv, "statusgate")}
		lg.servers[srv] = sp
	}
	unplaced := place.Place{Listen: slices.Sorted(slices.Values(srv.Listen)), Config: own}
	if sp.lost || sp.next >= len(sp.list) {
		sp.lost = true
		return unplaced, false
	}
	p := sp.list[sp.next]
	sp.next++
	if !sameConfig(p.Config, own) {
		sp.lost = true
		return unplaced, false
	}
	return p, true
}

// sameConfig reports whether raw, a handler's JSON in the config, is the
// config own (json.Marshal of a Handler as Caddy decoded it).
func sameConfig(raw json.RawMessage, own []byte) bool {
	var h Handler
	if json.Unmarshal(raw, &h) != nil {
		return false
	}
	b, err := json.Marshal(&h)
	return err == nil && bytes.Equal(b, own)
}

// guardKey names a guard in the pool. A named guard is its name's. A guard of
// a handler's own is named by its place: the server's listener addresses, the
// host matchers around it and its backend, which tell apart any two handlers
// in front of different backends, and stay the same across reloads that
// change anything else. Handlers at equal places (in front of one backend,
// for the same hosts) are numbered in the order Caddy provisions them, which
// within one server follows the routes. An unplaced handler is named by its
// server's addresses and its config; two unplaced handlers of one server with
// the same config could swap backends across reloads, which is a config
// error.
func (lg *loadGuards) guardKey(name string, site place.Place, placed bool) (string, error) {
	if name != "" {
		return "statusgate/guard/name/" + name, nil
	}
	id := site.Identity()
	if !placed {
		sum := sha256.Sum256(site.Config)
		id += " unplaced config=" + hex.EncodeToString(sum[:8])
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.counts[id]++
	n := lg.counts[id]
	if !placed && n > 1 && len(site.Listen) > 0 {
		return "", fmt.Errorf("two handlers with the same config on %s stand where statusgate cannot tell their backends apart (a named route, or routes inside another module): write guard <name> in each, one name per backend", strings.Join(site.Listen, " "))
	}
	return "statusgate/guard/site/" + id + " #" + strconv.Itoa(n), nil
}

// named records that the guard name has the limits l at site in this load,
// and refuses limits other than those it was first seen with: handlers that
// share a guard share its limits.
func (lg *loadGuards) named(name string, l guardLimits, site place.Place) error {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	first, ok := lg.names[name]
	if !ok {
		lg.names[name] = namedLimits{l, site}
		return nil
	}
	if first.limits == l {
		return nil
	}
	return fmt.Errorf("backend.guard: '%s' has other limits here, at %s (%s), than at %s (%s): handlers that share a guard share its limits; give both the same, or each a guard of its own",
		name, site, limitsDiff(l, first.limits), first.site, limitsDiff(first.limits, l))
}

// policyOf fingerprints the field lists: what a filtered answer's bytes
// depend on besides the request.
func policyOf(authOn bool, t *endpointTable) string {
	f := fnv.New64a()
	fmt.Fprintf(f, "auth=%v\n", authOn)
	for _, ep := range t.ordered {
		fmt.Fprintf(f, "%s=%q\n", ep.name, ep.fieldList)
	}
	return strconv.FormatUint(f.Sum64(), 36)
}
