package caddymodule

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/live"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
	"github.com/statusgate/statusgate/caddymodule/internal/place"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
	"github.com/statusgate/statusgate/internal/ident"
)

// BackendConfig is how the gateway spares the backend: the ServerAPI plugin
// serves HTTP from 8 threads with an unbounded queue, /player can block for
// about 1.4 s and /placeholders runs on the game's main thread for up to 2 s.
// Every limit is on by default. One spelling throughout: an absent field or
// 0 means the default, and -1 (off in the Caddyfile) switches off an option
// that can be off. The options that bound memory, and those for which off
// would mean nothing, cannot be: each says why, and -1 is a config error.
type BackendConfig struct {
	// MaxInFlight is the most requests the backend works on at once; the
	// rest wait in the queue. Default: 8, the plugin's http.threads. Off
	// (-1): no admission control (the main-thread limit still applies).
	MaxInFlight int `json:"max_in_flight,omitempty"`

	// MaxMainThread is the most requests at once to the stations that run on
	// the game's main thread (placeholders), within MaxInFlight; up to 8 of
	// them wait (fewer when QueueLength is below 8). Default: 1, so that
	// they never queue up on the tick. Off (-1): no limit of their own.
	MaxMainThread int `json:"max_main_thread,omitempty"`

	// MaxPerClient is the most requests one anonymous client (by its address,
	// Caddy's client IP) has at the backend or waiting for it at once; past
	// it the caller gets 429 Too many requests at once, so that one client on
	// many connections cannot fill the queue. Callers with an accepted key
	// are not counted (outside the key's scope they are anonymous callers,
	// and are). Default: 4. Off (-1): no limit.
	MaxPerClient int `json:"max_per_client,omitempty"`

	// QueueLength is the most requests waiting for the backend; past it a
	// caller gets 503 Backend busy at once. Callers with an accepted key are
	// served from the queue before anonymous ones. Default: 64. Off (-1): no
	// queue, for the main-thread stations either: when every slot is busy a
	// caller gets 503 Backend busy at once.
	QueueLength int `json:"queue_length,omitempty"`

	// QueueWait is the longest a request waits in the queue before it gets
	// 503 Backend busy with Retry-After. Default: 2s. Cannot be off: nobody
	// waits without a bound (switch the queue off instead); with the queue
	// off it must be left out (or 0).
	QueueWait caddy.Duration `json:"queue_wait,omitempty"`

	// Timeout is each forwarded request's budget, from the queue to the last
	// byte of the backend's response; past it the caller gets 504 Gateway
	// timeout (or a cut connection if the response was under way). Default:
	// 5s (the plugin's slowest station, 2 s, plus the queue wait and
	// headroom). Off (-1): no budget.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// Coalesce lets concurrent identical requests (same upstream path and
	// query, same treatment: filtered or whole) share one backend request
	// and its bytes. Responses larger than max_response, errors, 429s
	// and 5xx are never shared. Default: true. Off: false.
	Coalesce *bool `json:"coalesce,omitempty"`

	// Cache is the micro-cache's time to live per endpoint for successful
	// responses, kept apart for anonymous and keyed callers. An entry
	// replaces that endpoint's default. Defaults follow the plugin's
	// snapshot intervals so that caching adds little staleness: status 1s
	// (snapshot every 5 s), entities 5s (20 s), worlds, gamerules and
	// spawnlimits 30s (10 min); every live station is off. Off (-1): that
	// endpoint is not cached. 0 is a config error, because in this map it
	// would not say whether the default or off was meant.
	Cache map[string]caddy.Duration `json:"cache,omitempty"`

	// Snapshot is the plugin's refresh interval of each snapshot station
	// (its cache.*-ticks divided by 20), which makes the micro-cache
	// snapshot-aware: a response carries the time of its snapshot
	// (meta.cachedAt), and is kept until the next snapshot is due, however
	// much longer that is than its time to live, because until then the
	// plugin would answer with the same snapshot. Defaults: the plugin's,
	// status 5s, entities 20s, worlds, gamerules and spawnlimits 10m. Off
	// (-1): not a snapshot station (only the time to live counts). 0 is a
	// config error, as in Cache.
	Snapshot map[string]caddy.Duration `json:"snapshot,omitempty"`

	// CacheSize bounds the micro-cache's memory in bytes; the least recently
	// used entries go first. Default: 16 MiB. Off (-1): no micro-cache at
	// all, for every endpoint; a Cache entry other than -1 is then a config
	// error.
	CacheSize int64 `json:"cache_size,omitempty"`

	// MaxResponse is the largest answer, in bytes after the field layer,
	// that the gateway reads whole from the backend before it writes it to
	// the client. The backend's slot, the queue place and the per-client
	// place are given back as soon as the backend is done, whatever the
	// client's pace. A larger answer streams to its client as it comes and
	// keeps its slot, within the request's budget; it is never shared.
	// Anonymous callers' streams take at most half of max_in_flight, so
	// that answers too large to hold cannot take the slots keyed callers
	// need; past that such an answer is refused with 503 Backend busy.
	// Default: 4 MiB, above the largest detailed player of a modded server.
	// Cannot be off: it bounds the memory one answer takes.
	MaxResponse int64 `json:"max_response,omitempty"`

	// MaxHeld bounds the bytes held for clients that have not read them yet,
	// across all requests and HTTP/2 streams of this guard; one client (an
	// address, or a key) holds at most a sixteenth of it, and never less than
	// MaxResponse. Past a client's share that client gets 429 Too many
	// requests; past the whole, callers get 503 Backend busy, both with
	// Retry-After, and nobody else waits. Default: 64 MiB. Cannot be off: it
	// bounds the memory slow clients can make the gateway hold.
	MaxHeld int64 `json:"max_held,omitempty"`

	// WriteTimeout is how long a write to the client may go without the
	// client taking a piece (32 KiB) of the answer; past it the connection
	// (HTTP/1) or the stream (HTTP/2) is cut and what the gateway held for
	// the client is given back. Default: 10s. Off (-1): no deadline.
	WriteTimeout caddy.Duration `json:"write_timeout,omitempty"`

	// ClientPrefix6 is how many leading bits of an IPv6 address name one
	// client for the per-client limits (max_per_client and the held bytes'
	// share): a host commonly has a /64 to pick addresses from, and counting
	// each address would give it 2^64 places. Default: 64. Cannot be off:
	// every address belongs to some client; 128 counts each address as one.
	ClientPrefix6 int `json:"client_prefix_v6,omitempty"`

	// Guard names the backend guard: the admission limits, the per-client
	// and per-key counts, the held bytes, coalescing and the micro-cache.
	// Handlers that name the same guard (in front of the same backend) share
	// one, with the same limits. A reload keeps a guard, with every count,
	// and puts changed limits in force on it in place. Default: a guard of
	// this handler's own, named by its place: its server's listeners, the
	// host matchers around it and the upstreams of the reverse_proxy after
	// it (docs/backend-protection.md). Cannot be off (every handler has a
	// guard), and so "off" is not a name.
	Guard string `json:"guard,omitempty"`

	// Instances says this gateway is one of k in front of the same backend
	// (docs/cluster.md): MaxInFlight, QueueLength and MaxHeld are divided by
	// k, rounded down and at least 1, so that k gateways together give the
	// backend no more than one would. The main-thread lane is not divided:
	// it belongs to one instance, and the others disable placeholders.
	// Default: 1. Cannot be off: every gateway is one of at least one.
	Instances int `json:"instances,omitempty"`

	// LiveConfig bounds the live streams (stream.go): max_streams,
	// max_streams_per_client, stream_lifetime, stream_heartbeat.
	LiveConfig
}

// Defaults of BackendConfig.
const (
	defaultTimeout      = 5 * time.Second
	defaultWriteTimeout = 10 * time.Second
	defaultMaxResponse  = 4 << 20
	defaultMaxHeld      = 64 << 20
	// defaultClientPrefix6 is the /64 a host commonly has to itself.
	defaultClientPrefix6 = 64
)

// staleGrace is how long past its time to live a cache entry is still served
// while one request refreshes it: the default request budget, so that a
// refresh that fails or times out is retried before callers are made to wait.
const staleGrace = defaultTimeout

// guardLimits is BackendConfig resolved: defaults applied, off as 0. The
// handlers of one config that share a guard give it the same limits; the
// newest config's are in force (guardState.use).
type guardLimits struct {
	InFlight, MainThread, PerClient, Queue int
	Wait, Timeout                          time.Duration
	Coalesce                               bool
	CacheSize, MaxResponse, MaxHeld        int64
	// Instances is how many gateways share the backend; the limits above
	// are this one's share (perInstance).
	Instances int
	// Streams and StreamsPerClient bound the live streams (LiveConfig):
	// their seats are the guard's.
	Streams, StreamsPerClient int
}

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
	seats   *live.Seats // the live streams open, in all and per client
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
		seats:   live.NewSeats(0, 0),
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
	s.seats.SetBounds(l.Streams, l.StreamsPerClient)
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

// off is how the JSON switches a backend option off; the Caddyfile writes
// it off. 0, like an absent field, means the default.
const off = -1

// whyNotOff says, for the errors of the Caddyfile and of the JSON alike,
// why an option cannot be switched off.
var whyNotOff = map[string]string{
	"queue_wait":       "nobody waits without a bound",
	"max_response":     "it bounds the memory one answer takes",
	"max_held":         "it bounds the memory slow clients can make the gateway hold",
	"client_prefix_v6": "every address belongs to some client; 128 counts each IPv6 address as its own",
	"guard":            "every handler has one; leave guard out for a guard of this handler's own",
	"instances":        "every gateway is one of at least one; leave instances out (or write 1) for a gateway alone",
}

// resolveLimits checks c and applies the defaults. Each error names the
// option by its JSON path, and an option that cannot be off says why.
func resolveLimits(c BackendConfig) (guardLimits, error) {
	var l guardLimits
	for _, n := range []struct {
		name string
		v    int
	}{{"max_in_flight", c.MaxInFlight}, {"max_main_thread", c.MaxMainThread}, {"max_per_client", c.MaxPerClient}, {"queue_length", c.QueueLength}} {
		if n.v < off {
			return l, fmt.Errorf("backend.%s: %d is not a limit: write a whole number of at least 1, or -1 for off (0 or nothing: the default)", n.name, n.v)
		}
	}
	for _, d := range []struct {
		name string
		v    caddy.Duration
	}{{"timeout", c.Timeout}, {"write_timeout", c.WriteTimeout}} {
		if d.v < off {
			return l, fmt.Errorf("backend.%s: %v is negative: write a positive duration, or -1 for off (0 or nothing: the default)", d.name, time.Duration(d.v))
		}
	}
	switch {
	case c.QueueWait == off:
		return l, fmt.Errorf("backend.queue_wait cannot be off (-1): %s; to refuse at once when the backend is busy, set queue_length to -1", whyNotOff["queue_wait"])
	case c.QueueWait < 0:
		return l, fmt.Errorf("backend.queue_wait: %v is negative: write a positive duration (0 or nothing: the default)", time.Duration(c.QueueWait))
	case c.QueueWait > 0 && c.QueueLength == off:
		return l, fmt.Errorf("backend.queue_wait: %v, but queue_length is -1 (off): there is no queue to wait in", time.Duration(c.QueueWait))
	}
	if c.CacheSize < off {
		return l, fmt.Errorf("backend.cache_size: %d is not a size: write bytes, at least 1, or -1 for off (0 or nothing: the default)", c.CacheSize)
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"max_response", c.MaxResponse}, {"max_held", c.MaxHeld}} {
		if n.v == off {
			return l, fmt.Errorf("backend.%s cannot be off (-1): %s", n.name, whyNotOff[n.name])
		}
		if n.v < 0 {
			return l, fmt.Errorf("backend.%s: %d is not a size: write bytes, at least 1 (0 or nothing: the default)", n.name, n.v)
		}
	}
	if c.ClientPrefix6 == off {
		return l, fmt.Errorf("backend.client_prefix_v6 cannot be off (-1): %s", whyNotOff["client_prefix_v6"])
	}
	if c.ClientPrefix6 < 0 || c.ClientPrefix6 > 128 {
		return l, fmt.Errorf("backend.client_prefix_v6: %d is not a prefix length from 1 to 128", c.ClientPrefix6)
	}
	if c.Guard == "off" {
		return l, fmt.Errorf("backend.guard cannot be off ('off' is not a guard name): %s", whyNotOff["guard"])
	}
	switch {
	case c.Instances == off:
		return l, fmt.Errorf("backend.instances cannot be off (-1): %s", whyNotOff["instances"])
	case c.Instances < 0:
		return l, fmt.Errorf("backend.instances: %d is not a count of gateways: write a whole number of at least 1 (0 or nothing: 1)", c.Instances)
	}
	for _, section := range []struct {
		name string
		m    map[string]caddy.Duration
	}{{"cache", c.Cache}, {"snapshot", c.Snapshot}} {
		// In name order, so that of several mistakes the same one is named
		// every time.
		for _, name := range slices.Sorted(maps.Keys(section.m)) {
			d, path := section.m[name], "backend."+section.name+"."+name
			switch {
			case !validEndpointName(name):
				return l, fmt.Errorf("backend.%s: %w", section.name, endpointNameError(name))
			case d == 0:
				// Here 0 cannot mean the default, which leaving the
				// endpoint out says, so it would be a guess at off.
				return l, fmt.Errorf("%s: 0 is not a duration: write a positive one, or -1 for off (off in the Caddyfile); leave %s out for its default", path, name)
			case d < off:
				return l, fmt.Errorf("%s: %v is negative: write a positive duration, or -1 for off", path, time.Duration(d))
			case d > 0 && section.name == "cache" && c.CacheSize == off:
				return l, fmt.Errorf("%s: %v, but cache_size is -1 (no micro-cache): write -1 or leave %s out", path, time.Duration(d), name)
			}
		}
	}
	offOr := func(v, def int) int {
		if v == off {
			return 0
		}
		return orDefault(v, def)
	}
	l.InFlight = offOr(c.MaxInFlight, admission.DefaultLimit)
	l.MainThread = offOr(c.MaxMainThread, admission.DefaultMainThreadLimit)
	l.PerClient = offOr(c.MaxPerClient, admission.DefaultQuota)
	l.Queue = offOr(c.QueueLength, admission.DefaultQueue)
	if l.Queue > 0 {
		l.Wait = cmp.Or(time.Duration(c.QueueWait), admission.DefaultWait)
	}
	l.Timeout = durationOr(c.Timeout, defaultTimeout)
	l.Coalesce = c.Coalesce == nil || *c.Coalesce
	if c.CacheSize != off {
		l.CacheSize = cmp.Or(c.CacheSize, microcache.DefaultMaxBytes)
	}
	l.MaxResponse = cmp.Or(c.MaxResponse, defaultMaxResponse)
	l.MaxHeld = cmp.Or(c.MaxHeld, defaultMaxHeld)
	l = l.perInstance(max(1, c.Instances))
	if l.MaxResponse > l.MaxHeld {
		if l.Instances > 1 {
			return l, fmt.Errorf("backend.max_response: %d is more than this gateway's share of max_held, %d (%d / instances %d): no answer that large could be held", l.MaxResponse, l.MaxHeld, cmp.Or(c.MaxHeld, defaultMaxHeld), l.Instances)
		}
		return l, fmt.Errorf("backend.max_response: %d is more than max_held, %d: no answer that large could be held", l.MaxResponse, l.MaxHeld)
	}
	return l, nil
}

// perInstance is this gateway's share of the limits when it is one of k in
// front of the backend: the backend's slots, the queue in front of it and
// the held bytes divided by k, rounded down and at least 1 (off stays off).
// What bounds one client or one station is left whole: the per-client
// limits follow the client to one gateway (docs/cluster.md), and the
// main-thread lane belongs to one gateway alone.
func (l guardLimits) perInstance(k int) guardLimits {
	share := func(v int64) int64 {
		if v <= 0 {
			return v
		}
		return max(1, v/int64(k))
	}
	l.Instances = k
	l.InFlight = int(share(int64(l.InFlight)))
	l.Queue = int(share(int64(l.Queue)))
	l.MaxHeld = share(l.MaxHeld)
	return l
}

// logShare says at startup what this gateway, one of several, admits: the
// operator checks there that the shares add up to the backend's capacity,
// and that the main-thread lane is open on one gateway only.
func (h *Handler) logShare(l guardLimits) {
	if l.Instances <= 1 {
		return
	}
	lane := "open here: route every gateway's /placeholders to this one, and disable placeholders on the others"
	switch {
	case h.table.lookup("placeholders") == nil:
		lane = "placeholders disabled here: another gateway owns the main-thread lane"
	case l.MainThread == 0:
		lane = "open here without a limit of its own (max_main_thread off)"
	}
	limit := func(key string, v int) zap.Field {
		if v == 0 {
			return zap.String(key, "off")
		}
		return zap.Int(key, v)
	}
	h.logger.Info("one of several gateways in front of the backend: this one admits its share",
		zap.Int("instances", l.Instances), limit("max_in_flight", l.InFlight), limit("queue_length", l.Queue), zap.Int64("max_held", l.MaxHeld),
		zap.Int("max_main_thread", l.MainThread), zap.String("main_thread_lane", lane))
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
		if !ident.Valid(c.Guard) {
			return fmt.Errorf("backend.guard: '%s' is not a name of letters, digits, '_' and '-'", c.Guard)
		}
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

// Cleanup gives the handler's guard back to the pool: the last handler using
// it removes it, and until then the limits of the newest load still using
// it are in force.
func (h *Handler) Cleanup() error {
	h.cleanupLive()
	if h.guard.key != "" {
		h.guard.leave(h.guard.load)
		_, _ = guards.Delete(h.guard.key)
		h.guard.key = "" // once: the pool counts each handler once
	}
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

// limitsDiff lists the limits of a that b does not share, by option name.
func limitsDiff(a, b guardLimits) string {
	var out []string
	add := func(name string, x, y any) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %v", name, x))
		}
	}
	add("max_in_flight", a.InFlight, b.InFlight)
	add("max_main_thread", a.MainThread, b.MainThread)
	add("max_per_client", a.PerClient, b.PerClient)
	add("queue_length", a.Queue, b.Queue)
	add("queue_wait", a.Wait, b.Wait)
	add("timeout", a.Timeout, b.Timeout)
	add("coalesce", a.Coalesce, b.Coalesce)
	add("cache_size", a.CacheSize, b.CacheSize)
	add("max_response", a.MaxResponse, b.MaxResponse)
	add("max_held", a.MaxHeld, b.MaxHeld)
	add("instances", a.Instances, b.Instances)
	add("max_streams", a.Streams, b.Streams)
	add("max_streams_per_client", a.StreamsPerClient, b.StreamsPerClient)
	return strings.Join(out, ", ")
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

// durationOr resolves a duration option that can be off: 0 is def, and off
// is none (0).
func durationOr(d caddy.Duration, def time.Duration) time.Duration {
	switch d {
	case 0:
		return def
	case off:
		return 0
	}
	return time.Duration(d)
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// admit waits for the backend's capacity: the main-thread limiter first for
// the stations that need it, then the global one. Release the Permits when the
// backend is done with the request.
func (g *backendGuard) admit(ctx context.Context, ep *endpoint, withKey bool) (admission.Permits, error) {
	class := admission.Anonymous
	if withKey {
		class = admission.Keyed
	}
	if ep.mainThread && g.lim.Load().MainThread > 0 {
		return admission.AcquireAll(ctx, class, g.main, g.all)
	}
	return admission.AcquireAll(ctx, class, g.all)
}

// shared reports whether the endpoint's responses may go to more than one
// caller: then the backend is asked for an unencoded body, the same for every
// caller of the class.
func (g *backendGuard) shared(ep *endpoint) bool {
	return g.lim.Load().Coalesce || ep.cacheTTL > 0
}

// coalescing is the guard's coalescing group while the limits in force have
// coalescing on, or nil, which just runs each call.
func (g *backendGuard) coalescing() *coalesce.Group {
	if g.lim.Load().Coalesce {
		return g.flights
	}
	return nil
}

// caching is the guard's micro-cache while the limits in force have one, or
// nil, which holds nothing.
func (g *backendGuard) caching() *microcache.Cache {
	if g.lim.Load().CacheSize > 0 {
		return g.cache
	}
	return nil
}

// shareKey names what a response depends on: the field lists in force
// (policy), whether it goes through the field layer, which alone decides the
// bytes a caller gets (filtered for a caller without a key while auth is on,
// the backend's for everyone else), the site (siteOf: handlers of several
// sites may share a named guard), and the canonical upstream request. Never
// the key itself.
func (g *backendGuard) shareKey(r *http.Request, filtered bool) string {
	class := " whole "
	if filtered {
		class = " filtered "
	}
	return g.policy + class + siteOf(r) + " " + r.URL.EscapedPath() + "?" + r.URL.RawQuery
}

// siteOf tells sites apart: the Host as Caddy's host matcher compares it
// (without the port and a trailing dot, in lower case), and the port the
// request came in on, so that two sites of one host name on two ports are
// two sites whatever Host a client sends.
func siteOf(r *http.Request) string {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	site := strings.ToLower(strings.TrimSuffix(host, "."))
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, port, err := net.SplitHostPort(a.String()); err == nil {
			site += " port " + port
		}
	}
	return site
}

// refusal is a request the gateway answers with its own envelope instead of
// the backend's answer: what the backend step found, carried as an error
// through the paths that speak errors (coalesce.Do) for conclude to write.
type refusal struct{ verdict }

func (r *refusal) Error() string { return r.cause.Error() }

// streamed is the verdict on an answer too large to hold, which went to the
// client as it came: nothing is left to write, or, when it broke off, the
// connection to cut.
type streamed struct{ verdict }

func (s *streamed) Error() string { return "streamed to the client: " + s.outcome.String() }

// errStreamsFull is why an anonymous answer too large to hold is refused
// when half the backend's slots stream such answers already.
var errStreamsFull = errors.New("too many answers too large to hold are streaming")

// errQuota is why a client over max_per_client is refused.
var errQuota = errors.New("too many requests open for this client")

// errKeyQuota is why a key over its own max_in_flight is refused.
var errKeyQuota = errors.New("too many requests open for this key")

// clientAddress is the caller's address as Caddy determined it (after
// trusted_proxies), or the connection's; an IPv6 address stands for its
// prefix of prefix6 bits, because one host commonly has a whole /64 to pick
// addresses from.
func clientAddress(r *http.Request, prefix6 int) string {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			return r.RemoteAddr
		}
		addr = ap.Addr()
	}
	addr = addr.Unmap()
	if addr.Is4() || prefix6 >= 128 {
		return addr.String()
	}
	p, _ := addr.WithZone("").Prefix(prefix6)
	return p.String()
}

// forward is the backend step of ServeHTTP, the guard's one entry point. The
// backend's time and the client's are kept apart: within the request's
// budget the answer comes from the micro-cache, from an identical request's
// trip, or from a trip of the caller's own through admission; then, with
// every slot given back, it is written to the client at the client's pace,
// under the progress deadline, and held against the client's share of the
// held bytes until it is taken. It returns how the request ended; a refusal
// is conclude's to write, through the same progress deadline.
func (h *Handler) forward(x *exchange, next caddyhttp.Handler) verdict {
	g := &h.guard
	pw := progress.New(x.w, g.writeTimeout)
	defer pw.Done()
	x.w, x.forwarded = pw, true
	if err := g.held.Check(x.who.holder); err != nil {
		return heldRefusal(err).verdict
	}
	own := *x // what the steps below take: the budget is theirs, not conclude's
	if g.timeout > 0 {
		ctx, cancel := context.WithTimeout(own.r.Context(), g.timeout)
		defer cancel()
		own.r = own.r.WithContext(ctx)
	}
	if !g.shared(own.ep) {
		res, err := h.trip(own, next)
		v := h.answer(own, res, err)
		if res != nil {
			buffers.put(res.Body) // the caller's alone
		}
		return v
	}
	key := g.shareKey(own.r, own.filtered())
	// Only an endpoint with a time to live looks: a guard outlives a reload
	// that turns an endpoint's cache off, and what the old config stored
	// must not be served under the new one.
	if own.ep.cacheTTL > 0 {
		if e, fresh, ok := g.caching().GetStale(key); ok {
			v := h.deliver(own, &coalesce.Result{Status: e.Status, Header: e.Header, Body: e.Body}, true, metrics.Cached)
			if !fresh {
				h.refresh(own, key, next)
			}
			return v
		}
	}
	res, how, err := g.coalescing().Do(own.r.Context(), key, func(ctx context.Context) (*coalesce.Result, error) {
		lead := own
		lead.r = own.r.WithContext(ctx)
		res, err := h.trip(lead, next)
		if err == nil {
			g.store(key, own.ep, res)
		}
		return res, err
	})
	switch how {
	case coalesce.Shared:
		return h.deliver(own, res, true, metrics.Coalesced)
	case coalesce.Abandoned:
		return contextRefusal(err).verdict
	}
	// The caller's own trip.
	v := h.answer(own, res, err)
	if res != nil && res.Followers == 0 && own.ep.cacheTTL <= 0 {
		buffers.put(res.Body) // nobody else has it
	}
	return v
}

// answer is what the caller's own trip came to: the answer, delivered, or
// the gateway's refusal; a streamed answer is written already.
func (h *Handler) answer(x exchange, res *coalesce.Result, err error) verdict {
	switch err := err.(type) {
	case nil:
		outcome := metrics.Served
		if x.filtered() {
			outcome = metrics.Filtered
		}
		return h.deliver(x, res, h.guard.shared(x.ep), outcome)
	case *streamed:
		return err.verdict
	case *refusal:
		return err.verdict
	default:
		panic(fmt.Sprintf("statusgate: backend step ended in %v", err))
	}
}

// deliver writes a held answer to the client within the client's share of
// the held bytes, which it holds until the client has taken the answer or the
// progress deadline cut it off. shared says other callers may get the same
// bytes: the client is then told not to store it.
func (h *Handler) deliver(x exchange, res *coalesce.Result, shared bool, outcome metrics.Outcome) verdict {
	if err := h.guard.held.Hold(x.who.holder, res.Body); err != nil {
		return heldRefusal(err).verdict
	}
	defer h.guard.held.Release(x.who.holder, res.Body)
	writeHeld(x.w, res.Status, res.Header, res.Body, shared)
	_ = x.w.(*progress.Writer).Done()
	return verdict{outcome: outcome}
}

// heldRefusal answers a caller the held-bytes budget turned away.
func heldRefusal(err error) *refusal {
	if errors.Is(err, hold.ErrClientFull) {
		return tooMany(err)
	}
	return busy(err, "1")
}

// tooMany answers a caller over a limit of its own (its share, its place, its
// key's cap): 429, to ask again in a second.
func tooMany(cause error) *refusal {
	return &refusal{verdict{status: http.StatusTooManyRequests, outcome: metrics.RateLimited, retryAfter: "1", cause: cause}}
}

// busy answers a caller the backend has no room for: 503, to ask again after
// retryAfter seconds.
func busy(cause error, retryAfter string) *refusal {
	return &refusal{verdict{status: http.StatusServiceUnavailable, outcome: metrics.Busy, retryAfter: retryAfter, cause: cause}}
}

// badGateway answers a caller whose backend answer failed.
func badGateway(cause error) *refusal {
	return &refusal{verdict{status: http.StatusBadGateway, outcome: metrics.BackendError, cause: cause}}
}

// contextRefusal answers a caller whose request context ended while it
// waited: its budget is spent (504). A context also ends when its client
// leaves; conclude, which knows the client's own context, makes that
// client_gone.
func contextRefusal(err error) *refusal {
	return &refusal{verdict{status: http.StatusGatewayTimeout, outcome: metrics.BackendError, cause: err}}
}

// trip is one request's way to the backend and back, under the caller's
// per-client place and an admission slot, both given back when the backend
// is done. The answer is read into a spool: held whole when it fits
// max_response and the held bytes, and then returned; otherwise streamed to
// the caller's client as it comes, with the slot kept, and the followers of
// a shared trip released at once to make their own.
func (h *Handler) trip(x exchange, next caddyhttp.Handler) (*coalesce.Result, error) {
	g := &h.guard
	// Counted whether or not a bound is in force, so that a reload that sets
	// one finds what is open.
	if !x.who.counts {
		if !g.quota.Take(x.who.holder) {
			return nil, tooMany(errQuota)
		}
		defer g.quota.Give(x.who.holder)
	} else {
		// The key's own cap, before the queue: past it only this key's
		// caller is turned away, and nobody waits for it. Counted by the
		// key's name, under its cap in this config.
		if !g.keys.TakeUpTo(x.who.holder, x.who.keyCap) {
			return nil, tooMany(errKeyQuota)
		}
		defer g.keys.Give(x.who.holder)
	}
	ctx := x.r.Context()
	permits, err := g.admit(ctx, x.ep, x.who.counts)
	if err != nil {
		var be *admission.BusyError
		if errors.As(err, &be) {
			return nil, busy(err, strconv.Itoa(int(be.RetryAfter/time.Second)))
		}
		return nil, contextRefusal(err)
	}
	defer permits.Release()
	streaming := false
	defer func() {
		if streaming {
			g.streams.Add(-1)
		}
	}()
	sp := newSpool(x.w, g.maxResponse, g.held, func() error {
		if limit := g.maxStreams.Load(); !x.who.counts && limit > 0 {
			if g.streams.Add(1) > limit {
				g.streams.Add(-1)
				return errStreamsFull
			}
			streaming = true
		}
		coalesce.Release(ctx)
		return nil
	})
	// An HTTP/1.0 client has no chunked encoding: a filtered answer that
	// broke off mid-stream would reach it as a clean close after a 200, a
	// truncated body it cannot tell from a whole one. It gets answers held
	// whole, or a 502.
	sp.mustHold = x.filtered() && !x.r.ProtoAtLeast(1, 1)
	defer sp.free()
	own := x
	own.w = sp
	outcome, err := h.proxy(own, sp, next)
	switch {
	case errors.Is(sp.err, errStreamsFull):
		return nil, busy(sp.err, "1")
	case err != nil:
		return nil, err
	case sp.spilled:
		return nil, &streamed{verdict{outcome: outcome}}
	}
	res := sp.result()
	if res == nil {
		return nil, badGateway(errNoBody)
	}
	return res, nil
}

// store puts a whole response of a cached endpoint into the micro-cache: for
// its time to live, or, for a snapshot station, until the backend's next
// snapshot is due if that is later (see BackendConfig.Snapshot).
func (g *backendGuard) store(key string, ep *endpoint, res *coalesce.Result) {
	if res == nil || ep.cacheTTL <= 0 || res.Status != http.StatusOK {
		return // only a whole answer: never a part (206) or a "not modified" (304)
	}
	ttl := ep.cacheTTL
	if ep.snapshot > 0 {
		if at, ok := snapshotTime(res.Body); ok {
			if due := time.Until(at.Add(ep.snapshot)); due > ttl {
				ttl = min(due, ep.snapshot) // a clock ahead of ours never keeps it longer
			}
		}
	}
	g.caching().Put(key, microcache.Entry{Status: res.Status, Header: res.Header, Body: res.Body}, ttl)
}

// snapshotTime is the meta.cachedAt of a backend envelope: when the snapshot
// it carries was taken. gjson finds that one member without decoding the body
// (the station's data is skipped, not built); the value counts only when it
// is a JSON integer literal in int64's range, as encoding/json would accept it
// into an int64: an absent or null cachedAt, a fraction, an exponent or a
// string is no snapshot time. The body is not validated: the filter refuses a
// broken body to every caller without a key, and a time read from one keeps
// the entry at most one snapshot interval.
func snapshotTime(body []byte) (time.Time, bool) {
	v := gjson.GetBytes(body, "meta.cachedAt")
	if v.Type != gjson.Number || !gjson.Valid(v.Raw) {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(v.Raw, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// refresh fetches a stale cache entry anew in the background, unless a refresh
// of it is under way: the callers meanwhile get the stale entry, so that no
// caller of a cached endpoint waits in the backend's queue. The refresh is a
// request of its own, with its own replacer and variables (Caddy's are the
// caller's, which the caller's handlers and log still use), the caller's
// canonical upstream request, the same admission and budget, and no caller to
// answer: its outcome is not counted.
func (h *Handler) refresh(x exchange, key string, next caddyhttp.Handler) {
	g := &h.guard
	if _, busy := g.refreshing.LoadOrStore(key, struct{}{}); busy {
		return
	}
	// The budget of its own: the caller's ends with the caller, and without
	// one a hung backend would hold this key's refreshes for ever.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.r.Context()), cmp.Or(g.timeout, staleGrace))
	r := backgroundRequest(ctx, x)
	go func() {
		defer g.refreshing.Delete(key)
		defer cancel()
		defer func() {
			// A response that broke off ends in http.ErrAbortHandler, which
			// net/http would have caught for a caller; here nobody would.
			if rec := recover(); rec != nil && rec != http.ErrAbortHandler {
				h.logger.Error("cache refresh failed", zap.String("endpoint", x.ep.name), zap.Any("panic", rec))
			}
		}()
		own := x
		own.w, own.r, own.repl = discardWriter{}, r, nil
		if res, err := h.trip(own, next); err == nil {
			g.store(key, x.ep, res)
		}
	}()
}

// backgroundRequest is a copy of x's canonical upstream request for a trip
// nobody waits for (a refresh, a live stream's poll), under ctx: with its own
// replacer and variables, which carry x's endpoint, key and client
// placeholders, because Caddy's are the caller's, which the caller's
// handlers and log still use.
func backgroundRequest(ctx context.Context, x exchange) *http.Request {
	srv, _ := x.r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	r := x.r.Clone(ctx)
	r.Body = http.NoBody
	repl := caddy.NewReplacer()
	for _, p := range []string{placeholderEndpoint, placeholderKey, placeholderClient} {
		v, _ := x.repl.Get(p)
		repl.Set(p, v)
	}
	return caddyhttp.PrepareRequest(r, repl, nil, srv)
}

// discardWriter is the client of a background refresh: nobody.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) WriteHeader(int)             {}
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
