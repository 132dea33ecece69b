package caddymodule

// This file is the live streams' options (LiveConfig, part of the backend
// options), their defaults and their checks.

import (
	"cmp"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// LiveConfig bounds the live streams. It is part of BackendConfig, so its
// options sit beside the other limits in the JSON (backend.max_streams)
// and the Caddyfile. As there, an absent field or 0 is the default, and -1
// (off in the Caddyfile) switches off an option that can be off.
type LiveConfig struct {
	// MaxStreams is the most live streams open at once on this handler's
	// guard; past it a caller gets 503 Backend busy with Retry-After, as a
	// plain GET would get from a full queue. Default: 10000. Off (-1): no
	// bound.
	MaxStreams int `json:"max_streams,omitempty" statusgate:"server" caddyfile:"max_streams <n>"`

	// MaxStreamsPerClient is the most live streams one client has open at
	// once: an address (an IPv6 address by its client_prefix_v6 prefix), or
	// a key by its name where the key counts; past it the caller gets 429
	// Too many requests with Retry-After. Default: 4. Off (-1): no bound.
	MaxStreamsPerClient int `json:"max_streams_per_client,omitempty" statusgate:"door" caddyfile:"max_streams_per_client <n>"`

	// MaxTopics is the most answers the live streams of this handler's
	// guard have polled at once (a topic: an endpoint and the query it
	// reads, a class of caller, a site), each one trip per cache or
	// snapshot time; past it a stream that would start a new one gets 503
	// Backend busy with Retry-After, while streams of the topics polled
	// still join them. A caller whose key opens the endpoint is never
	// refused while anonymous callers' topics hold places: the anonymous
	// topic with the fewest viewers ends and the keyed one takes its place.
	// Default: 1000. Off (-1): no bound.
	MaxTopics int `json:"max_topics,omitempty" statusgate:"server" caddyfile:"max_topics <n>"`

	// StreamLifetime is how long a stream lasts (less up to a tenth, so
	// that streams opened together do not end together); then it ends
	// cleanly and the client reconnects (EventSource does so by itself), so
	// that its key and the policy are checked again. Default: 10m. Off (-1):
	// no end of its own (a reload still ends it).
	StreamLifetime caddy.Duration `json:"stream_lifetime,omitempty" statusgate:"door" caddyfile:"stream_lifetime <duration>"`

	// StreamHeartbeat is how long a stream stays silent before a comment
	// line is written, which keeps proxies and load balancers in front from
	// closing it as idle. Default: 15s. Cannot be off: a silent stream is
	// closed by whatever sits in front.
	StreamHeartbeat caddy.Duration `json:"stream_heartbeat,omitempty" statusgate:"door" caddyfile:"stream_heartbeat <duration>" notoff:"a stream that stays silent is closed by the proxies in front"`
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

// liveLimits is LiveConfig resolved: defaults applied, off as 0. The
// guard's streams and topics are its limits (guard.Limits).
type liveLimits struct {
	perClient           int
	lifetime, heartbeat time.Duration
	writeTimeout        time.Duration // the handler's (BackendConfig.writeTimeout)
}

// resolveLive applies the defaults to c, whose numbers the backend
// options' check (checkNumbers) has taken.
func resolveLive(c LiveConfig) liveLimits {
	var l liveLimits
	l.perClient = offOr(c.MaxStreamsPerClient, defaultMaxStreamsPerClient)
	l.lifetime = durationOr(c.StreamLifetime, defaultStreamLifetime)
	l.heartbeat = cmp.Or(time.Duration(c.StreamHeartbeat), defaultStreamHeartbeat)
	return l
}
