// Package caddymodule is statusgate: a Caddy HTTP handler that is the public face of a
// Minecraft server's stats API (the ServerAPI plugin, or anything that serves the same
// endpoints). The backend runs on a private address with its own auth off; statusgate
// decides every request before it goes there: the API key check, per-endpoint enable
// switches, 401 or a disguised 404, the synthesized endpoint index, the /api → /api/v1
// alias, exact path routing, and the streaming field layer that removes protected
// fields at any depth and lists them in meta.hiddenFields.
//
// The module ID is http.handlers.statusgate; the Caddyfile directive is statusgate.
package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/peers"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is the statusgate gateway. It answers what it decides itself (404, 401,
// 405, CORS preflight, the index) and hands every request it allows to the next
// handler, normally reverse_proxy, rewritten to the canonical upstream path.
//
// It sets these placeholders on every request it decides, for log_append,
// header, rate_limit keys and the like; every value comes from the config or
// from Caddy, never from the request itself, and never a secret:
//
// Placeholder | Description
// ------------|-------------
// `{http.statusgate.endpoint}` | the endpoint's name ("status", "custom/votes"); empty when the path is no enabled endpoint
// `{http.statusgate.key}` | the name of the caller's accepted key, also where its scope does not open the endpoint; empty without one, and while auth is off
// `{http.statusgate.client}` | the key's name when the caller's key opens the endpoint, the client IP (Caddy's, after trusted_proxies) otherwise: one value that tells callers apart, for rate limits
// `{http.statusgate.outcome}` | how the request ended: served, filtered, cached, coalesced, not_found, refused, busy, rate_limited, client_gone, ... (the full list in docs/observability.md)
type Handler struct {
	// Auth holds the access rules; it mirrors the backend plugin's auth.* keys.
	// Absent means the defaults: auth on, no keys, hide_protected on.
	Auth AuthConfig `json:"auth,omitzero"`

	// Endpoints switches endpoints on and off by name (docs/configuration.md). Every
	// built-in endpoint is enabled by default except whitelist and network;
	// custom/<name> stations exist only when enabled here.
	Endpoints map[string]bool `json:"endpoints,omitempty"`

	// Backend holds the limits that keep the backend and the game alive under
	// load: admission control, the request budget, coalescing, the
	// micro-cache. Absent means the defaults, every limit on.
	Backend BackendConfig `json:"backend,omitzero"`

	table   *endpointTable
	guard   backendGuard
	keys    *apikey.Keyring
	keyInfo []keyInfo // each key's name, scope and cap, by keyring position
	authOn  bool
	hide    bool
	qkey    bool
	index   *indexCache
	live    *liveState // the live streams (stream.go)
	metrics *metrics.Metrics
	logger  *zap.Logger
}

// AuthConfig is the access control of the gateway.
type AuthConfig struct {
	// Enabled is the global switch (auth.enabled). Off makes every endpoint and
	// field public and ignores require_key and protected_fields. Default: true.
	Enabled *bool `json:"enabled,omitempty"`

	// Keys are the accepted API keys; any number. Each is a string, the
	// secret or its digest "sha256:<64 hex digits>", or an object
	// {"name": "discord-bot", "key": "<secret or digest>", "endpoints":
	// ["status", "bans"], "max_in_flight": 2}; a key without a
	// name is called key-<n> by its position, counting from 1. endpoints is
	// the key's scope (default: every endpoint; the index is in every
	// scope): for any other endpoint its caller is a caller without a key.
	// max_in_flight caps the key's open requests, at the backend or queued;
	// past it its caller gets 429 at once (default: no cap of its own). The name is
	// what logs, placeholders and metrics show; names and secrets must be
	// distinct. Placeholders such as {env.NAME} and {file./path} are
	// expanded at provision time; surrounding white space is trimmed, and a
	// key that ends up empty is an error. Default: none, so that no caller
	// has a key.
	Keys []apikey.Key `json:"keys,omitempty"`

	// AllowQueryKey accepts the key in the ?key= query parameter as well as in
	// the X-API-Key header (auth.allow-query-key). Keys in URLs end up in
	// browser histories and logs, so it is meant for testing. Default: false.
	AllowQueryKey bool `json:"allow_query_key,omitempty"`

	// HideProtected answers an unauthorised request to a protected endpoint with
	// the same 404 as an unknown one, and leaves protected endpoints out of the
	// index for callers without a key (auth.hide-protected). Default: true.
	HideProtected *bool `json:"hide_protected,omitempty"`

	// RequireKey says per endpoint whether a key is required
	// (auth.require-key.<endpoint>). Default: index, status and player are
	// public; every other endpoint requires a key.
	RequireKey map[string]bool `json:"require_key,omitempty"`

	// ProtectedFields lists per endpoint the member names removed, at any
	// depth, from responses to callers without a key
	// (auth.protected-fields.<endpoint>). An entry replaces that endpoint's
	// default list; an empty list hides nothing. Default: player: op, banned,
	// chatplatform, discord; server: motd, ip, port; worlds: seed.
	ProtectedFields map[string][]string `json:"protected_fields,omitempty"`
}

// UnmarshalJSON reads the auth object, refusing null where it would read as
// an absence that opens more than the author meant: a require_key entry of
// null would make the endpoint public, and a protected_fields entry of null
// would hide nothing. Config generators write null for an empty value; the
// error names the path, as the handler's other config errors do.
func (a *AuthConfig) UnmarshalJSON(b []byte) error {
	type plain AuthConfig // without this method
	var raw struct {
		RequireKey      map[string]json.RawMessage `json:"require_key"`
		ProtectedFields map[string]json.RawMessage `json:"protected_fields"`
	}
	if err := json.Unmarshal(b, &raw); err == nil {
		for _, section := range []struct {
			name, why string
			m         map[string]json.RawMessage
		}{
			{"require_key", "write true or false", raw.RequireKey},
			{"protected_fields", "write the list of fields, or [] to hide none", raw.ProtectedFields},
		} {
			for _, ep := range slices.Sorted(maps.Keys(section.m)) {
				if string(bytes.TrimSpace(section.m[ep])) == "null" {
					return fmt.Errorf("auth.%s.%s: null is not a value: %s, or leave %s out for its default", section.name, ep, section.why, ep)
				}
			}
		}
	}
	return json.Unmarshal(b, (*plain)(a))
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.statusgate",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision resolves the config into the tables every request uses: the endpoint
// table, the keyring, the compiled protected-field sets and the metrics.
func (h *Handler) Provision(ctx caddy.Context) error {
	if err := h.provisionWith(ctx, ctx.Logger()); err != nil {
		return err
	}
	if h.Backend.Instances > 1 {
		h.watchPeers(ctx)
	}
	return nil
}

// watchPeers writes, for a gateway that is one of several, a heartbeat to
// the config's storage under this process's instance ID, and warns when
// another process writes under the same one (internal/peers): two gateways
// from one data directory, whose distributed rate limit silently counts
// them as one. Once per config load.
func (h *Handler) watchPeers(ctx caddy.Context) {
	id, err := caddy.InstanceID()
	if err != nil {
		h.logger.Warn("no instance ID: cannot check that no other gateway shares it", zap.Error(err))
		return
	}
	peers.Start(ctx, ctx.GetMetricsRegistry(), peers.Config{
		Storage: ctx.Storage(), InstanceID: id.String(), DataDir: caddy.AppDataDir(), Logger: h.logger,
	})
}

// provisionWith is Provision with the logger given, so tests can read what it logs.
func (h *Handler) provisionWith(ctx caddy.Context, logger *zap.Logger) error {
	h.logger = logger
	// The config as Caddy gave it, before anything below fills in: it
	// tells this handler's place in the server's routes (provisionGuard).
	own, err := json.Marshal(h)
	if err != nil {
		return err
	}
	auth := &h.Auth
	h.authOn = auth.Enabled == nil || *auth.Enabled
	h.hide = auth.HideProtected == nil || *auth.HideProtected
	h.qkey = auth.AllowQueryKey

	if err := h.provisionKeys(); err != nil {
		return err
	}
	limits, err := resolveLimits(h.Backend)
	if err != nil {
		return err
	}
	h.table, h.metrics, err = buildTable(tableConfig{
		authOn:     h.authOn,
		enabled:    h.Endpoints,
		requireKey: auth.RequireKey,
		fields:     auth.ProtectedFields,
		cache:      h.Backend.Cache,
		snapshot:   h.Backend.Snapshot,
		noCache:    h.Backend.CacheSize == off,
	}, ctx.GetMetricsRegistry(), h.keys.Names())
	if err != nil {
		return err
	}
	liveLimits, err := resolveLive(h.Backend.LiveConfig)
	if err != nil {
		return err
	}
	limits.Streams, limits.StreamsPerClient, limits.Topics = liveLimits.maxStreams, liveLimits.perClient, liveLimits.maxTopics
	if err := h.provisionGuard(ctx, limits, own); err != nil {
		return err
	}
	if err := h.provisionLive(liveLimits); err != nil {
		return err
	}
	h.logShare(limits)
	h.index = newIndexCache(h.authOn, h.table, h.keyInfo)

	switch {
	case !h.authOn:
		h.logger.Warn("auth is off: every endpoint and field is public; require_key and protected_fields have no effect")
	case h.keys.Len() == 0:
		h.logger.Warn("auth is on but no key is configured: no caller can reach a protected endpoint")
	}
	if h.authOn && h.qkey {
		h.logger.Info("allow_query_key is on: keys sent as ?key= end up in browser histories and the logs of proxies in front")
	}
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

// ServeHTTP decides the request in a fixed order (docs/request.md, "The order
// of decisions"): path, preflight, a target the access log could not filter,
// endpoint, key (which counts only within its scope: callerFor), method;
// then answers the index itself or forwards the canonical request to next
// and filters the response on its way back. Each step that ends the request
// says how (exchange.end); conclude, deferred, writes the refusal and counts
// the outcome, once, for every way a request can end.
//
// It never returns an error, on purpose: Caddy's error log prints the original
// request, headers and URI included, so any error would write the caller's key
// into the log. Every refusal and every backend failure is answered here, in the
// backend's {ok,error,meta} envelope, which also keeps a disguised 404
// byte-for-byte the same as a genuine one.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.Method == http.MethodHead {
		w = headWriter{w}
	}
	x := &exchange{
		w:           w,
		r:           r,
		repl:        r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer),
		who:         anonymous,
		decodedPath: r.URL.Path, // what error envelopes show, like the backend's
	}
	defer h.conclude(x)

	rest, ok := underAPI(clientPath(r.URL))
	if !ok {
		x.end(refused(metrics.NotFound, http.StatusNotFound))
		return nil
	}
	if r.Method == http.MethodOptions {
		writePreflight(w)
		x.end(verdict{outcome: metrics.Preflight})
		return nil
	}
	if !plainTarget(r) {
		// The access log would write the target as it came, key and all: the
		// gateway cannot change what Caddy logs, only leave the entry out.
		caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
		x.end(refused(metrics.BadRequest, http.StatusBadRequest))
		return nil
	}
	// The key is read before the route decides, for every path, and at a
	// bounded cost (the path's length is bounded in route, the key's in the
	// keyring): how long a 404 takes must not tell a hidden endpoint from a
	// missing one.
	key := h.authenticate(r)
	rt, ok := h.table.route(rest)
	if !ok {
		x.end(refused(metrics.NotFound, http.StatusNotFound))
		return nil
	}

	// Who the caller is for this endpoint: a key outside its scope makes
	// it a caller without a key from here on, byte for byte.
	x.ep, x.who = rt.ep, h.callerFor(key, rt.ep)
	if rt.ep.requireKey && !x.who.authenticated {
		if x.who.key != noKey {
			h.metrics.KeyRefused(x.who.key) // an accepted key, outside its scope
		}
		status := http.StatusUnauthorized
		if h.hide {
			status = http.StatusNotFound
		}
		x.end(refused(metrics.Refused, status))
		return nil
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", allowedMethods)
		x.end(refused(metrics.Method, http.StatusMethodNotAllowed))
		return nil
	}

	// From here on the caller may see the endpoint. A caller who is not
	// authenticated for it gets the field layer and a truthful
	// meta.authenticated; everyone else gets the backend's bytes untouched.
	if rt.ep.name == "index" {
		x.end(h.serveIndex(w, x.who, rt.ep))
		return nil
	}
	h.identify(x.repl, r, rt.ep, x.who)
	live := h.wantsStream(r, rt.ep) // before the rewrite makes a HEAD a GET
	var head int64
	if live {
		head = requestHead(r) // before the rewrite drops what the server keeps all the same
	}
	h.prepareUpstream(r, rt, x.who.filtered() || h.guard.shareable(rt.ep))
	x.who = h.withAddress(x.who, r)
	if live {
		x.end(h.stream(x, head, next)) // stream.go: the same answers, as events
		return nil
	}
	x.end(h.forward(x, next))
	return nil
}

// allowedMethods is the Allow header of a 405 and the preflight's allowed methods.
const allowedMethods = "GET, HEAD, OPTIONS"

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
