package caddymodule

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
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
	// and are). The handler's own choice: a client's places are counted
	// once at the guard, and each handler in front of the backend refuses
	// past its own bound. Default: 4. Off (-1): no limit.
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
	// and puts changed limits in force on it in place. Default: the guard
	// of the declared backend, named by what of the declaration picks the
	// server (its upstreams, Host, rewrite and TLS server name), shared by
	// every handler that declares it; in the form of 1.0, which declares
	// none, one guard for the counts of every such handler in the process
	// (docs/backend-protection.md). Cannot be off (every handler has a
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
	// max_streams_per_client, max_topics, stream_lifetime, stream_heartbeat.
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
	"guard":            "every handler has one; leave guard out for the guard of the backend the handler declares",
	"instances":        "every gateway is one of at least one; leave instances out (or write 1) for a gateway alone",
	"stream_heartbeat": "a stream that stays silent is closed by the proxies in front",
}

// guardLimits is BackendConfig resolved: defaults applied, off as 0. The
// handlers of one config that share a guard give it the same server limits
// (server); the newest config's are in force (guardState.use).
type guardLimits struct {
	InFlight, MainThread, PerClient, Queue int
	Wait, Timeout                          time.Duration
	Coalesce                               bool
	CacheSize, MaxResponse, MaxHeld        int64
	// Instances is how many gateways share the backend; the limits above
	// are this one's share (perInstance).
	Instances int
	// Streams and StreamsPerClient bound the live streams, Topics what
	// they poll (LiveConfig): their seats are the guard's.
	Streams, StreamsPerClient, Topics int
}

// server is l less the front door's choices: what the backend's guard
// shares among every handler in front of it (its slots, queue, main-thread
// lane, held bytes, cache, streams and topics), on which they must agree.
// How many places one client may take (max_per_client, and
// max_streams_per_client for streams), a request's budget (timeout) and
// whether identical requests share a trip (coalesce) are each handler's
// own: a public site and a staff dashboard in front of
// one server may choose differently, and still count at one guard.
func (l guardLimits) server() guardLimits {
	l.PerClient, l.Timeout, l.Coalesce, l.StreamsPerClient = 0, 0, false, 0
	return l
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
			return l, fmt.Errorf("backend.%s: %d is not a limit: write a whole number of at least 1, or -1 for off (leave it out for the default)", n.name, n.v)
		}
	}
	for _, d := range []struct {
		name string
		v    caddy.Duration
	}{{"timeout", c.Timeout}, {"write_timeout", c.WriteTimeout}} {
		if d.v < off {
			return l, fmt.Errorf("backend.%s: %v is negative: write a positive duration, or -1 for off (leave it out for the default)", d.name, time.Duration(d.v))
		}
	}
	switch {
	case c.QueueWait == off:
		return l, fmt.Errorf("backend.queue_wait cannot be off (-1): %s; to refuse at once when the backend is busy, set queue_length to -1", whyNotOff["queue_wait"])
	case c.QueueWait < 0:
		return l, fmt.Errorf("backend.queue_wait: %v is negative: write a positive duration (leave it out for the default)", time.Duration(c.QueueWait))
	case c.QueueWait > 0 && c.QueueLength == off:
		return l, fmt.Errorf("backend.queue_wait: %v, but queue_length is -1 (off): there is no queue to wait in", time.Duration(c.QueueWait))
	}
	if c.CacheSize < off {
		return l, fmt.Errorf("backend.cache_size: %d is not a size: write bytes, at least 1, or -1 for off (leave it out for the default)", c.CacheSize)
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"max_response", c.MaxResponse}, {"max_held", c.MaxHeld}} {
		if n.v == off {
			return l, fmt.Errorf("backend.%s cannot be off (-1): %s", n.name, whyNotOff[n.name])
		}
		if n.v < 0 {
			return l, fmt.Errorf("backend.%s: %d is not a size: write bytes, at least 1 (leave it out for the default)", n.name, n.v)
		}
	}
	if c.ClientPrefix6 == off {
		return l, fmt.Errorf("backend.client_prefix_v6 cannot be off (-1): %s", whyNotOff["client_prefix_v6"])
	}
	if c.ClientPrefix6 < 0 || c.ClientPrefix6 > 128 {
		return l, fmt.Errorf("backend.client_prefix_v6: %d is not a prefix length from 1 to 128", c.ClientPrefix6)
	}
	if err := guardNameError("backend.guard", c.Guard); c.Guard != "" && err != nil {
		return l, err
	}
	switch {
	case c.Instances == off:
		return l, fmt.Errorf("backend.instances cannot be off (-1): %s", whyNotOff["instances"])
	case c.Instances < 0:
		return l, fmt.Errorf("backend.instances: %d is not a count of gateways: write a whole number of at least 1 (leave it out for 1)", c.Instances)
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
			}
		}
	}
	if ep, ok := c.cachedWithoutCache(); ok {
		return l, fmt.Errorf("backend.cache.%s: %v, but cache_size is -1 (no micro-cache): write -1 or leave %s out", ep, time.Duration(c.Cache[ep]), ep)
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
	if l.MaxResponse > l.MaxHeld {
		return l, fmt.Errorf("backend.max_response: %d (%s) is more than max_held, %d (%s): no answer that large could be held; write max_held %d or more, or a smaller max_response",
			l.MaxResponse, sizeText(l.MaxResponse), l.MaxHeld, sizeText(l.MaxHeld), l.MaxResponse)
	}
	if why := c.instancesTooMany(); why != "" {
		return l, fmt.Errorf("backend.instances: %d %s", c.Instances, why)
	}
	return l.perInstance(max(1, c.Instances)), nil
}

// instancesTooMany says why c's instances cannot divide its held bytes, or
// "": each gateway's share of max_held must hold an answer of max_response
// whole. The Caddyfile's error and the JSON's.
func (c BackendConfig) instancesTooMany() string {
	held, response := cmp.Or(c.MaxHeld, defaultMaxHeld), cmp.Or(c.MaxResponse, defaultMaxResponse)
	if c.Instances <= 1 || held <= 0 || response <= 0 || response > held || held/int64(c.Instances) >= response {
		return ""
	}
	return fmt.Sprintf("is too many gateways to divide max_held (%d bytes) among: each would hold %d bytes, less than max_response (%d bytes), the largest answer a gateway must be able to hold; with these sizes at most %d gateways can share the backend: write the number of gateways, raise max_held or lower max_response",
		held, held/int64(c.Instances), response, held/response)
}

// clientShare is what one client (an address, or a key without a share of
// its own) may hold of the held bytes: a sixteenth of max_held, and never
// less than max_response, which one answer may take.
func (l guardLimits) clientShare() int64 {
	return min(l.MaxHeld, max(l.MaxHeld/16, l.MaxResponse))
}

// anonymousHeld is what anonymous clients may hold of the held bytes
// together: half of max_held, so that the other half is always there for
// keyed callers, whatever a flood of addresses holds (hold.Budget). An
// anonymous answer larger than it is never held whole: it streams to its
// client as one over max_response does.
func (l guardLimits) anonymousHeld() int64 {
	return max(1, l.MaxHeld/2)
}

// keyShares gives every key of info, configured as keys, its share of the
// held bytes under the guard's limits l: its own max_held, checked against
// l, or keyShare; writeTimeout is the handler's. Errors name the key as
// loadKeys does.
func keyShares(info []keyInfo, keys []apikey.Key, l guardLimits, writeTimeout time.Duration) error {
	for i := range info {
		k := keys[info[i].entry]
		if k.MaxHeld > 0 {
			if err := keyHeldError(k.MaxHeld, strconv.FormatInt(k.MaxHeld, 10), l); err != nil {
				return fmt.Errorf("auth.%s: %v", apikey.EntryPath(info[i].entry, fmt.Sprint(info[i].name)), err)
			}
		}
		info[i].held = keyShare(k, l, writeTimeout)
	}
	return nil
}

// keyShare is the share of the held bytes of key k under the limits l: its
// max_held, or by default enough for as many answers of max_response as the
// guard admits for it at once (its max_in_flight, or the backend's), so that
// a key that reads what it asks for is never refused for what it holds while
// it reads; at most half of max_held, so that a key that stops reading
// leaves the other half to everyone else, and never less than an address's
// share. Either way it is judged by progress (hold.Share): a key is the
// operator's client, refused for its bytes only once it has taken nothing
// of them for half of writeTimeout (0: off, and half the default then): past
// the bursts in which a slow reader takes its answers, and before the cut.
func keyShare(k apikey.Key, l guardLimits, writeTimeout time.Duration) hold.Share {
	s := hold.Share{Bytes: k.MaxHeld, Patience: cmp.Or(writeTimeout, defaultWriteTimeout) / 2, Keyed: true}
	if s.Bytes > 0 {
		return s
	}
	admitted := cmp.Or(k.MaxInFlight, l.InFlight) // 0: no admission control
	s.Bytes = l.MaxHeld / 2
	if admitted > 0 {
		s.Bytes = min(s.Bytes, int64(admitted)*l.MaxResponse)
	}
	s.Bytes = max(s.Bytes, l.clientShare())
	return s
}

// keyHeldError says why a key's max_held of held bytes, written as shown,
// does not fit the guard's limits l, or nil: the share is part of the
// guard's max_held, and must hold an answer of max_response. The Caddyfile's
// rule and the JSON's.
func keyHeldError(held int64, shown string, l guardLimits) error {
	switch {
	case held > l.MaxHeld && l.Instances > 1:
		return fmt.Errorf("max_held: %s is more than this gateway's share of the guard's max_held, %s (max_held / instances %d): a key's share is part of it; write at most %s, or raise max_held",
			shown, sizeText(l.MaxHeld), l.Instances, sizeText(l.MaxHeld))
	case held > l.MaxHeld:
		return fmt.Errorf("max_held: %s is more than the guard's max_held, %s: a key's share is part of it; write at most %s, or raise max_held",
			shown, sizeText(l.MaxHeld), sizeText(l.MaxHeld))
	case held < l.MaxResponse:
		return fmt.Errorf("max_held: %s is less than max_response, %s: an answer that large could never be held for the key; write at least %s, or lower max_response",
			shown, sizeText(l.MaxResponse), sizeText(l.MaxResponse))
	}
	return nil
}

// sizeText writes a size as the Caddyfile would: in whole MiB or KiB where
// it can, in bytes otherwise.
func sizeText(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n > 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10)
}

// guardNameError says why name, the value of the option at path, names no
// guard, or nil: the Caddyfile's rule and the JSON's.
func guardNameError(path, name string) error {
	switch {
	case name == "off":
		return fmt.Errorf("%s cannot be off ('off' is not a guard name): %s", path, whyNotOff["guard"])
	case !ident.Valid(name):
		return fmt.Errorf("%s: '%s' is not a name of letters, digits, '_' and '-'", path, name)
	}
	return nil
}

// cachedWithoutCache is an endpoint, the first by name, that c gives a time
// to live while cache_size is off: there is no micro-cache to keep it, a
// config error in the Caddyfile and the JSON alike.
func (c BackendConfig) cachedWithoutCache() (string, bool) {
	if c.CacheSize != off {
		return "", false
	}
	for _, name := range slices.Sorted(maps.Keys(c.Cache)) {
		if c.Cache[name] > 0 {
			return name, true
		}
	}
	return "", false
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
	add("max_topics", a.Topics, b.Topics)
	return strings.Join(out, ", ")
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

// offOr resolves a count option that can be off: 0 is def, and off is none
// (0).
func offOr(v, def int) int {
	if v == off {
		return 0
	}
	return cmp.Or(v, def)
}

// logShare says at startup what this gateway, one of several, admits: the
// operator checks there that the shares add up to the backend's capacity,
// and that the main-thread lane is open on one gateway only.
func logShare(logger *zap.Logger, l guardLimits, t *endpointTable, maxInFlight int) {
	if l.Instances <= 1 {
		return
	}
	lane := "open here: route every gateway's /placeholders to this one, and disable placeholders on the others"
	switch {
	case t.lookup("placeholders") == nil:
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
	logger.Info("one of several gateways in front of the backend: this one admits its share",
		zap.Int("instances", l.Instances), limit("max_in_flight", l.InFlight), limit("queue_length", l.Queue), zap.Int64("max_held", l.MaxHeld),
		zap.Int("max_main_thread", l.MainThread), zap.String("main_thread_lane", lane))
	// Each gateway admits at least 1: k gateways above the backend's
	// max_in_flight admit k together.
	if total := offOr(maxInFlight, admission.DefaultLimit); total > 0 && l.Instances > total {
		logger.Warn("instances is more than max_in_flight: each gateway admits at least 1 request at a time, so together the gateways put more requests at once on the backend than max_in_flight; run no more gateways than the backend has slots, or raise max_in_flight if the backend can take it",
			zap.Int("instances", l.Instances), zap.Int("max_in_flight", total), zap.Int("admitted_together", l.Instances*l.InFlight))
	}
}

// LiveConfig bounds the live streams. It is part of BackendConfig, so its
// options sit beside the other limits in the JSON (backend.max_streams)
// and the Caddyfile. As there, an absent field or 0 is the default, and -1
// (off in the Caddyfile) switches off an option that can be off.
type LiveConfig struct {
	// MaxStreams is the most live streams open at once on this handler's
	// guard; past it a caller gets 503 Backend busy with Retry-After, as a
	// plain GET would get from a full queue. Default: 10000. Off (-1): no
	// bound.
	MaxStreams int `json:"max_streams,omitempty"`

	// MaxStreamsPerClient is the most live streams one client has open at
	// once: an address (an IPv6 address by its client_prefix_v6 prefix), or
	// a key by its name where the key counts; past it the caller gets 429
	// Too many requests with Retry-After. Default: 4. Off (-1): no bound.
	MaxStreamsPerClient int `json:"max_streams_per_client,omitempty"`

	// MaxTopics is the most answers the live streams of this handler's
	// guard have polled at once (a topic: an endpoint and the query it
	// reads, a class of caller, a site), each one trip per cache or
	// snapshot time; past it a stream that would start a new one gets 503
	// Backend busy with Retry-After, while streams of the topics polled
	// still join them. A caller whose key opens the endpoint is never
	// refused while anonymous callers' topics hold places: the anonymous
	// topic with the fewest viewers ends and the keyed one takes its place.
	// Default: 1000. Off (-1): no bound.
	MaxTopics int `json:"max_topics,omitempty"`

	// StreamLifetime is how long a stream lasts (less up to a tenth, so
	// that streams opened together do not end together); then it ends
	// cleanly and the client reconnects (EventSource does so by itself), so
	// that its key and the policy are checked again. Default: 10m. Off (-1):
	// no end of its own (a reload still ends it).
	StreamLifetime caddy.Duration `json:"stream_lifetime,omitempty"`

	// StreamHeartbeat is how long a stream stays silent before a comment
	// line is written, which keeps proxies and load balancers in front from
	// closing it as idle. Default: 15s. Cannot be off: a silent stream is
	// closed by whatever sits in front.
	StreamHeartbeat caddy.Duration `json:"stream_heartbeat,omitempty"`
}

// Defaults of LiveConfig.
const (
	defaultMaxStreams          = 10000
	defaultMaxStreamsPerClient = 4
	defaultStreamLifetime      = 10 * time.Minute
	defaultStreamHeartbeat     = 15 * time.Second

	// defaultMaxTopics is far above what a site's viewers poll (a few
	// built-in answers per class and site, and a world's each), and bounds
	// the trips that streams of made-up answers cost.
	defaultMaxTopics = 1000
)

// liveLimits is LiveConfig resolved: defaults applied, off as 0.
type liveLimits struct {
	maxStreams, perClient, maxTopics int
	lifetime, heartbeat              time.Duration
}

// resolveLive checks c and applies the defaults.
// resolveGuard is resolveLimits and resolveLive together: c's limits with
// the live streams' bounds in them, and the streams' own options.
func resolveGuard(c BackendConfig) (guardLimits, liveLimits, error) {
	l, err := resolveLimits(c)
	if err != nil {
		return l, liveLimits{}, err
	}
	lv, err := resolveLive(c.LiveConfig)
	if err != nil {
		return l, lv, err
	}
	l.Streams, l.StreamsPerClient, l.Topics = lv.maxStreams, lv.perClient, lv.maxTopics
	return l, lv, nil
}

func resolveLive(c LiveConfig) (liveLimits, error) {
	var l liveLimits
	for _, n := range []struct {
		name string
		v    int
	}{{"max_streams", c.MaxStreams}, {"max_streams_per_client", c.MaxStreamsPerClient}, {"max_topics", c.MaxTopics}} {
		if n.v < off {
			return l, fmt.Errorf("backend.%s: %d is not a limit: write a whole number of at least 1, or -1 for off (leave it out for the default)", n.name, n.v)
		}
	}
	switch {
	case c.StreamLifetime < off:
		return l, fmt.Errorf("backend.stream_lifetime: %v is negative: write a positive duration, or -1 for off (leave it out for the default)", time.Duration(c.StreamLifetime))
	case c.StreamHeartbeat == off:
		return l, fmt.Errorf("backend.stream_heartbeat cannot be off (-1): %s", whyNotOff["stream_heartbeat"])
	case c.StreamHeartbeat < 0:
		return l, fmt.Errorf("backend.stream_heartbeat: %v is negative: write a positive duration (leave it out for the default)", time.Duration(c.StreamHeartbeat))
	}
	l.maxStreams = offOr(c.MaxStreams, defaultMaxStreams)
	l.perClient = offOr(c.MaxStreamsPerClient, defaultMaxStreamsPerClient)
	l.maxTopics = offOr(c.MaxTopics, defaultMaxTopics)
	l.lifetime = durationOr(c.StreamLifetime, defaultStreamLifetime)
	l.heartbeat = cmp.Or(time.Duration(c.StreamHeartbeat), defaultStreamHeartbeat)
	return l, nil
}
