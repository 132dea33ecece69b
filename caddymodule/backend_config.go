package caddymodule

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
)

// BackendConfig is how the gateway spares the backend: the ServerAPI plugin
// serves HTTP from 8 threads with an unbounded queue, /player can block for
// about 1.4 s and /placeholders runs on the game's main thread for up to 2 s.
// Every limit is on by default. One spelling throughout: an absent field or
// 0 means the default, and -1 (off in the Caddyfile) switches off an option
// that can be off. The options that bound memory, and those for which off
// would mean nothing, cannot be: each says why, and -1 is a config error.
// Each option is declared once, by tags beside its JSON name (optionDecl):
// the server's or the front door's, why it cannot be off, its Caddyfile
// line.
type BackendConfig struct {
	// MaxInFlight is the most requests the backend works on at once; the
	// rest wait in the queue. Default: 8, the plugin's http.threads. Off
	// (-1): no admission control (the main-thread limit still applies).
	MaxInFlight int `json:"max_in_flight,omitempty" statusgate:"server" caddyfile:"max_in_flight <n>"`

	// MaxMainThread is the most requests at once to the stations that run on
	// the game's main thread (placeholders), within MaxInFlight; up to 8 of
	// them wait (fewer when QueueLength is below 8). Default: 1, so that
	// they never queue up on the tick. Off (-1): no limit of their own.
	MaxMainThread int `json:"max_main_thread,omitempty" statusgate:"server" caddyfile:"max_main_thread <n>"`

	// MaxPerClient is the most requests one anonymous client (by its address,
	// Caddy's client IP) has at the backend or waiting for it at once; past
	// it the caller gets 429 Too many requests at once, so that one client on
	// many connections cannot fill the queue. Callers with an accepted key
	// are not counted (outside the key's scope they are anonymous callers,
	// and are). The handler's own choice: a client's places are counted
	// once at the guard, and each handler in front of the backend refuses
	// past its own bound. Default: 4. Off (-1): no limit.
	MaxPerClient int `json:"max_per_client,omitempty" statusgate:"door" caddyfile:"max_per_client <n>"`

	// QueueLength is the most requests waiting for the backend; past it a
	// caller gets 503 Backend busy at once. Callers with an accepted key are
	// served from the queue before anonymous ones. Default: 64. Off (-1): no
	// queue, for the main-thread stations either: when every slot is busy a
	// caller gets 503 Backend busy at once.
	QueueLength int `json:"queue_length,omitempty" statusgate:"server" caddyfile:"queue <length> [<wait>]"`

	// QueueWait is the longest a request waits in the queue before it gets
	// 503 Backend busy with Retry-After. Default: 2s. Cannot be off: nobody
	// waits without a bound (switch the queue off instead); with the queue
	// off it must be left out (or 0).
	QueueWait caddy.Duration `json:"queue_wait,omitempty" statusgate:"server" notoff:"nobody waits without a bound" instead:"to refuse at once when the backend is busy, set queue_length to -1"`

	// Timeout is each forwarded request's budget, from the queue to the last
	// byte of the backend's response; past it the caller gets 504 Gateway
	// timeout (or a cut connection if the response was under way). Default:
	// 5s (the plugin's slowest station, 2 s, plus the queue wait and
	// headroom). Off (-1): no budget.
	Timeout caddy.Duration `json:"timeout,omitempty" statusgate:"door" caddyfile:"timeout <duration>"`

	// Coalesce lets concurrent identical requests (same upstream path and
	// query, same treatment: filtered or whole) share one backend request
	// and its bytes. Responses larger than max_response, errors, 429s
	// and 5xx are never shared. Default: true. Off: false.
	Coalesce *bool `json:"coalesce,omitempty" statusgate:"door" caddyfile:"coalesce on"`

	// Cache is the micro-cache's time to live per endpoint for successful
	// responses, kept apart for anonymous and keyed callers. An entry
	// replaces that endpoint's default. Defaults follow the plugin's
	// snapshot intervals so that caching adds little staleness: status 1s
	// (snapshot every 5 s), entities 5s (20 s), worlds, gamerules and
	// spawnlimits 30s (10 min); every live station is off. Off (-1): that
	// endpoint is not cached. 0 is a config error, because in this map it
	// would not say whether the default or off was meant.
	Cache map[string]caddy.Duration `json:"cache,omitempty" statusgate:"door" caddyfile:"cache <endpoint> <duration>"`

	// Snapshot is the plugin's refresh interval of each snapshot station
	// (its cache.*-ticks divided by 20), which makes the micro-cache
	// snapshot-aware: a response carries the time of its snapshot
	// (meta.cachedAt), and is kept until the next snapshot is due, however
	// much longer that is than its time to live, because until then the
	// plugin would answer with the same snapshot. Defaults: the plugin's,
	// status 5s, entities 20s, worlds, gamerules and spawnlimits 10m. Off
	// (-1): not a snapshot station (only the time to live counts). 0 is a
	// config error, as in Cache.
	Snapshot map[string]caddy.Duration `json:"snapshot,omitempty" statusgate:"door" caddyfile:"snapshot <endpoint> <duration>"`

	// CacheSize bounds the micro-cache's memory in bytes; the least recently
	// used entries go first. Default: 16 MiB. Off (-1): no micro-cache at
	// all, for every endpoint; a Cache entry other than -1 is then a config
	// error.
	CacheSize int64 `json:"cache_size,omitempty" statusgate:"server" caddyfile:"cache_size <size>"`

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
	MaxResponse int64 `json:"max_response,omitempty" statusgate:"server" caddyfile:"max_response <size>" notoff:"it bounds the memory one answer takes"`

	// MaxHeld bounds the bytes held for clients that have not read them yet,
	// across all requests and HTTP/2 streams of this guard; one client (an
	// address, or a key) holds at most a sixteenth of it, and never less than
	// MaxResponse. Past a client's share that client gets 429 Too many
	// requests; past the whole, callers get 503 Backend busy, both with
	// Retry-After, and nobody else waits. Default: 64 MiB. Cannot be off: it
	// bounds the memory slow clients can make the gateway hold.
	MaxHeld int64 `json:"max_held,omitempty" statusgate:"server" caddyfile:"max_held <size>" notoff:"it bounds the memory slow clients can make the gateway hold"`

	// WriteTimeout is how long a write to the client may go without the
	// client taking a piece (32 KiB) of the answer; past it the connection
	// (HTTP/1) or the stream (HTTP/2) is cut and what the gateway held for
	// the client is given back. Default: 10s. Off (-1): no deadline.
	WriteTimeout caddy.Duration `json:"write_timeout,omitempty" statusgate:"door" caddyfile:"write_timeout <duration>"`

	// ClientPrefix6 is how many leading bits of an IPv6 address name one
	// client for the per-client limits (max_per_client and the held bytes'
	// share): a host commonly has a /64 to pick addresses from, and counting
	// each address would give it 2^64 places. Default: 64. Cannot be off:
	// every address belongs to some client; 128 counts each address as one.
	ClientPrefix6 int `json:"client_prefix_v6,omitempty" statusgate:"door" caddyfile:"client_prefix_v6 <bits>" notoff:"every address belongs to some client; 128 counts each IPv6 address as its own" number:"a prefix length" most:"128"`

	// Guard names the backend guard: the admission limits, the per-client
	// and per-key counts, the held bytes, coalescing and the micro-cache.
	// Handlers that name the same guard (in front of the same backend) share
	// one, with the same server limits; the front door's choices stay each
	// handler's. A reload keeps a guard, with every count,
	// and puts changed limits in force on it in place. Default: the guard
	// of the declared backend, named by what of the declaration picks the
	// server (its upstreams, Host, rewrite and TLS server name), shared by
	// every handler that declares it; in the form of 1.0, which declares
	// none, one guard for the counts of every such handler in the process
	// (docs/backend-protection.md). Cannot be off (every handler has a
	// guard), and so "off" is not a name.
	Guard string `json:"guard,omitempty" statusgate:"server" caddyfile:"guard <name>" notoff:"every handler has one; leave guard out for the guard of the backend the handler declares"`

	// Instances says this gateway is one of k in front of the same backend
	// (docs/cluster.md): MaxInFlight, QueueLength and MaxHeld are divided by
	// k, rounded down and at least 1, so that k gateways together give the
	// backend no more than one would. The main-thread lane is not divided:
	// it belongs to one instance, and the others disable placeholders.
	// Default: 1. Cannot be off: every gateway is one of at least one.
	Instances int `json:"instances,omitempty" statusgate:"server" caddyfile:"instances <k>" notoff:"every gateway is one of at least one; leave instances out (or write 1) for a gateway alone" number:"a count of gateways" leftout:"1"`

	// LiveConfig bounds the live streams: max_streams,
	// max_streams_per_client, max_topics, stream_lifetime, stream_heartbeat.
	LiveConfig
}

// Defaults of BackendConfig.
const (
	defaultTimeout      = 5 * time.Second // as long as guard.StaleGrace
	defaultWriteTimeout = 10 * time.Second
	defaultMaxResponse  = 4 << 20
	defaultMaxHeld      = 64 << 20
	// defaultClientPrefix6 is the /64 a host commonly has to itself.
	defaultClientPrefix6 = 64
)

// optionDefaults are the defaults of the backend options a guard's limit
// takes (guard.Limits), by JSON name.
var optionDefaults = map[string]any{
	"max_in_flight":   admission.DefaultLimit,
	"max_main_thread": admission.DefaultMainThreadLimit,
	"max_per_client":  admission.DefaultQuota,
	"queue_length":    admission.DefaultQueue,
	"queue_wait":      admission.DefaultWait,
	"timeout":         defaultTimeout,
	"coalesce":        true,
	"cache_size":      microcache.DefaultMaxBytes,
	"max_response":    defaultMaxResponse,
	"max_held":        defaultMaxHeld,
	"instances":       1,
	"max_streams":     defaultMaxStreams,
	"max_topics":      defaultMaxTopics,
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
