package caddymodule

import (
	"cmp"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
)

// forward is the backend step of ServeHTTP, the guard's one entry point. The
// backend's time and the client's are kept apart: within the request's
// budget the answer comes from the micro-cache, from an identical request's
// trip, or from a trip of the caller's own through admission; then, with
// every slot given back, it is written to the client at the client's pace,
// under the progress deadline, and held against the client's share of the
// held bytes until it is taken. It returns how the request ended; a refusal
// is conclude's to write, through the same progress deadline: forward puts
// the client's writer under it in x, once, and hands the steps below the
// writer and the request they act on.
func (h *Handler) forward(x *exchange, next caddyhttp.Handler) verdict {
	g := &h.guard
	pw := progress.New(x.w, g.writeTimeout)
	defer pw.Done()
	x.w, x.forwarded = pw, true
	if err := g.held.Check(x.who.holder, x.who.held); err != nil {
		return heldRefusal(err).verdict
	}
	// The request the steps below take, under the budget: theirs, not
	// conclude's, which tells a client that left by the client's own.
	r := x.r
	if g.timeout > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if !g.shareable(x.ep) {
		res, err := h.trip(pw, r, x.ep, x.who, next)
		v := h.answer(pw, x, res, err)
		if res != nil {
			buffers.put(res.Body) // the caller's alone
		}
		return v
	}
	key := g.shareKey(r, x.filtered())
	// Only an endpoint with a time to live looks: a guard outlives a reload
	// that turns an endpoint's cache off, and what the old config stored
	// must not be served under the new one.
	if x.ep.cacheTTL > 0 {
		if e, fresh, ok := g.caching().GetStale(key); ok {
			v := h.deliver(pw, x.who, &coalesce.Result{Status: e.Status, Header: e.Header, Body: e.Body}, true, metrics.Cached)
			if !fresh {
				h.refresh(r, x.repl, x.ep, x.who, key, next)
			}
			return v
		}
	}
	res, how, err := g.coalescing().Do(r.Context(), key, func(ctx context.Context) (*coalesce.Result, error) {
		res, err := h.trip(pw, r.WithContext(ctx), x.ep, x.who, next)
		if err == nil {
			g.store(key, x.ep, res)
		}
		return res, err
	})
	switch how {
	case coalesce.Shared:
		return h.deliver(pw, x.who, res, true, metrics.Coalesced)
	case coalesce.Abandoned:
		return contextRefusal(err).verdict
	}
	// The caller's own trip.
	v := h.answer(pw, x, res, err)
	if res != nil && res.Followers == 0 && x.ep.cacheTTL <= 0 {
		buffers.put(res.Body) // nobody else has it
	}
	return v
}

// shareable reports whether the endpoint's answers may go to more than one
// caller (coalesced or cached): then the backend is asked for an unencoded
// body, the same for every caller of the class, and each caller is told not
// to store it (deliver).
func (g *backendGuard) shareable(ep *endpoint) bool {
	return g.lim.Load().Coalesce || ep.cacheTTL > 0
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

// caching is the guard's micro-cache while the limits in force have one, or
// nil, which holds nothing.
func (g *backendGuard) caching() *microcache.Cache {
	if g.lim.Load().CacheSize > 0 {
		return g.cache
	}
	return nil
}

// coalescing is the guard's coalescing group while the limits in force have
// coalescing on, or nil, which just runs each call.
func (g *backendGuard) coalescing() *coalesce.Group {
	if g.lim.Load().Coalesce {
		return g.flights
	}
	return nil
}

// deliver writes a held answer to the client, pw, within the share of the
// held bytes of the caller who, which it holds until the client has taken the
// answer or the progress deadline cut it off. shareable says other callers
// may get the same bytes: the client is then told not to store it.
func (h *Handler) deliver(pw *progress.Writer, who caller, res *coalesce.Result, shareable bool, outcome metrics.Outcome) verdict {
	claim, err := h.guard.held.Hold(who.holder, who.held, res.Body)
	if err != nil {
		return heldRefusal(err).verdict
	}
	defer claim.Release()
	pw.Watch(claim) // each piece the client takes is progress
	defer pw.Watch(nil)
	writeHeld(pw, res.Status, res.Header, res.Body, shareable)
	_ = pw.Done()
	return verdict{outcome: outcome}
}

// trip is one request's way to the backend and back, under the caller's
// per-client place and an admission slot, both given back when the backend
// is done. The answer is read into a spool: held whole when it fits
// max_response and the held bytes, and then returned; otherwise streamed to
// the caller's client as it comes, with the slot kept, and the followers of
// a shared trip released at once to make their own. w is the client's
// writer, r the canonical request under the budget, ep and who what the
// gateway decided of it.
func (h *Handler) trip(w http.ResponseWriter, r *http.Request, ep *endpoint, who caller, next caddyhttp.Handler) (*coalesce.Result, error) {
	g := &h.guard
	// Counted whether or not a bound is in force, so that a reload that sets
	// one finds what is open.
	if !who.counts {
		if !g.quota.Take(who.holder) {
			return nil, tooMany(errQuota)
		}
		defer g.quota.Give(who.holder)
	} else {
		// The key's own cap, before the queue: past it only this key's
		// caller is turned away, and nobody waits for it. Counted by the
		// key's name, under its cap in this config.
		if !g.keys.TakeUpTo(who.holder, who.keyCap) {
			return nil, tooMany(errKeyQuota)
		}
		defer g.keys.Give(who.holder)
	}
	ctx := r.Context()
	permits, err := g.admit(ctx, ep, who.counts)
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
	sp := newSpool(w, g.maxResponse, g.held, func() error {
		if limit := g.maxStreams.Load(); !who.counts && limit > 0 {
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
	sp.mustHold = who.filtered() && !r.ProtoAtLeast(1, 1)
	defer sp.free()
	outcome, err := h.proxy(sp, r, ep, who.filtered(), next)
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

// answer is what the caller's own trip came to: the answer, delivered to
// pw, or the gateway's refusal; a streamed answer is written already. An
// error the trip has no verdict for is the backend's failure: 502.
func (h *Handler) answer(pw *progress.Writer, x *exchange, res *coalesce.Result, err error) verdict {
	switch err := err.(type) {
	case nil:
		outcome := metrics.Served
		if x.filtered() {
			outcome = metrics.Filtered
		}
		return h.deliver(pw, x.who, res, h.guard.shareable(x.ep), outcome)
	case *streamed:
		return err.verdict
	case *refusal:
		return err.verdict
	default:
		return badGateway(err).verdict
	}
}

// store puts a whole response of a cached endpoint into the micro-cache: for
// its time to live, or, for a snapshot station, until the backend's next
// snapshot is due if that is later (see BackendConfig.Snapshot).
func (g *backendGuard) store(key string, ep *endpoint, res *coalesce.Result) {
	if res == nil || ep.cacheTTL <= 0 || res.Status != http.StatusOK {
		return // only a whole answer: never a part (206) or a "not modified" (304)
	}
	cache, ttl := g.caching(), ep.cacheTTL
	if ep.snapshot > 0 {
		if at, ok := snapshotTime(res.Body); ok {
			if due := at.Add(ep.snapshot).Sub(cache.Now()); due > ttl {
				ttl = min(due, ep.snapshot) // a clock ahead of ours never keeps it longer
			}
		}
	}
	cache.Put(key, microcache.Entry{Status: res.Status, Header: res.Header, Body: res.Body}, ttl)
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
func (h *Handler) refresh(r *http.Request, repl *caddy.Replacer, ep *endpoint, who caller, key string, next caddyhttp.Handler) {
	g := &h.guard
	if _, busy := g.refreshing.LoadOrStore(key, struct{}{}); busy {
		return
	}
	// The budget of its own: the caller's ends with the caller, and without
	// one a hung backend would hold this key's refreshes for ever.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), cmp.Or(g.timeout, staleGrace))
	bg := backgroundRequest(ctx, r, repl)
	go func() {
		defer g.refreshing.Delete(key)
		defer cancel()
		defer func() {
			// A response that broke off ends in http.ErrAbortHandler, which
			// net/http would have caught for a caller; here nobody would.
			if rec := recover(); rec != nil && rec != http.ErrAbortHandler {
				h.logger.Error("cache refresh failed", zap.String("endpoint", ep.name), zap.Any("panic", rec))
			}
		}()
		if res, err := h.trip(discardWriter{}, bg, ep, who, next); err == nil {
			g.store(key, ep, res)
		}
	}()
}

// backgroundRequest is a copy of the canonical upstream request r for a trip
// nobody waits for (a refresh, a live stream's poll), under ctx: with its own
// replacer and variables, which carry the endpoint, key and client
// placeholders of repl, because Caddy's are the caller's, which the caller's
// handlers and log still use.
func backgroundRequest(ctx context.Context, r *http.Request, repl *caddy.Replacer) *http.Request {
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	bg := r.Clone(ctx)
	bg.Body = http.NoBody
	own := caddy.NewReplacer()
	for _, p := range []string{placeholderEndpoint, placeholderKey, placeholderClient} {
		v, _ := repl.Get(p)
		own.Set(p, v)
	}
	return caddyhttp.PrepareRequest(bg, own, nil, srv)
}

// discardWriter is the client of a background refresh: nobody.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) WriteHeader(int)             {}
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
