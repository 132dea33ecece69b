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
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/peers"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
	"github.com/statusgate/statusgate/caddymodule/internal/redislog"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
)

func init() {
	caddy.RegisterModule(Handler{})
	// go-redis (caddy-storage-redis's client) writes to stderr past
	// Caddy's log unless something in the build gives it a logger; this
	// package is in every build with statusgate (docs/cluster.md).
	redislog.Install()
}

// Handler is the statusgate gateway. It answers what it decides itself (404, 401,
// 405, CORS preflight, the index) and hands every request it allows, rewritten
// to the canonical upstream path, to its guard, which sends it to the declared
// backend, or, in the form of 1.0, which declares none, to the handlers after
// it (normally reverse_proxy).
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

	// ProxyRaw is the backend itself: the game server(s) the requests that
	// statusgate lets through go to, and how. It is the JSON of Caddy's
	// reverse_proxy handler without "handler" ("upstreams", "headers",
	// "transport", "load_balancing", ...), which the Caddyfile's
	// `statusgate <upstream>... { proxy { ... } }` writes; handle_response
	// is refused, because statusgate reads the answer itself. It names the
	// handler's guard: handlers that declare the same proxy share one.
	// Absent: the form of 1.0, in which the handlers after statusgate (a
	// reverse_proxy) reach the backend; it logs a warning.
	ProxyRaw json.RawMessage `json:"proxy,omitempty"`

	// Server names the game server the handler fronts among those the
	// statusgate app declares (the global statusgate option's server
	// lines): its backend and its limits are the declaration's, shared with
	// every handler and network in front of it; the handler then declares
	// no upstreams and sets none of the server's limits itself. Absent: the
	// handler declares its backend itself (ProxyRaw), or is in the form of 1.0.
	Server string `json:"server,omitempty"`

	// Network makes the gateway answer /api/v1/network itself, from its
	// member servers' /api/v1/status, in the plugin's shape, without Redis
	// (docs/network.md); the network endpoint must be enabled. Absent:
	// /api/v1/network goes to the backend like any other endpoint.
	Network *NetworkConfig `json:"network,omitempty"`

	access  // the key check (access.authenticate)
	table   *endpointTable
	guard   *guard.Guard // the backend step (guard.Fetch)
	hide    bool
	index   *indexCache
	live    *liveState    // the live streams (liveState.serve)
	network *networkState // the network the gateway answers for; nil: none
	metrics *metrics.Metrics
	logger  *zap.Logger
	// app is the config load's statusgate app.
	app *App
	// superseded is set when a newer config has taken over from this
	// handler's (retire): from then on it refuses. A pointer, made
	// in provisionWith: CaddyModule copies the Handler.
	superseded *atomic.Bool
	// last is set when the load's route check finds that nothing can
	// follow the handler on its chain (App.checkRoutes): its trips then
	// run no handlers after it (guard.Ticket's Next). A pointer, as
	// superseded is.
	last *atomic.Bool
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
	h.watchPeers(ctx)
	return nil
}

// watchPeers puts this handler's backend in the process's heartbeat, in the
// config's storage (internal/peers), where that can matter: the handler is
// one of several instances, or the config names a storage of its own (Redis,
// a shared folder). The gateways that share the storage see each other, and
// warn about two gateways from one data directory, another deployment in
// the same storage, instances that disagree and a second main-thread lane.
// The config load's storage also gives go-redis's log (internal/redislog) a
// client to learn that Redis is back through. Both are the load's, and end
// with it (App).
func (h *Handler) watchPeers(ctx caddy.Context) {
	if h.app.alone {
		return // provisioned outside a server, by a test: no config, no storage
	}
	h.app.logRedis(ctx.Storage(), h.logger)
	l := h.guard.Limits()
	if l.Instances <= 1 && ctx.Storage() == caddy.DefaultStorage {
		// Nothing another gateway shares with this one: a gateway alone
		// in front of its backend, with Caddy's own data directory, which
		// two processes on one machine use without being a cluster. Its
		// heartbeat could only warn about them.
		return
	}
	id, err := caddy.InstanceID()
	if err != nil {
		h.logger.Warn("no instance ID: cannot check that no other gateway shares it", zap.Error(err))
		return
	}
	h.app.watch(peers.Config{
		Storage: ctx.Storage(), InstanceID: id.String(), DataDir: caddy.AppDataDir(), Logger: h.logger,
		Backend: h.guard.BackendName(), Instances: l.Instances,
		MainThreadLane: h.table.lookup("placeholders") != nil && l.MainThread > 0,
	})
}

// provisionWith is Provision with the logger given, so tests can read what it logs.
func (h *Handler) provisionWith(ctx caddy.Context, logger *zap.Logger) error {
	h.logger = logger
	h.superseded, h.last = new(atomic.Bool), new(atomic.Bool)
	var err error
	if h.app, err = appOf(ctx); err != nil {
		return err
	}
	if err := h.adopt(h.app); err != nil {
		return err
	}
	auth := &h.Auth
	h.authOn = auth.Enabled == nil || *auth.Enabled
	h.hide = auth.HideProtected == nil || *auth.HideProtected
	h.qkey = auth.AllowQueryKey != nil && *auth.AllowQueryKey

	// A config loaded while another runs is a reload (caddy reload, the
	// admin API); the first one is Caddy's start.
	reload := caddy.ActiveContext().Context != nil
	if h.keys, h.keyInfo, err = loadKeys(auth.Keys, reload, logger); err != nil {
		return err
	}
	limits, liveLimits, err := resolveGuard(h.Backend)
	if err != nil {
		return err
	}
	if err := keyShares(h.keyInfo, auth.Keys, limits, h.Backend.writeTimeout()); err != nil {
		return err
	}
	var backend *upstream.Backend
	if h.ProxyRaw != nil {
		if backend, err = upstream.Parse("proxy", h.ProxyRaw); err != nil {
			return err
		}
	}
	var members []*upstream.Backend
	networkOn := false
	if h.Network != nil {
		var listen []string
		if srv := serverOf(ctx); srv != nil {
			listen = srv.Listen
		}
		if members, networkOn, err = h.Network.parse(h.Endpoints, h.Backend, backend, listen); err != nil {
			return err
		}
		if !networkOn {
			logger.Warn("the network endpoint is disabled: the network block has no effect", zap.String("cluster", h.Network.Cluster))
		}
	}
	cols, err := h.app.collectors(ctx.GetMetricsRegistry())
	if err != nil {
		return err
	}
	h.table, h.metrics, err = buildTable(tableConfig{
		publish: auth.PublishFields, globalFields: auth.globalFields, globalPublish: auth.globalPublish,

		authOn:     h.authOn,
		enabled:    h.Endpoints,
		requireKey: auth.RequireKey,
		fields:     auth.ProtectedFields,
		extra:      auth.ExtraFields,
		cache:      h.Backend.Cache,
		snapshot:   h.Backend.Snapshot,
		noCache:    h.Backend.CacheSize == off,
		ownNetwork: networkOn,
		server:     cmp.Or(h.Server, h.Backend.Guard),
	}, cols, h.keys.Names())
	if err != nil {
		return err
	}
	h.access.metrics = h.metrics
	if backend != nil {
		if err := backend.Provision(ctx); err != nil {
			return err
		}
		if names := backend.Unsplit(); len(names) > 0 {
			logger.Warn("placeholders in statusgate's proxy block that pick no server split no answer: callers who share an answer (the cache, an identical request's trip) get the one whose trip carried the first caller's values; only the upstreams, the Host, a rewrite and the TLS server name pick the server",
				zap.Strings("placeholders", names))
		}
	} else {
		shared := "its answers are shared within this handler only, and its counts with every other such handler"
		if h.Backend.Guard != "" {
			shared = "its counts and answers are shared with every handler naming guard " + h.Backend.Guard + ", whatever follows each"
		}
		logger.Warn("statusgate declares no upstreams, and relies on the handlers after it to reach the backend (the form of 1.0): "+shared+"; name the game server in statusgate itself",
			zap.String("write", "statusgate <upstream>... { ... } (for example statusgate 127.0.0.1:8080), then delete the reverse_proxy after it; a statusgate of this form followed by no handler that can answer (only a rate_limit, headers or encode, or nothing) is refused by caddy run and caddy reload wherever its routes show it (not in a named route), and not by caddy validate"))
	}
	policy := policyOf(h.authOn, h.table)
	if h.guard, err = joinGuard(h.app, ctx, h.Backend, limits, backend, policy, logger, ""); err != nil {
		return err
	}
	// The guard label names the server: its guard's name, or else the
	// name it is declared under ("" for neither).
	h.metrics.ExportGuard(h.guard.Units(cmp.Or(h.Backend.Guard, h.Server), limits))
	if networkOn {
		if h.network, err = joinNetwork(h.app, ctx, h.Network, members, h.guard, backend, h.Backend, limits, h.table, policy, h.metrics, logger); err != nil {
			return err
		}
	}
	if err := h.exportGame(ctx, backend); err != nil {
		return err
	}
	h.live = newLive(liveLimits, h.guard, h.metrics, logger)
	logShare(logger, limits, h.table, h.Backend.MaxInFlight)
	h.index = newIndexCache(h.authOn, h.table, h.keyInfo)

	switch {
	case !h.authOn:
		logger.Warn("auth is off: every endpoint and field is public; require_key and protected_fields have no effect")
	case h.keys.Len() == 0:
		logger.Warn("auth is on but no key is configured: no caller can reach a protected endpoint")
	}
	if h.authOn {
		logFields(logger, h.table)
	}
	if h.authOn && h.qkey {
		logger.Info("allow_query_key is on: keys sent as ?key= end up in browser histories and the logs of proxies in front")
	}
	return h.app.register(ctx, tenancy{tenant: h, needsNext: h.needsNext(), last: h.last})
}

// Cleanup ends the handler's live streams and gives its guard back to the
// pool: the last handler using it removes it, and until then the limits of
// the newest load still using it are in force.
func (h *Handler) Cleanup() error {
	h.live.close()
	h.network.leaveGuards()
	h.guard.Leave()
	return nil
}

// ServeHTTP decides the request in a fixed order (docs/request.md, "The order
// of decisions"): path, preflight, a target the access log could not filter,
// endpoint, key (which counts only within its scope: callerFor), method;
// then answers the index itself, or hands the canonical request to its
// guard, which answers it from the backend through the field layer
// (guard.Fetch), or as a live stream (liveState.serve). Each step that ends
// the request says how (exchange.finish); conclude, deferred, writes the
// refusal and counts the outcome, once, for every way a request can end.
//
// It never returns an error, on purpose: Caddy's error log prints the original
// request, headers and URI included, so any error would write the caller's key
// into the log. Every refusal and every backend failure is answered here, in the
// backend's {ok,error,meta} envelope, which also keeps a disguised 404
// byte-for-byte the same as a genuine one.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	// Read once: a request this config began to judge is this config's.
	superseded := h.superseded.Load()
	if superseded && handOver(w, r) {
		return nil // the config in force answered it
	}
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
		x.finish(refused(metrics.NotFound, http.StatusNotFound))
		return nil
	}
	if superseded {
		// A newer config has taken over, and has no server where this
		// request arrived; this one's policy (a key it has since removed)
		// must not answer what its server still accepts.
		x.finish(supersededRefusal())
		return nil
	}
	if r.Method == http.MethodOptions {
		writePreflight(w)
		x.finish(guard.Verdict{Outcome: metrics.Preflight})
		return nil
	}
	if !plainTarget(r) {
		// The access log would write the target as it came, key and all: the
		// gateway cannot change what Caddy logs, only leave the entry out.
		caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
		x.finish(refused(metrics.BadRequest, http.StatusBadRequest))
		return nil
	}
	// The key is read before the route decides, for every path, and at a
	// bounded cost (the path's length is bounded in route, the key's in the
	// keyring): how long a 404 takes must not tell a hidden endpoint from a
	// missing one.
	key := h.authenticate(r)
	rt, ok := h.table.route(rest)
	if !ok {
		x.finish(refused(metrics.NotFound, http.StatusNotFound))
		return nil
	}

	// Who the caller is for this endpoint: a key outside its scope makes
	// it a caller without a key from here on, byte for byte.
	x.ep, x.who = rt.ep, h.callerFor(key, rt.ep)
	if rt.ep.requireKey && !x.who.Authenticated {
		if x.who.key != noKey {
			h.metrics.KeyRefused(x.who.key) // an accepted key, outside its scope
		}
		status := http.StatusUnauthorized
		if h.hide {
			status = http.StatusNotFound
		}
		x.finish(refused(metrics.Refused, status))
		return nil
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", allowedMethods)
		x.finish(refused(metrics.Method, http.StatusMethodNotAllowed))
		return nil
	}

	// From here on the caller may see the endpoint. A caller who is not
	// authenticated for it gets the field layer and a truthful
	// meta.authenticated; everyone else gets the backend's bytes untouched.
	if rt.ep.Name == "index" {
		x.finish(h.index.serve(w, x.who, rt.ep, h.hide, h.logger))
		return nil
	}
	identify(x.repl, r, rt.ep, x.who)
	live := h.live.wants(r, rt.ep) // before the rewrite makes a HEAD a GET
	var head int64
	if live {
		head = requestHead(r) // before the rewrite drops what the server keeps all the same
	}
	// The Host the backend is sent, and its answers shared under, from
	// here on (guard.SentHost): so it is what the placeholders that pick
	// the backend read, and what every trip of its share key carries.
	r.Host = guard.SentHost(r.Host)
	// Which backend the client's request picks (a map of its query, its
	// Host), read before the rewrite cuts the query to what the endpoint
	// reads: the trip uses these values.
	picked := h.guard.Resolve(x.repl)
	secrets := h.presented(r, key != noKey) // what no request made for the caller may carry
	prepareUpstream(r, rt, x.who.Filtered() || h.guard.Shareable(&rt.ep.Station))
	sealDecided(r, x.repl, secrets)
	x.who = x.who.withAddress(r, h.Backend.prefix6())

	// The backend step, the guard's: its answer, or its refusal, is written
	// through the progress deadline, once. A network's document is the
	// gateway's own, made of its members' answers, each through its guard.
	if h.last.Load() {
		next = nil // nothing follows: no handlers to run after statusgate
	}
	t := h.guard.Ticket(r, &rt.ep.Station, x.who.Caller, x.decodedPath, picked, next)
	t.Secrets = secrets
	answer := answerFunc(h.guard.Fetch)
	if h.network.answers(rt.ep) {
		// The network's answers are the class's document, whatever the
		// site or the client's Host: so is a stream's topic.
		answer, t.Share = h.network.fetch, h.network.shareKey(x.who.Caller)
	}
	pw := progress.New(w, h.Backend.writeTimeout())
	defer pw.Done()
	x.w, x.forwarded = pw, true
	var v guard.Verdict
	if live {
		v = h.live.serve(pw, r, t, answer, head)
	} else {
		v = answer(pw, r, t)
	}
	x.finish(v)
	return nil
}

// exchange is one request on its way through ServeHTTP: what the steps up
// to the backend step and conclude need to know about it. The steps below
// take the ticket ServeHTTP makes of it (guard.Ticket).
type exchange struct {
	w           http.ResponseWriter // the client's writer; under the progress deadline once forwarded
	r           *http.Request       // the client's, rewritten for the backend once routed
	repl        *caddy.Replacer     // the request's, for the placeholders
	ep          *endpoint           // nil until routed
	who         caller              // who the caller is for ep
	decodedPath string              // what the gateway's error envelopes show

	forwarded bool          // the request went to the backend step
	ended     bool          // a step said how the request ended: verdict holds it
	verdict   guard.Verdict // how it ended
}

// finish records how the request ended, for conclude.
func (x *exchange) finish(v guard.Verdict) { x.verdict, x.ended = v, true }

// conclude ends every request, deferred by ServeHTTP: it answers a refusal in
// the gateway's envelope, and sets the placeholders and counts the outcome
// (identify, settle), once. A request whose step panicked, as reverse_proxy does
// when an answer under way breaks off, is counted too, and the panic goes on
// unrecovered, with its stack.
//
// A client that left while its request was in the backend step (queued,
// following an identical request, at the backend) ends the same way
// wherever it waited: client_gone, and nothing written but the status for
// the access log; not the busy queue, the timeout or the broken answer its
// leaving caused, and nothing logged as a backend failure.
func (h *Handler) conclude(x *exchange) {
	if !x.forwarded {
		identify(x.repl, x.r, x.ep, x.who)
	}
	v := x.verdict
	if !x.ended {
		// Panicking: the answer, if any, broke off.
		v = guard.Verdict{Outcome: metrics.BackendError}
	}
	if x.forwarded && (v.Status != 0 || v.Cut || !x.ended) && x.r.Context().Err() != nil {
		v = guard.Verdict{Outcome: metrics.ClientGone, Status: guard.StatusClientClosed, Cut: v.Cut}
	}
	settle(x.repl, x.ep, h.metrics, v.Outcome)
	switch {
	case !x.ended:
		return // the panic goes on
	case v.Cut:
		if v.Failed() {
			logFailure(h.logger, http.StatusBadGateway, x.ep.Name, v.Cause)
		}
		panic(http.ErrAbortHandler) // net/http cuts the connection and logs nothing
	case v.Status == 0:
		return
	}
	// The header holds what the site's handlers before the gateway set (HSTS,
	// Alt-Svc, Server), which every refusal keeps, and nothing of a backend
	// answer: that stays in the spool's own header until the answer is
	// written, after which nothing is refused any more, only cut.
	hdr := x.w.Header()
	switch v.Status {
	case guard.StatusClientClosed:
		x.w.WriteHeader(v.Status) // for the access log; nobody reads it
		return
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if v.RetryAfter != "" {
			hdr.Set("Retry-After", v.RetryAfter)
		}
	}
	if v.Failed() {
		logFailure(h.logger, v.Status, x.ep.Name, v.Cause)
	}
	writeError(x.w, v.Status, x.decodedPath)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)

// adopt takes what the config load's app says for this handler before
// anything else is read: the defaults it leaves out (its keys come first,
// then the defaults'; a require_key, protected_fields, endpoint switch,
// cache or snapshot entry of its own wins over the defaults' for that
// endpoint; every other option it leaves out is the defaults'), and the
// declared servers it names, its own or its network's.
func (h *Handler) adopt(a *App) error {
	ownCache := maps.Clone(h.Backend.Cache) // before the defaults' join it, for cacheOverNoCache
	if d := a.Defaults; d != nil {
		if err := h.Auth.adopt(d.Auth); err != nil {
			return err
		}
		h.Endpoints = mergeEndpoints(h.Endpoints, d.Endpoints)
		takeOptions(&h.Backend, &d.Backend, isDoorOption)
	}
	if err := h.checkDeclaredOnce(a.Servers); err != nil {
		return err
	}
	if h.Server != "" {
		a.reference(h.Server)
		s, err := a.server(h.Server, "server")
		if err != nil {
			return err
		}
		if h.ProxyRaw != nil {
			return fmt.Errorf("server: %s, and upstreams or a proxy block of its own: a handler fronts a declared server or declares its backend, not both", h.Server)
		}
		if opt := setOption(&h.Backend, isServerOption); opt != "" {
			return fmt.Errorf("backend.%s: server %s's limit: set it in server %s's declaration, once for every handler in front of it", opt, h.Server, h.Server)
		}
		if ep, ttl, fromDefaults := cacheOverNoCache(ownCache, a.Defaults, s); ep != "" {
			return fmt.Errorf("%s", cacheOverNoCacheJSON(h.Server, ep, ttl, fromDefaults))
		}
		h.ProxyRaw = s.ProxyRaw
		takeOptions(&h.Backend, &s.Backend, isServerOption)
	}
	if h.Network != nil {
		for i, m := range h.Network.Servers {
			if m.ProxyRaw != nil {
				continue
			}
			a.reference(m.ID)
			s, err := a.server(m.ID, fmt.Sprintf("network.servers[%d]", i))
			if err != nil {
				return err
			}
			h.Network.Servers[i].ProxyRaw = s.ProxyRaw
			h.Network.Servers[i].declared = s
		}
	}
	return nil
}
