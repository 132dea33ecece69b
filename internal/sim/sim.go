// Package sim is a demo backend for statusgate: a Caddy HTTP handler that
// answers like the ServerAPI Paper plugin running with its own auth off
// (docs/demo.md), with a simulated Minecraft server behind it.
//
// It exists so that the gateway can be tried, demonstrated and tested
// end to end in one Caddy process, with no Minecraft server at hand. It is
// compiled into cmd/caddy but is not part of the production module.
//
// What it reproduces, because a gateway must cope with it: every endpoint
// and its data shape and key order, the {ok,data,meta} and error envelopes,
// Java's way of writing doubles (20.0) and 64-bit world seeds beyond 2^53,
// GET-only methods (HEAD 405 without a body), the inconsistent error
// statuses (404 for a bad player UUID, 400 on placeholders), the JDK's own
// text/html 404 and 400 pages, and the raw history and heartbeat fragments.
// What it simplifies: stations are matched on exact path segments rather
// than the JDK's plain string prefixes (a suffix after a station that
// ignores its remainder is still served, as in the plugin), and the
// rate limiter, the plugin's own auth layer, the HTML pages and the
// "initializing" payload are left out (auth is off; the pages are off by
// default in the plugin too).
package sim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/internal/apijson"
	"github.com/statusgate/statusgate/internal/nearest"
)

func init() {
	caddy.RegisterModule(Sim{})
}

// frozenAt is the instant a frozen sim stands still at: 2026-07-17T14:53:20Z,
// the time of the plugin's documented example responses.
const frozenAt int64 = 1784300000000

// Sim is the http.handlers.statusgate_sim module. It is a terminal handler:
// it answers every request itself and never calls the next handler.
//
// The simulated server is the same for every request: a roster of players
// (eight named ones with fixed UUIDs, plus generated ones), three worlds,
// a plugin list, punishments and a custom station "votes". What moves
// (who is online, TPS, memory, counters, world time, entity counts) is a
// pure function of the seed and the clock, so two instances with the same
// seed agree with each other at the same instant.
type Sim struct {
	// Seed of the simulated server. The same seed gives the same players'
	// stats, online pattern, entity counts and so on. Default: a random
	// seed, chosen at provision and logged, so that a restart shows a
	// different server.
	Seed *int64 `json:"seed,omitempty"`

	// Frozen stops the simulated clock at 2026-07-17T14:53:20Z (epoch ms
	// 1784300000000), so that every response, timestamps included, is
	// byte-for-byte repeatable. Default: true when Seed is set, false
	// otherwise. Set it to false with a seed for live data that is
	// still reproducible at a given instant.
	Frozen *bool `json:"frozen,omitempty"`

	// ServerID is the plugin's network.server-id, reported as meta.server
	// and as this server's name in /network. Blank or "global" in any
	// case becomes "global", as in the plugin. Default: "global".
	ServerID string `json:"server_id,omitempty"`

	// Name registers the sim's counters for Lookup(Name), so that a test
	// in the same process can read them. Give each sim of a config its own
	// name. Default: "".
	Name string `json:"name,omitempty"`

	// Threads is the plugin's http.threads: how many requests it works on
	// at once. The rest wait in an unbounded first-in first-out queue, as
	// in the JDK's HttpServer. Default: 8.
	Threads int `json:"threads,omitempty"`

	// Latency sets how long a request holds its thread, per station: a
	// duration drawn uniformly from [min, max] for each request. The keys
	// are the station names (status, player, custom/votes, ...), "index",
	// "player_offline" for /player of a player who is not online (the
	// "player" key then means online players), and "*" for every key at
	// once, applied before the specific ones. For "placeholders" it is the
	// work done on the simulated main thread, which the request's thread
	// waits for. A key left out keeps its default: 1 ms for the index and
	// the snapshot stations, 1-10 ms for the other live stations, 5-20 ms for
	// punishments and an online player, 425 ms-1.4 s for an offline player,
	// 50 ms-2 s for placeholders. /player with a malformed UUID counts as
	// online (it is refused before any lookup); /placeholders that fails its
	// parameter checks never reaches the main thread.
	Latency map[string]Span `json:"latency,omitempty"`

	// ResolveTimeout is the plugin's
	// integrations.placeholderapi.resolve-timeout-ms: how long /placeholders
	// waits for the main thread before it answers 504. The work itself is
	// not cancelled. Values under 200 ms count as 200 ms, as in the plugin.
	// Default: 2s.
	ResolveTimeout caddy.Duration `json:"resolve_timeout,omitempty"`

	// StatsEndpoint serves the counters (see Snapshot) as JSON at
	// /_sim/stats, outside the plugin's /api: GET reads them, POST reads
	// and resets them. It is for a load harness in another process; the
	// real plugin has no such path. Default: false.
	StatsEndpoint bool `json:"stats_endpoint,omitempty"`

	// ModdedItems is how many extra blocks and items a modded server
	// registers (a hybrid server such as Arclight or Mohist with a large
	// mod pack registers tens of thousands). Each is a block and an item,
	// and active players' ?detailed=true statistics count them as they do
	// the vanilla ones, so that answer grows by about 150 bytes per modded
	// item for the most active player: 20000 make it about 3 MB. It is
	// how a load test gets a large public answer. Default: 0 (vanilla).
	ModdedItems int `json:"modded_items,omitempty"`

	w       *world
	clock   func() int64 // epoch ms; replaced in tests
	logger  *zap.Logger
	latency map[string]Span // Latency over the defaults
	timeout time.Duration   // effective ResolveTimeout
	stats   *Stats
	pool    *pool
	main    *mainThread
	stop    <-chan struct{} // closed when the config is unloaded
}

// statsPath is where StatsEndpoint serves the counters.
const statsPath = "/_sim/stats"

// Capacity defaults, as in the plugin's config.
const (
	defaultThreads        = 8
	defaultResolveTimeout = 2 * time.Second
)

// CaddyModule returns the Caddy module information.
func (Sim) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.statusgate_sim",
		New: func() caddy.Module { return new(Sim) },
	}
}

// Provision draws the simulated server from the seed. The big per-player
// detailed statistics are built on first use, not here, because Provision
// also runs for `caddy validate` and `caddy adapt --validate`.
func (s *Sim) Provision(ctx caddy.Context) error {
	s.logger = ctx.Logger()
	seed := rand.Int64()
	if s.Seed != nil {
		seed = *s.Seed
	}
	frozen := s.Seed != nil
	if s.Frozen != nil {
		frozen = *s.Frozen
	}
	if frozen {
		s.clock = func() int64 { return frozenAt }
	} else {
		s.clock = func() int64 { return time.Now().UnixMilli() }
	}
	s.ServerID = strings.TrimSpace(s.ServerID)
	if s.ServerID == "" || strings.EqualFold(s.ServerID, "global") {
		s.ServerID = "global"
	}
	s.w = newWorld(seed, s.clock(), s.ServerID)
	s.w.modded = moddedNames(s.ModdedItems)

	threads := s.Threads
	if threads == 0 {
		threads = defaultThreads
	}
	s.timeout = time.Duration(s.ResolveTimeout)
	if s.timeout == 0 {
		s.timeout = defaultResolveTimeout
	}
	s.timeout = max(s.timeout, minResolveTimeout)
	s.latency = latencyTable(s.Latency)
	s.stop = ctx.Done()
	s.stats = newStats(s.Name, threads)
	s.pool = &pool{threads: threads, stats: s.stats}
	s.main = &mainThread{stats: s.stats, stop: s.stop}
	register(s.stats)
	go func() {
		<-s.stop
		unregister(s.stats)
	}()
	go s.main.run()

	s.logger.Info("simulated ServerAPI backend ready",
		zap.Int64("seed", seed),
		zap.Bool("frozen", frozen),
		zap.String("server_id", s.ServerID),
		zap.Int("players", len(s.w.players)),
		zap.String("name", s.Name),
		zap.Int("threads", threads))
	return nil
}

// Validate checks the provisioned configuration.
func (s *Sim) Validate() error {
	if strings.ContainsFunc(s.ServerID, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("server_id must not contain control characters")
	}
	if s.Threads < 0 {
		return fmt.Errorf("threads must be at least 1, got %d", s.Threads)
	}
	if s.ModdedItems < 0 {
		return fmt.Errorf("modded_items must not be negative, got %d", s.ModdedItems)
	}
	if s.ResolveTimeout < 0 {
		return fmt.Errorf("resolve_timeout must not be negative")
	}
	for _, k := range slices.Sorted(maps.Keys(s.Latency)) {
		if err := checkLatency(k, s.Latency[k]); err != nil {
			return err
		}
	}
	return nil
}

// checkLatency validates one Latency entry.
func checkLatency(key string, sp Span) error {
	if _, ok := defaultLatency[key]; !ok && key != latencyAll {
		return fmt.Errorf("latency: unknown station '%s'%s", key, nearest.Suggest(key, slices.Sorted(maps.Keys(defaultLatency))))
	}
	if sp.Min < 0 || sp.Max < 0 {
		return fmt.Errorf("latency %s: must not be negative", key)
	}
	if sp.Max != 0 && sp.Max < sp.Min {
		return fmt.Errorf("latency %s: maximum %s is below minimum %s", key, time.Duration(sp.Max), time.Duration(sp.Min))
	}
	return nil
}

// ServeHTTP queues the request for one of the pool's threads, as the JDK
// server does with every exchange it accepts, and serves it there. The
// counters see it from arrival to answer.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if s.StatsEndpoint && r.URL.Path == statsPath {
		s.stats.serveHTTP(w, r)
		return nil
	}
	key := s.stationKey(r)
	s.stats.arrive(key)
	defer s.stats.leave(key)
	s.pool.acquire()
	defer s.pool.release()
	s.serve(w, r)
	return nil
}

// stationKey names the station a request is for, as the counters know it.
func (s *Sim) stationKey(r *http.Request) string {
	path := r.URL.Path
	if !validEscapes(r.URL.RawQuery) || (path != basePath && !strings.HasPrefix(path, basePath+"/")) {
		return stationOther
	}
	switch st, _ := s.route(path); st {
	case nil:
		return stationOther
	case s.w.index:
		return latencyIndex
	default:
		return st.name
	}
}

// serve answers like ServerAPI's ApiHandler: method check first, then
// the station. The error envelope is written by hand, not returned as a
// caddyhttp.Error, because the point of the sim is to send the plugin's own
// bodies and headers to the gateway.
func (s *Sim) serve(w http.ResponseWriter, r *http.Request) {
	// The JDK parses the request URI before any handler runs and answers a
	// malformed escape with its own page. Go's server already does that for
	// the path; the query is left to us.
	if !validEscapes(r.URL.RawQuery) {
		writeJDKPage(w, http.StatusBadRequest, "<h1>400 Bad Request</h1>URISyntaxException thrown")
		return
	}
	path := r.URL.Path
	if path != basePath && !strings.HasPrefix(path, basePath+"/") {
		// No context: the JDK's own page, without JSON or CORS.
		writeJDKPage(w, http.StatusNotFound, "<h1>404 Not Found</h1>No context found for request")
		return
	}
	now := s.clock()
	if !strings.EqualFold(r.Method, http.MethodGet) {
		if r.Method == http.MethodHead {
			// The JDK drops the body of a HEAD reply and sends no length.
			apijson.SetHeaders(w.Header())
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		s.writeError(w, now, path, errMethod)
		return
	}

	st, rest := s.route(path)
	if st == nil {
		s.writeError(w, now, path, notFound(path))
		return
	}
	onMain := st.name == mainThreadStation
	if !onMain {
		// The reply is built when the work is done, so its clock reads
		// after the delay.
		sleep(s.latency[s.latencyKey(st, rest, now)].draw(), s.stop)
		now = s.clock()
	}
	c := &call{
		now:      now,
		at:       now,
		path:     path,
		rest:     rest,
		rawQuery: r.URL.RawQuery,
	}
	// URI.getQuery() decodes the whole query before the flags are looked
	// for, so %3D and %26 count; '+' stays a '+'.
	c.query, _ = url.PathUnescape(r.URL.RawQuery)
	var cachedAt *int64
	if st.snapshot > 0 {
		c.at = now - now%st.snapshot.Milliseconds()
		cachedAt = &c.at
	}
	data, apiErr := st.build(s.w, c)
	if apiErr == nil && onMain && !s.onMainThread() {
		apiErr = errResolveTimeout
	}
	if apiErr != nil {
		s.writeError(w, now, path, apiErr)
		return
	}

	b := make([]byte, 0, 4096)
	b = append(b, apijson.DataHead...)
	b = appendJSON(b, data)
	b = apijson.AppendMeta(b, s.ServerID, now)
	if cachedAt != nil {
		b = append(b, `,"cachedAt":`...)
		b = strconv.AppendInt(b, *cachedAt, 10)
	}
	// Auth is off, so the plugin reports every caller as authenticated.
	b = append(b, `,"authenticated":true}}`...)
	apijson.Write(w, http.StatusOK, b)
	return
}

// mainThreadStation is the one station whose work runs on the game's main
// thread. Its parameters are checked on the HTTP thread first, so a bad
// request never reaches the main thread.
const mainThreadStation = "placeholders"

var errResolveTimeout = &apiError{http.StatusGatewayTimeout, "Placeholder resolution timed out (main thread busy)"}

// onMainThread schedules one request's placeholder work for the next tick
// and waits for it up to the resolve timeout, holding the request's thread
// all the while. It reports whether the work ran in time.
func (s *Sim) onMainThread() bool {
	t := s.main.submit(s.latency[mainThreadStation].draw())
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	select {
	case <-t.done:
		return true
	case <-timer.C:
		s.stats.timeout()
		return false
	}
}

// latencyKey picks the Latency entry of a request to station st: /player
// is slow for a player who is not online (a never-seen UUID included, as
// LuckPerms and the stats file are looked up all the same) and fast for a
// malformed UUID, which is refused before any lookup.
func (s *Sim) latencyKey(st *station, rest string, now int64) string {
	switch {
	case st == s.w.index:
		return latencyIndex
	case st.name != "player":
		return st.name
	}
	uuid, ok := parseJavaUUID(rest)
	if !ok {
		return "player"
	}
	if p := s.w.byUUID[uuid]; p != nil && s.w.isOnline(p, now) {
		return "player"
	}
	return latencyPlayerOffline
}

// UnmarshalCaddyfile is in caddyfile.go.

const basePath = "/api"

// route finds the station for a decoded path under the base: "/api/v1/x"
// and the alias "/api/x" alike. It returns the remainder after the
// station, slashes stripped at both ends as the plugin's remainderOf does,
// and a nil station for a path that names none (including "//" and other
// empty segments, which miss every context in the plugin too).
func (s *Sim) route(path string) (*station, string) {
	p := strings.TrimPrefix(path, basePath)
	if p == "/v1" || strings.HasPrefix(p, "/v1/") {
		p = p[len("/v1"):]
	}
	p = strings.TrimPrefix(p, "/")
	if strings.Trim(p, "/") == "" {
		return s.w.index, ""
	}
	name, rest, _ := strings.Cut(p, "/")
	if name == "custom" {
		var custom string
		custom, rest, _ = strings.Cut(rest, "/")
		name += "/" + custom
	}
	st := s.w.stationByName[name]
	if st == nil {
		return nil, ""
	}
	return st, strings.Trim(rest, "/")
}

// writeError writes the plugin's error envelope.
func (s *Sim) writeError(w http.ResponseWriter, now int64, path string, e *apiError) {
	apijson.Write(w, e.status, apijson.AppendError(make([]byte, 0, 256), e.status, e.msg, path, s.ServerID, now))
}

// writeJDKPage imitates com.sun.net.httpserver's own error pages: HTML, no
// CORS header, connection closed.
func writeJDKPage(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/html")
	h.Set("Connection", "close")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// validEscapes reports whether every '%' in s starts a two-digit hex escape,
// which is what java.net.URI demands of a query.
func validEscapes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return false
		}
		i += 2
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// call is what a station's builder gets to know about one request.
type call struct {
	now      int64  // epoch ms of this response (meta.updatedAt)
	at       int64  // the snapshot instant on snapshot stations, else now
	path     string // decoded request path
	rest     string // remainder after the station, slashes stripped
	query    string // decoded query, as URI.getQuery() gives it
	rawQuery string
}

// flag reports whether the decoded query has an element exactly equal to
// want, which is how the plugin reads history=true, detailed=true and
// view=html: case-sensitive, anywhere, even next to a contradicting value.
func (c *call) flag(want string) bool {
	for _, el := range strings.Split(c.query, "&") {
		if el == want {
			return true
		}
	}
	return false
}

// apiError is an error the plugin turns into its error envelope.
type apiError struct {
	status int
	msg    string
}

var errMethod = &apiError{http.StatusMethodNotAllowed, "Method Not Allowed"}

func notFound(path string) *apiError {
	return &apiError{http.StatusNotFound, "No such endpoint: " + path}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Sim)(nil)
	_ caddy.Validator             = (*Sim)(nil)
	_ caddyhttp.MiddlewareHandler = (*Sim)(nil)
	_ caddyfile.Unmarshaler       = (*Sim)(nil)
)
