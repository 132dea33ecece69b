package caddymodule

// This file is the statusgate app: what one config load's handlers share,
// and what lives and ends with that load.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/confjson"
	"github.com/statusgate/statusgate/caddymodule/internal/gamemetrics"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
	"github.com/statusgate/statusgate/internal/ident"
	"github.com/statusgate/statusgate/internal/nearest"

	"github.com/statusgate/statusgate/caddymodule/internal/peers"
	"github.com/statusgate/statusgate/caddymodule/internal/redislog"
)

func init() {
	caddy.RegisterModule(new(App))
}

// App is the state of one config load that its statusgate handlers share:
// the load's number, the server limits each guard was first given in it
// (serverLimits: handlers that share a guard must agree on them), the handlers themselves, which
// register with it (register) and which it retires when the load stops, the
// load's metrics collectors, its part in the process's heartbeat and
// go-redis's log, and the check of the routes around its handlers. It needs no config:
// every handler asks for it (caddy.Context.App), so Caddy makes one per
// config load that has a statusgate handler, starts it with the load and
// stops it with the load, which is what makes it the load's, rather than a
// registry that guesses which load a handler belongs to. Imports run one
// way: the handler knows the app, and the app knows its handlers only as
// tenants, as caddyevents knows its subscribers.
type App struct {
	// Servers are the game servers the config's handlers and networks
	// front, each declared once by name, with its limits: a handler names
	// one with `server <name>` (JSON "server"), a network lists one with
	// `server <name>` and no upstreams.
	Servers map[string]*Server `json:"servers,omitempty"`

	// Defaults is what every statusgate handler of the config takes where
	// it says nothing itself. Absent: none.
	Defaults *Defaults `json:"defaults,omitempty"`

	// GameMetrics are the options of the game's metrics.
	// Absent: every server's default families.
	GameMetrics *GameMetrics `json:"game_metrics,omitempty"`

	seq     uint64
	started atomic.Bool   // the load is running: Start ran and Stop did not
	ctx     caddy.Context // the load's, for its HTTP app at Start (checkRoutes)
	// alone says the load is no config's, but a unit test's context's
	// (appOf): it has no storage and no events.
	alone bool
	// referenced are the declared servers a handler or network of the
	// load fronts (reference), under mu.
	referenced map[string]bool

	mu     sync.Mutex
	guards map[string]firstUse // by guard name: the limits of its first handler in this load
	// tenants are the load's handlers, in the order they registered;
	// subscribed says the app listens to the load's stopping event.
	tenants    []tenancy
	subscribed bool
	// metrics are the load's families of the gateway's metrics, and games
	// its game metrics (closed with the load): nil until a handler asks.
	metrics *metrics.Collectors
	games   *gamemetrics.Collector
}

// GameMetrics are the options of the game's metrics, in the statusgate
// app (the global option's game_metrics). Absent: the default families of
// every server, 32 worlds each.
type GameMetrics struct {
	// Off removes the minecraft_* families: no server is asked anything
	// for them. Default: false.
	Off bool `json:"off,omitempty"`
	// MaxWorlds is how many worlds of a server have series of their own;
	// the rest are summed under world="_other". Default (0): 32.
	MaxWorlds int `json:"max_worlds,omitempty"`
	// EntityTypes adds minecraft_world_entities_by_type: entities per
	// world and type. Default: false.
	EntityTypes bool `json:"entity_types,omitempty"`
}

// check refuses in the JSON what the Caddyfile's game_metrics line
// cannot write: a number of worlds out of range (which would otherwise be
// the default, or series without a useful bound), options of metrics that
// are off.
func (gm *GameMetrics) check() error {
	switch {
	case gm == nil:
		return nil
	case gm.Off && (gm.MaxWorlds != 0 || gm.EntityTypes):
		return errors.New("game_metrics: off, with max_worlds or entity_types: options for metrics that are off (remove them, or off)")
	case gm.MaxWorlds < 0 || gm.MaxWorlds > 1000:
		return fmt.Errorf("game_metrics.max_worlds: %d is not a number of worlds from 1 to 1000 (leave it out for 32)", gm.MaxWorlds)
	}
	return nil
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "statusgate",
		New: func() caddy.Module { return new(App) },
	}
}

// loadSeq numbers loads, which Caddy provisions one at a time: a guard's
// newest load's limits are in force.
var loadSeq atomic.Uint64

// Provision numbers the load and checks the servers and defaults.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.seq = loadSeq.Add(1)
	a.guards = map[string]firstUse{}
	if err := a.GameMetrics.check(); err != nil {
		return err
	}
	return a.checkServers()
}

// UnmarshalJSON reads the app's config, refusing what it does not know.
func (a *App) UnmarshalJSON(b []byte) error {
	type plain struct {
		Servers     map[string]*Server `json:"servers,omitempty"`
		Defaults    *Defaults          `json:"defaults,omitempty"`
		GameMetrics *GameMetrics       `json:"game_metrics,omitempty"`
	}
	p := plain{}
	if _, err := confjson.Object(b, "", &p, nil); err != nil {
		return err
	}
	a.Servers, a.Defaults, a.GameMetrics = p.Servers, p.Defaults, p.GameMetrics
	return nil
}

// Start refuses the mistakes only the whole HTTP app shows (checkRoutes),
// then marks the load running: from now on its heartbeat is written.
func (a *App) Start() error {
	if err := a.checkRoutes(); err != nil {
		return err
	}
	a.warnUnreferenced(a.ctx.Logger())
	a.started.Store(true)
	return nil
}

// Stop ends the load's part in the heartbeat and go-redis's log while its
// storage still works (Caddy stops the apps before it cleans up the
// storage), so that a graceful stop deletes the process's heartbeat.
func (a *App) Stop() error {
	a.started.Store(false)
	a.leave()
	return nil
}

// Cleanup leaves for a load that never started (its provisioning failed,
// or it was only validated); leaving twice does nothing.
func (a *App) Cleanup() error {
	a.leave()
	return nil
}

func (a *App) leave() {
	a.closeGames()
	peers.Leave(a)
	redislog.Leave(a)
}

// appOf is the statusgate app of the handler's config load. Outside a
// server, a unit test provisions the handler: the handlers provisioned with
// one context are one load's (aloneApp).
func appOf(ctx caddy.Context) (*App, error) {
	if serverOf(ctx) == nil {
		return aloneApp(ctx)
	}
	v, err := ctx.App("statusgate")
	if err != nil {
		return nil, err
	}
	a, ok := v.(*App)
	if !ok {
		return nil, fmt.Errorf("the statusgate app is %T", v)
	}
	return a, nil
}

// aloneApps are the loads of unit tests' contexts, by the context's metrics
// registry, which Caddy makes one of per context (caddy.NewContext), as it
// makes one per config load; until the context ends.
var aloneApps sync.Map // *prometheus.Registry → *App

// aloneApp is the load of ctx, a unit test's, outside a server: one app for
// the handlers provisioned with one context, or with none (no registry), an
// app of the handler's own.
func aloneApp(ctx caddy.Context) (*App, error) {
	reg := ctx.GetMetricsRegistry()
	if a, ok := aloneApps.Load(reg); ok {
		return a.(*App), nil
	}
	a := &App{alone: true}
	if err := a.Provision(ctx); err != nil {
		return nil, err
	}
	if reg == nil {
		return a, nil
	}
	v, loaded := aloneApps.LoadOrStore(reg, a)
	if !loaded {
		context.AfterFunc(ctx, func() { aloneApps.Delete(reg) })
	}
	return v.(*App), nil
}

// serverOf is the HTTP server a module is provisioned in: nil outside one,
// in a unit test's context, which belongs to no config load (appOf).
func serverOf(ctx caddy.Context) *caddyhttp.Server {
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	return srv
}

// tenant is what the app asks of a handler of its load, which registers
// with it in its Provision: one method, as caddyevents asks of its
// subscribers, so that the app imports none of its tenants.
type tenant interface {
	// retire ends the tenant's part in the load, which is stopping:
	// a newer config has taken over (a reload), or the process stops.
	retire()
}

// tenancy is a registered tenant, with what the route check needs of it
// and tells it.
type tenancy struct {
	tenant
	// needsNext says the tenant reaches its backend through the handlers
	// after it (the form of 1.0), which its routes must then have.
	needsNext bool
	// last, if not nil, is set when nothing can follow the tenant on its
	// chain, wherever it is in the routes (chain.Link.Followed).
	last *atomic.Bool
}

// register makes t's tenant a tenant of the load, from ctx, its
// Provision's: the load retires it when it stops (Handle), and checks the
// routes around it at Start. The first tenant of a config's load
// subscribes the app to the load's "stopping" event, once for all.
func (a *App) register(ctx caddy.Context, t tenancy) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tenants = append(a.tenants, t)
	if a.alone || a.subscribed {
		return nil
	}
	events, err := ctx.App("events")
	if err != nil {
		return err
	}
	a.subscribed = true
	return events.(*caddyevents.App).On("stopping", a)
}

// Handle retires every tenant of the load at its "stopping" event, which
// Caddy emits as the first step of stopping a load, after a new config is
// the active one (a reload) or when the process stops, before
// shutdown_delay and before its servers wait for their handlers. The event
// is the load's own, so this does not depend on the order in which
// handlers, apps or loads are provisioned.
func (a *App) Handle(context.Context, caddy.Event) error {
	a.mu.Lock()
	tenants := slices.Clone(a.tenants)
	a.mu.Unlock()
	for _, t := range tenants {
		t.retire()
	}
	return nil
}

// logRedis gives go-redis's log the load's storage, whose client tells it
// when Redis is back, and logger (internal/redislog); the load leaves it
// when it stops. Joining again does nothing.
func (a *App) logRedis(storage any, logger *zap.Logger) {
	redislog.Join(a, storage, logger)
}

// watch puts the load in the process's heartbeat with c (internal/peers),
// written while the load is running; the load leaves it when it stops.
func (a *App) watch(c peers.Config) {
	c.Active = a.started.Load
	peers.Join(a, c)
}

// agree records that a handler at w (or a network's server, member) uses
// the guard name with limits l in this load, and refuses server limits
// other than those the guard was first given here: handlers that share a
// guard share its limits, but for the front door's choices
// (serverLimits).
func (a *App) agree(name string, l guard.Limits, w string, member bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	l = serverLimits(l)
	first, ok := a.guards[name]
	if !ok {
		a.guards[name] = firstUse{l, w, member}
		return nil
	}
	if first.limits == l {
		return nil
	}
	fix := "give both the same limits, or each a guard NAME of its own"
	if member || first.member {
		// A guard <name> names the handler's own backend, never its
		// network's servers: only equal limits make the two agree.
		fix = "give both handlers the same limits: a network's server is counted with the limits of the handler whose network block lists it (guard NAME does not apply to a network's servers)"
	}
	if w == first.where {
		// Two sides in the same words would read as one: say which is which.
		return fmt.Errorf("two handlers that are each %s (their routes tell them apart, not their listeners) share a guard (%s) but not its limits: here %s, there %s; %s",
			w, guard.ShareReason(name), limitsDiff(l, first.limits), limitsDiff(first.limits, l), fix)
	}
	return fmt.Errorf("%s and %s share a guard (%s) but not its limits: here %s, there %s; %s",
		w, first.where, guard.ShareReason(name), limitsDiff(l, first.limits), limitsDiff(first.limits, l), fix)
}

// firstUse is the limits a guard was first given in a load, and by whom: a
// handler, or a network's server (member).
type firstUse struct {
	limits guard.Limits
	where  string
	member bool
}

// Interface guards
var (
	_ caddy.App           = (*App)(nil)
	_ caddy.Provisioner   = (*App)(nil)
	_ caddy.CleanerUpper  = (*App)(nil)
	_ caddyevents.Handler = (*App)(nil)
)

// checkServers checks the app's servers and defaults: each server's name
// and declaration, limits of a server's own only, and defaults that are
// the front door's only. Errors name the JSON path under the app.
func (a *App) checkServers() error {
	for _, name := range slices.Sorted(maps.Keys(a.Servers)) {
		s, path := a.Servers[name], "servers."+name
		if !ident.Valid(name) {
			return fmt.Errorf("servers: '%s' is not a name of letters, digits, '_' and '-'", name)
		}
		if s == nil {
			return fmt.Errorf("%s: null: declare the server, at least {\"proxy\": {\"upstreams\": [{\"dial\": \"10.0.0.3:8080\"}]}}", path)
		}
		if len(s.ProxyRaw) == 0 {
			return fmt.Errorf("%s.proxy: missing: no upstreams: declare the server's backend, at least {\"upstreams\": [{\"dial\": \"10.0.0.3:8080\"}]}", path)
		}
		if _, err := upstream.Parse(path+".proxy", s.ProxyRaw); err != nil {
			return err
		}
		if opt := setOption(&s.Backend, isDoorOption); opt != "" {
			return fmt.Errorf("%s.backend.%s: the front door's choice, not the server's: set it in the statusgate handlers in front of it (or in the defaults)", path, opt)
		}
		if _, _, err := resolveGuard(s.Backend); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
	}
	if first, second, name, firstDiff, secondDiff := guardShareConflict(a.Servers); second != "" {
		return fmt.Errorf("servers.%s.backend.guard: %s is server %s's guard too, with other limits (here %s, in servers.%s %s), and servers that name one guard count at it under one set of limits: %s",
			second, name, first, secondDiff, first, firstDiff, guardShareFix(first, second, false))
	}
	if d := a.Defaults; d != nil {
		if err := d.check(); err != nil {
			return err
		}
	}
	return nil
}

// server is the server the app declares as name, for the option at path.
func (a *App) server(name, path string) (*Server, error) {
	if s := a.Servers[name]; s != nil {
		return s, nil
	}
	if len(a.Servers) == 0 {
		return nil, fmt.Errorf("%s: %s is not declared: declare it in the global statusgate option (server %s UPSTREAM...), or give its upstreams here", path, name, name)
	}
	return nil, fmt.Errorf("%s: %s is not a declared server%s (declared: %s)", path, name,
		nearest.Suggest(name, slices.Collect(maps.Keys(a.Servers))), strings.Join(slices.Sorted(maps.Keys(a.Servers)), ", "))
}

// checkRoutes reads the load's HTTP app, provisioned by now (Caddy starts
// the apps of a load only once all are provisioned), and refuses the
// statusgate handlers that would answer nothing, or that a rate_limit runs
// in front of. It runs in Start, so it stops caddy run and rolls a reload
// back; caddy validate, which starts nothing, does not run it.
func (a *App) checkRoutes() error {
	v, err := a.ctx.AppIfConfigured("http")
	if err != nil {
		return nil // no HTTP app, no handler of ours
	}
	app, ok := v.(*caddyhttp.App)
	if !ok {
		return nil
	}
	a.mu.Lock()
	tenants := slices.Clone(a.tenants)
	a.mu.Unlock()
	needsNext := map[tenant]bool{}
	for _, t := range tenants {
		needsNext[t.tenant] = t.needsNext
	}
	if err := routeMistakes(app.Servers, func(h caddyhttp.MiddlewareHandler) (need, ours bool) {
		t, ok := h.(tenant)
		if !ok {
			return false, false
		}
		need, ours = needsNext[t]
		return need, ours
	}); err != nil {
		return err
	}
	last := chainEnds(app.Servers, func(h caddyhttp.MiddlewareHandler) bool {
		_, ours := h.(tenant)
		return ours
	})
	for _, t := range tenants {
		if h, ok := t.tenant.(caddyhttp.MiddlewareHandler); ok && t.last != nil && last[h] {
			t.last.Store(true)
		}
	}
	return nil
}
