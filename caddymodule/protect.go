package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/admission"
	"github.com/statusgate/statusgate/caddymodule/coalesce"
	"github.com/statusgate/statusgate/caddymodule/metrics"
	"github.com/statusgate/statusgate/caddymodule/microcache"
)

// BackendConfig is how the gateway spares the backend: the ServerAPI plugin
// serves HTTP from 8 threads with an unbounded queue, /player can block for
// about 1.4 s and /placeholders runs on the game's main thread for up to 2 s.
// Every limit is on by default.
type BackendConfig struct {
	// MaxInFlight is the most requests the backend works on at once; the
	// rest wait in the queue. -1 switches admission control off. Default: 8,
	// the plugin's http.threads.
	MaxInFlight int `json:"max_in_flight,omitempty"`

	// MaxMainThread is the most requests at once to the stations that run on
	// the game's main thread (placeholders), within MaxInFlight. -1: no limit
	// of their own. Default: 1, so that they never queue up on the tick.
	MaxMainThread int `json:"max_main_thread,omitempty"`

	// MaxPerClient is the most requests one anonymous client (by its address,
	// Caddy's client IP) has at the backend or waiting for it at once; past
	// it the caller gets 429 Too many requests at once, so that one client on
	// many connections cannot fill the queue. Callers with an accepted key
	// are not counted. -1: no limit. Default: 4.
	MaxPerClient int `json:"max_per_client,omitempty"`

	// QueueLength is the most requests waiting for the backend; past it a
	// caller gets 503 Backend busy at once. Callers with an accepted key are
	// served from the queue before anonymous ones. Default: 64.
	QueueLength int `json:"queue_length,omitempty"`

	// QueueWait is the longest a request waits in the queue before it gets
	// 503 Backend busy with Retry-After. Default: 2s.
	QueueWait caddy.Duration `json:"queue_wait,omitempty"`

	// Timeout is each forwarded request's budget, from the queue to the last
	// byte of the backend's response; past it the caller gets 504 Gateway
	// timeout (or a cut connection if the response was under way). -1: no
	// budget. Default: 5s (the plugin's slowest station, 2 s, plus the queue
	// wait and headroom).
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// Coalesce lets concurrent identical requests (same upstream path and
	// query, same treatment: filtered or whole) share one backend request
	// and its bytes. Responses larger than the 256 KiB hold-back, errors, 429s
	// and 5xx are never shared. Default: true.
	Coalesce *bool `json:"coalesce,omitempty"`

	// Cache is the micro-cache's time to live per endpoint for successful
	// responses, kept apart for anonymous and keyed callers; 0 switches it off
	// for that endpoint. An entry replaces that endpoint's default. Defaults
	// follow the plugin's snapshot intervals so that caching adds little
	// staleness: status 1s (snapshot every 5 s), entities 5s (20 s), worlds,
	// gamerules and spawnlimits 30s (10 min); every live station is off.
	Cache map[string]caddy.Duration `json:"cache,omitempty"`

	// Snapshot is the plugin's refresh interval of each snapshot station
	// (its cache.*-ticks divided by 20), which makes the micro-cache
	// snapshot-aware: a response carries the time of its snapshot
	// (meta.cachedAt), and is kept until the next snapshot is due, however
	// much longer that is than its time to live, because until then the
	// plugin would answer with the same snapshot. 0: not a snapshot station
	// (only the time to live counts). Defaults: the plugin's, status 5s,
	// entities 20s, worlds, gamerules and spawnlimits 10m.
	Snapshot map[string]caddy.Duration `json:"snapshot,omitempty"`

	// CacheSize bounds the micro-cache's memory in bytes; the least recently
	// used entries go first. Default: 16 MiB.
	CacheSize int64 `json:"cache_size,omitempty"`
}

// Defaults of BackendConfig.
const (
	defaultTimeout = 5 * time.Second
)

// staleGrace is how long past its time to live a cache entry is still served
// while one request refreshes it: the default request budget, so that a
// refresh that fails or times out is retried before callers are made to wait.
const staleGrace = defaultTimeout

// backendGuard is the provisioned form of BackendConfig. It belongs to one
// Handler: a reload starts with an empty cache and no flights.
type backendGuard struct {
	all     *admission.Limiter // nil: no admission control
	main    *admission.Limiter // nil: main-thread stations share all
	timeout time.Duration      // 0: none
	flights *coalesce.Group    // nil: no coalescing
	cache   *microcache.Cache  // nil: no endpoint is cached
	// refreshing holds the cache keys being refreshed in the background.
	refreshing *sync.Map
	quota      *admission.Quota // per anonymous client; nil: none
}

// newBackendGuard checks c and builds the limiters.
func newBackendGuard(c BackendConfig) (backendGuard, error) {
	var g backendGuard
	for _, n := range []struct {
		name string
		v    int
	}{{"max_in_flight", c.MaxInFlight}, {"max_main_thread", c.MaxMainThread}, {"max_per_client", c.MaxPerClient}, {"queue_length", c.QueueLength}} {
		if n.v < -1 || (n.v == -1 && n.name == "queue_length") {
			return g, fmt.Errorf("backend.%s: %d is not a valid limit", n.name, n.v)
		}
	}
	for _, d := range []struct {
		name string
		v    caddy.Duration
	}{{"queue_wait", c.QueueWait}, {"timeout", c.Timeout}} {
		if d.v < 0 && !(d.name == "timeout" && d.v == -1) {
			return g, fmt.Errorf("backend.%s: %v is negative", d.name, time.Duration(d.v))
		}
	}
	queue := orDefault(c.QueueLength, admission.DefaultQueue)
	wait := time.Duration(c.QueueWait)
	if wait == 0 {
		wait = admission.DefaultWait
	}
	if c.MaxInFlight != -1 {
		g.all = admission.New(admission.Config{Limit: orDefault(c.MaxInFlight, admission.DefaultLimit), Queue: queue, Wait: wait})
	}
	if c.MaxMainThread != -1 {
		g.main = admission.New(admission.Config{Limit: orDefault(c.MaxMainThread, admission.DefaultMainThreadLimit), Queue: min(queue, admission.DefaultMainThreadQueue), Wait: wait})
	}
	if c.MaxPerClient != -1 {
		g.quota = admission.NewQuota(orDefault(c.MaxPerClient, admission.DefaultQuota))
	}
	switch c.Timeout {
	case 0:
		g.timeout = defaultTimeout
	case -1:
	default:
		g.timeout = time.Duration(c.Timeout)
	}
	if c.CacheSize < 0 {
		return g, fmt.Errorf("backend.cache_size: %d is negative", c.CacheSize)
	}
	if c.Coalesce == nil || *c.Coalesce {
		g.flights = coalesce.New(coalesce.Config{MaxBody: holdBack, Timeout: g.timeout})
	}
	for section, m := range map[string]map[string]caddy.Duration{"cache": c.Cache, "snapshot": c.Snapshot} {
		for name, d := range m {
			if !validEndpointName(name) {
				return g, fmt.Errorf("backend.%s: %w", section, endpointNameError(name))
			}
			if d < 0 {
				return g, fmt.Errorf("backend.%s.%s: %v is negative", section, name, time.Duration(d))
			}
		}
	}
	return g, nil
}

// cacheTTLs applies the config's cache times to the endpoint table, and makes
// the cache if any endpoint uses it.
func (g *backendGuard) cacheTTLs(c BackendConfig, t *endpointTable) {
	for _, ep := range t.ordered {
		if ttl, ok := c.Cache[ep.name]; ok {
			ep.cacheTTL = time.Duration(ttl)
		}
		if every, ok := c.Snapshot[ep.name]; ok {
			ep.snapshot = time.Duration(every)
		}
		if ep.cacheTTL > 0 && g.cache == nil {
			g.cache = microcache.New(microcache.Config{MaxBytes: c.CacheSize, Grace: staleGrace})
			g.refreshing = new(sync.Map)
		}
	}
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
	if ep.mainThread && g.main != nil {
		return admission.AcquireAll(ctx, class, g.main, g.all)
	}
	return admission.AcquireAll(ctx, class, g.all)
}

// shared reports whether the endpoint's responses may go to more than one
// caller: then the backend is asked for an unencoded body, the same for every
// caller of the class.
func (g *backendGuard) shared(ep *endpoint) bool {
	return g.flights != nil || (g.cache != nil && ep.cacheTTL > 0)
}

// shareKey names what a response depends on: whether it goes through the
// field layer, which alone decides the bytes a caller gets (filtered for a
// caller without a key while auth is on, the backend's for everyone else), and
// the canonical upstream request. Never the key itself.
func shareKey(r *http.Request, filtered bool) string {
	class := "whole "
	if filtered {
		class = "filtered "
	}
	return class + r.URL.EscapedPath() + "?" + r.URL.RawQuery
}

// forwardShared answers from the micro-cache when it can, and otherwise lets
// identical concurrent requests share one trip to the backend. withKey says
// the caller presented an accepted key: it goes first in the queue and is not
// held to the per-client limit.
func (h *Handler) forwardShared(x exchange, withKey bool, next caddyhttp.Handler) error {
	g := &h.guard
	if !g.shared(x.ep) {
		return h.forwardGuarded(x, withKey, next)
	}
	key := shareKey(x.r, x.filtered)
	if e, fresh, ok := g.cache.GetStale(key); ok {
		writeShared(x.w, e.Status, e.Header, e.Body)
		h.settle(x.repl, x.ep, metrics.Cached)
		if !fresh {
			h.refresh(x, withKey, key, next)
		}
		return nil
	}
	var held *holdWriter // this caller's own trip, if it made one
	res, how, err := g.flights.Do(x.r.Context(), key, func(ctx context.Context) (*coalesce.Result, error) {
		held = newHoldWriter(x.w, holdBack)
		own := x
		own.w, own.r = held, x.r.WithContext(ctx)
		if err := h.forwardGuarded(own, withKey, next); err != nil {
			return nil, err
		}
		res := held.result()
		g.store(key, x.ep, res)
		return res, nil
	})
	switch how {
	case coalesce.Shared:
		writeShared(x.w, res.Status, res.Header, res.Body)
		h.settle(x.repl, x.ep, metrics.Coalesced)
	case coalesce.Abandoned:
		// The caller's own budget or connection ended while it waited.
		h.refuse(x, http.StatusGatewayTimeout, err)
		h.settle(x.repl, x.ep, metrics.BackendError)
	default: // the outcome is the caller's own trip's
		held.release()
	}
	return nil
}

// store puts a whole response of a cached endpoint into the micro-cache: for
// its time to live, or, for a snapshot station, until the backend's next
// snapshot is due if that is later (see BackendConfig.Snapshot).
func (g *backendGuard) store(key string, ep *endpoint, res *coalesce.Result) {
	if res == nil || ep.cacheTTL <= 0 {
		return
	}
	ttl := ep.cacheTTL
	if ep.snapshot > 0 {
		if at, ok := snapshotTime(res.Body); ok {
			if due := time.Until(at.Add(ep.snapshot)); due > ttl {
				ttl = min(due, ep.snapshot) // a clock ahead of ours never keeps it longer
			}
		}
	}
	g.cache.Put(key, microcache.Entry{Status: res.Status, Header: res.Header, Body: res.Body}, ttl)
}

// snapshotTime is the meta.cachedAt of a backend envelope: when the snapshot
// it carries was taken. It decodes the whole body, but only on a trip to the
// backend of a cached snapshot station, about once per snapshot.
func snapshotTime(body []byte) (time.Time, bool) {
	var doc struct {
		Meta struct {
			CachedAt *int64 `json:"cachedAt"`
		} `json:"meta"`
	}
	if json.Unmarshal(body, &doc) != nil || doc.Meta.CachedAt == nil {
		return time.Time{}, false
	}
	return time.UnixMilli(*doc.Meta.CachedAt), true
}

// errQuota is why a client over max_per_client is refused.
var errQuota = errors.New("too many requests open for this client")

// clientAddress is the caller's address as Caddy determined it (after
// trusted_proxies), or the connection's.
func clientAddress(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	return r.RemoteAddr
}

// refresh fetches a stale cache entry anew in the background, unless a refresh
// of it is under way: the callers meanwhile get the stale entry, so that no
// caller of a cached endpoint waits in the backend's queue. The refresh is a
// request of its own, with its own replacer and variables (Caddy's are the
// caller's, which the caller's handlers and log still use), the caller's
// canonical upstream request, the same admission and budget, and no caller to
// answer: its outcome is not counted.
func (h *Handler) refresh(x exchange, withKey bool, key string, next caddyhttp.Handler) {
	g := &h.guard
	if _, busy := g.refreshing.LoadOrStore(key, struct{}{}); busy {
		return
	}
	srv, _ := x.r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	ctx, cancel := context.WithoutCancel(x.r.Context()), context.CancelFunc(func() {})
	if g.timeout == 0 {
		// Without a budget of its own a hung backend would hold the refresh,
		// and with it this key's refreshes, for ever.
		ctx, cancel = context.WithTimeout(ctx, staleGrace)
	}
	r := x.r.Clone(ctx)
	r.Body = http.NoBody
	repl := caddy.NewReplacer()
	for _, p := range []string{placeholderEndpoint, placeholderKey, placeholderClient} {
		v, _ := x.repl.Get(p)
		repl.Set(p, v)
	}
	r = caddyhttp.PrepareRequest(r, repl, nil, srv)
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
		held := newHoldWriter(discardWriter{}, holdBack)
		own := exchange{w: held, r: r, ep: x.ep, filtered: x.filtered, decodedPath: x.decodedPath}
		if h.forwardGuarded(own, withKey, next) != nil {
			return
		}
		g.store(key, x.ep, held.result())
	}()
}

// discardWriter is the client of a background refresh: nobody.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) WriteHeader(int)             {}
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// forwardGuarded is the backend step of ServeHTTP: within the request's time
// budget, wait for the backend's capacity, then proxy. A caller refused for
// capacity gets 503 Backend busy with Retry-After.
func (h *Handler) forwardGuarded(x exchange, withKey bool, next caddyhttp.Handler) error {
	if !withKey && h.guard.quota != nil {
		client := clientAddress(x.r)
		if !h.guard.quota.Take(client) {
			x.w.Header().Set("Retry-After", "1")
			h.refuse(x, http.StatusTooManyRequests, errQuota)
			h.settle(x.repl, x.ep, metrics.RateLimited)
			return nil
		}
		defer h.guard.quota.Give(client)
	}
	ctx := x.r.Context()
	if h.guard.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.guard.timeout)
		defer cancel()
		x.r = x.r.WithContext(ctx)
	}
	h.metrics.QueueEnter(withKey)
	permits, err := h.guard.admit(ctx, x.ep, withKey)
	h.metrics.QueueLeave(withKey)
	if err != nil {
		var busy *admission.BusyError
		outcome := metrics.Busy
		switch {
		case errors.As(err, &busy):
			x.w.Header().Set("Retry-After", strconv.Itoa(int(busy.RetryAfter/time.Second)))
			h.refuse(x, http.StatusServiceUnavailable, err)
		case errors.Is(err, context.DeadlineExceeded):
			h.refuse(x, http.StatusGatewayTimeout, err)
			outcome = metrics.BackendError
		default:
			// The client went away while it waited: nobody reads the answer.
			h.refuse(x, http.StatusServiceUnavailable, err)
		}
		h.settle(x.repl, x.ep, outcome)
		return nil
	}
	defer permits.Release()
	return h.proxy(x, next)
}
