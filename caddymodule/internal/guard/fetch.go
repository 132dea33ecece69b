package guard

// This file is the guard's first door, Fetch: the answer to one request that
// the gateway let through, for ServeHTTP, a live stream's opening fetch and
// polls, a network's member trips and the game metrics alike; a stale
// entry's refresh is a trip of its own (refresh). The backend's time and the client's are
// kept apart: within the request's budget the answer comes from the
// micro-cache, from an identical request's trip, or from a trip of the
// caller's own through admission; then, with every slot given back, it is
// written to the client at the client's pace, under the progress deadline,
// and held against the client's share of the held bytes until it is taken.

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
)

// Fetch answers the request r that t describes, to pw, with the backend's
// answer. It returns how the request ended; a refusal is the caller's to
// write (the handler's conclude, or a stream's poll).
func (g *Guard) Fetch(pw *progress.Writer, r *http.Request, t *Ticket) Verdict {
	if err := g.check(t.Caller); err != nil {
		return HeldRefusal(err)
	}
	// Only an endpoint with a time to live looks: a guard outlives a reload
	// that turns an endpoint's cache off, and what the old config stored
	// must not be served under the new one. A stale entry is refreshed
	// before it is written, at whatever pace its client reads.
	if t.Share != "" && t.Station.CacheTTL > 0 {
		if e, fresh, ok := g.caching().GetStale(t.Share); ok {
			if !fresh {
				g.refresh(r, t)
			}
			return g.deliver(pw, t.Caller, &coalesce.Result{Status: e.Status, Header: e.Header, Body: e.Body}, true, true, metrics.Cached)
		}
	}
	if g.timeout > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	// The answer's buffer, from the pool: taken by the spool as the answer
	// comes, and given back here once it is written, unless the followers
	// of a shared trip have it (the cache keeps a copy).
	sp := newSpool(pw, g.maxResponse(), g.held)
	defer sp.recycle()
	if t.Share == "" {
		res, v := g.trip(sp, r, t, r.Context())
		if res == nil {
			return v
		}
		if left(r) {
			return ContextRefusal(r.Context().Err())
		}
		return g.deliver(pw, t.Caller, res, false, false, v.Outcome)
	}
	var v Verdict // of the caller's own trip
	res, how := g.coalescing().Do(r.Context(), t.Share, func(ctx context.Context) *coalesce.Result {
		var res *coalesce.Result
		// The leader waits while its own budget and client last; its trip
		// may outlive it for the followers (coalesce.Hand).
		res, v = g.trip(sp, r.WithContext(ctx), t, r.Context())
		return res
	})
	switch how {
	case coalesce.Shared:
		return g.deliver(pw, t.Caller, res, true, false, metrics.Coalesced)
	case coalesce.Abandoned:
		return ContextRefusal(r.Context().Err())
	}
	if res == nil {
		return v
	}
	if res.Followers > 0 {
		sp.keep()
	}
	if left(r) {
		return ContextRefusal(r.Context().Err())
	}
	return g.deliver(pw, t.Caller, res, true, false, v.Outcome)
}

// left reports whether r's client left while its trip ran on without it
// (trip): the answer is nobody's, and the request ends as its client's
// leaving does (client_gone), not as served.
func left(r *http.Request) bool {
	return errors.Is(r.Context().Err(), context.Canceled)
}

// caching is the guard's micro-cache while the limits in force have one, or
// nil, which holds nothing.
func (g *Guard) caching() *microcache.Cache {
	if g.lim.Load().CacheSize > 0 {
		return g.cache
	}
	return nil
}

// coalescing is the guard's coalescing group while the handler has
// coalescing on, or nil, which just runs each call.
func (g *Guard) coalescing() *coalesce.Group {
	if g.coalesce {
		return g.flights
	}
	return nil
}

// deliver writes a held answer to the client, pw, within the share of the
// held bytes of the caller who, which it holds until the client has taken
// the answer or the progress deadline cut it off, with each piece the client
// takes counted as progress. shareable says other callers may get the same
// bytes: the client is then told not to store it. cached says the bytes are
// kept as well (the micro-cache's, or an answer of the gateway's own): they
// are lent (hold.Budget.Lend), counted once however many clients hold them,
// and within the held bytes, since the cache may let them go while a client
// still holds them. An answer that does not fit is the caller's refusal,
// and nothing is written.
func (g *Guard) deliver(pw *progress.Writer, who Caller, res *coalesce.Result, shareable, cached bool, outcome metrics.Outcome) Verdict {
	hold := g.held.Hold
	if cached {
		hold = g.held.Lend
	}
	claim, err := hold(who.Holder, who.Held, res.Body)
	if held, err := hand(pw, claim, err, func() error {
		writeHeld(pw, res.Status, res.Header, res.Body, shareable)
		return pw.Done()
	}); !held {
		return HeldRefusal(err)
	}
	return Verdict{Outcome: outcome}
}

// hand writes an answer (or a stream's event) with write, once its claim
// on the held bytes is taken (or refused with err: then nothing is written,
// and err is the budget's reason), holding it until the client has taken it,
// with each piece the client takes counted as progress. held says whether
// the answer fit; if so, err is write's.
func hand(pw *progress.Writer, claim *hold.Claim, err error, write func() error) (held bool, _ error) {
	if err != nil {
		return false, err
	}
	defer claim.Release()
	pw.Watch(claim) // each piece the client takes is progress
	defer pw.Watch(nil)
	return true, write()
}

// trip is one request's way to the backend and back, under the caller's
// per-client place and an admission slot, both given back when the backend
// is done, whether or not the caller still waits then (an errand): the
// caller waits while waits lasts (its budget and its client), and its
// request, r, is the canonical request under the budget. The answer is read
// into sp: held whole when it fits max_response and the held bytes, and then
// returned; otherwise streamed to the caller's client as it comes, with the
// slot kept, and the followers of a shared trip released at once to make
// their own. The verdict says how the trip ended; with an answer held
// whole, its outcome is the answer's.
func (g *Guard) trip(sp *spool, r *http.Request, t *Ticket, waits context.Context) (*coalesce.Result, Verdict) {
	who := t.Caller
	ctx := r.Context()
	if err := g.uncovered(ctx, t.Station); err != nil {
		return nil, ContextRefusal(err)
	}
	if err := g.place(who); err != nil {
		return nil, TooMany(err)
	}
	permits, err := g.admit(ctx, t.Station, who.Keyed)
	if err != nil {
		g.unplace(who)
		var be *admission.BusyError
		if errors.As(err, &be) {
			return nil, Busy(err, strconv.Itoa(int(be.RetryAfter/time.Second)))
		}
		return nil, ContextRefusal(err)
	}
	// Admitted, perhaps after a wait that left too little of the budget:
	// such a request is not sent.
	if err := g.uncovered(ctx, t.Station); err != nil {
		permits.Release()
		g.unplace(who)
		return nil, ContextRefusal(err)
	}
	// From here the request is the backend's, which works it off whether or
	// not anyone still waits: the plugin's server never learns that a client
	// left or a budget ended, and a caller that stops waiting must not free
	// a slot, a main-thread lane, a per-client place or a key's place the
	// backend is still using (a flood of requests abandoned at once, or
	// whose budget is shorter than the backend's answers, would otherwise
	// reach it unbounded). So the trip runs on, holding them, until the
	// backend has answered or Patience has passed; an answer nobody waits
	// for is read whole and dropped, or kept for the micro-cache, and a
	// shared trip stays open to the callers who ask for the same answer
	// meanwhile.
	coalesce.Commit(ctx)
	return g.dispatch(sp, r, t, permits).await(waits)
}

// answer sends the request and reads its answer into sp, in the trip's own
// goroutine (errand.run), as trip says.
func (g *Guard) answer(sp *spool, r *http.Request, t *Ticket) (*coalesce.Result, Verdict) {
	who := t.Caller
	ctx := r.Context()
	streaming := false
	defer func() {
		if streaming {
			g.bigAnswers.Add(-1)
		}
	}()
	// An HTTP/1.0 client has no chunked encoding: a filtered answer that
	// broke off mid-stream would reach it as a clean close after a 200, a
	// truncated body it cannot tell from a whole one. It gets answers held
	// whole, or a 502.
	mustHold := who.Filtered() && !r.ProtoAtLeast(1, 1)
	sp.begin(who.Held, mustHold, func() error {
		if limit := g.maxBigAnswers.Load(); !who.Keyed && limit > 0 {
			if g.bigAnswers.Add(1) > limit {
				g.bigAnswers.Add(-1)
				return errStreamsFull
			}
			streaming = true
		}
		coalesce.Release(ctx)
		return nil
	})
	defer sp.done()
	v := g.proxy(sp, r, t)
	switch {
	case errors.Is(sp.err, errStreamsFull):
		return nil, Busy(sp.err, "1")
	case v.Status != 0, v.Cut, sp.spilled:
		return nil, v // refused, failed, or streamed to the client already
	}
	res := sp.result()
	if res == nil {
		return nil, BadGateway(errNoBody)
	}
	return res, v
}

// place takes who's place among the requests open at the backend: an
// anonymous caller's per-client place (max_per_client), or a key's under its
// own cap, before the queue: past it only this caller is turned away, and
// nobody waits for it. Counted whether or not a bound is in force, so that a
// reload that sets one finds what is open. The gateway's own caller (a
// network's member trips) takes none. An error is why the caller is refused
// (its 429, TooMany); with none, unplace gives the place back.
func (g *Guard) place(who Caller) error {
	switch {
	case who.Gateway:
	case !who.Keyed:
		if !g.quota.TakeUpTo(who.Holder, g.perClient) {
			return errQuota
		}
	case !g.keys.TakeUpTo(who.Holder, who.KeyCap):
		// Counted by the key's name, under its cap in this config.
		return errKeyQuota
	}
	return nil
}

// unplace gives back the place that place took for who.
func (g *Guard) unplace(who Caller) {
	switch {
	case who.Gateway:
	case !who.Keyed:
		g.quota.Give(who.Holder)
	default:
		g.keys.Give(who.Holder)
	}
}

// admit waits for the backend's capacity: the main-thread limiter first for
// the stations that need it, then the global one. Release the Permits when the
// backend is done with the request.
func (g *Guard) admit(ctx context.Context, ep *Station, withKey bool) (admission.Permits, error) {
	class := admission.Anonymous
	if withKey {
		class = admission.Keyed
	}
	if ep.MainThread && g.lim.Load().MainThread > 0 {
		return admission.AcquireAll(ctx, class, g.main, g.all)
	}
	return admission.AcquireAll(ctx, class, g.all)
}

// store puts a copy of a whole response of a cached endpoint into the
// micro-cache: for its time to live, or, for a snapshot station, until the
// backend's next snapshot is due if that is later (see
// BackendConfig.Snapshot).
func (g *Guard) store(key string, ep *Station, res *coalesce.Result) {
	if res == nil || ep.CacheTTL <= 0 || res.Status != http.StatusOK {
		return // only a whole answer: never a part (206) or a "not modified" (304)
	}
	cache := g.caching()
	if cache == nil {
		return
	}
	cache.Put(key, microcache.Entry{Status: res.Status, Header: res.Header, Body: res.Body}, CacheTime(ep, res.Body, cache.Now()))
}

// CacheTime is how long an answer body of ep, made at now, is kept: ep's
// time to live, or, for a snapshot station, until the backend's next
// snapshot is due if that is later.
func CacheTime(ep *Station, body []byte, now time.Time) time.Duration {
	ttl := ep.CacheTTL
	if ep.Snapshot > 0 {
		if at, ok := SnapshotTime(body); ok {
			if due := at.Add(ep.Snapshot).Sub(now); due > ttl {
				ttl = min(due, ep.Snapshot) // a clock ahead of ours never keeps it longer
			}
		}
	}
	return ttl
}

// SnapshotTime is the meta.cachedAt of a backend envelope: when the snapshot
// it carries was taken. gjson finds that one member without decoding the body
// (the station's data is skipped, not built); the value counts only when it
// is a JSON integer literal in int64's range, as encoding/json would accept it
// into an int64: an absent or null cachedAt, a fraction, an exponent or a
// string is no snapshot time. The body is not validated: the filter refuses a
// broken body to every caller without a key, and a time read from one keeps
// the entry at most one snapshot interval.
func SnapshotTime(body []byte) (time.Time, bool) {
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
// request of its own (BackgroundRequest) with the caller's ticket, the same
// admission and budget, and no caller to answer: its outcome is not counted.
func (g *Guard) refresh(r *http.Request, t *Ticket) {
	if _, busy := g.refreshing.LoadOrStore(t.Share, struct{}{}); busy {
		return
	}
	if g.caching().Fresh(t.Share) {
		// Refreshed since this caller found it stale, by a refresh that
		// has ended since.
		g.refreshing.Delete(t.Share)
		return
	}

	// The budget of its own: the caller's ends with the caller, and without
	// one a hung backend would hold this key's refreshes for ever.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), g.backgroundBudget())
	bg := g.BackgroundRequest(ctx, r, t)
	go func() {
		defer g.refreshing.Delete(t.Share)
		defer cancel()
		Background(g.logger, "cache refresh", t.Station, func() Verdict {
			// Its client takes nothing: an answer too large to hold,
			// which the cache could not keep, ends the trip where it
			// would spill, rather than stream to nobody with its slot.
			sp := newSpool(progress.New(NewCapture(0), 0), g.maxResponse(), g.held)
			defer sp.recycle()
			_, v := g.trip(sp, bg, t, bg.Context())
			return v
		})
	}()
}

// backgroundBudget is the budget of a trip or a making the guard runs in
// the background for the callers to come (a stale entry's refresh, an own
// answer's remaking): the requests' own, or StaleGrace where they have
// none, so that a backend that hangs holds none of them for ever.
func (g *Guard) backgroundBudget() time.Duration { return cmp.Or(g.timeout, StaleGrace) }

// StaleGrace is how long past its time to live a cache entry is still
// served while one request refreshes it: as long as the default request
// budget, so that a refresh that fails or times out is retried before
// callers are made to wait.
const StaleGrace = 5 * time.Second
