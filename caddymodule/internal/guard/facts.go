package guard

import (
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/jsonfilter"
)

// Station is what the guard knows of an endpoint: the handler's endpoint
// table holds the rest (its routes, parameters and switches).
type Station struct {
	Name       string        // "status", "custom/votes"
	MainThread bool          // admitted through the main-thread limiter too
	CacheTTL   time.Duration // the micro-cache's time to live; 0: not cached
	Snapshot   time.Duration // the backend's refresh interval of the station; 0: live or unknown
	// Fields are the protected fields the field layer strips for a
	// filtered caller; nil while auth is off or when the list is empty.
	Fields *jsonfilter.Names
	// Metrics are the endpoint's counters; nil, counting nothing, while
	// the endpoint is disabled.
	Metrics *metrics.Endpoint
}

// Caller is what the guard knows of who sent a request, as far as one
// endpoint is concerned: the handler worked it out from the accepted key
// and its scope, and a key outside its scope counts for nothing here.
type Caller struct {
	// Keyed says the key opens this endpoint: the keyed queue class, no
	// per-client limit, the key's own cap.
	Keyed bool
	// Authenticated says the endpoint treats the caller as authenticated:
	// its key counts, or auth is off. Everyone else gets the field layer and
	// meta.authenticated:false, or the 401/404 of a protected endpoint.
	Authenticated bool
	// Holder names the caller for the per-client limits (max_per_client and
	// the held bytes): its key's name when the key counts, its address
	// otherwise.
	Holder string
	// KeyCap is the key's own cap on open requests when the key counts;
	// 0: none.
	KeyCap int
	// Gateway says the caller is the gateway itself, asking on its own
	// behalf (a network its members, the game metrics their figures): it
	// takes no per-client place (its trips are one per class and snapshot
	// already), only its admission class's.
	Gateway bool
	// Held is the caller's share of the held bytes: the key's own when the
	// key counts, the guard's share for one address otherwise.
	Held hold.Share
}

// Filtered reports whether the caller's answers go through the field layer.
func (c Caller) Filtered() bool { return !c.Authenticated }
