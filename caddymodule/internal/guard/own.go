package guard

// This file is the guard's second door, Own: an answer the gateway makes on
// its own (a network's document, made of its members' answers), which the
// guard keeps, coalesces, refreshes and hands over as it does the backend's
// answers, but apart from the micro-cache.

import (
	"context"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
)

// ownAnswers are the answers the handler's gateway makes on its own, by
// share key (Ticket.Share): each kept for its callers until its time, and
// made once however many callers ask. They are the handler's: the makings
// of one handler never meet another's, and they go with it (Leave).
type ownAnswers struct {
	// makings coalesces the making of the answers: the gateway's own work,
	// like a cache refresh, which however many callers ask does once;
	// always on, whatever the handler's coalesce says of backend trips.
	makings *coalesce.Group
	kept    sync.Map // share key → *ownSlot; a handful (a network's classes)
	// gone says the handler left: no answer is kept any more.
	gone atomic.Bool
}

// ownSlot is where the answer of one share key is kept.
type ownSlot struct {
	answer   atomic.Pointer[ownAnswer]
	remaking atomic.Bool // a background remaking is under way
	// holder is who keeps the slot's answers in the held bytes: a holder
	// of the slot's own ("own " and the share key), no caller's, as an
	// anonymous topic's event is kept (topicBudget): the answer is every
	// caller's of its class, and outlives the one whose request made it.
	holder string
}

// ownAnswer is an answer kept for its callers until expires, and served
// while made anew until gone; kept is its claim on the held bytes while it
// is kept (nil for an answer of up to hold.Small, which is not charged).
type ownAnswer struct {
	res           *coalesce.Result
	expires, gone time.Time
	kept          *hold.Claim
}

// Own answers the request r that t describes with an answer the gateway
// makes on its own (maker: the answer, nil on the gateway's own error, and
// how long it may be kept, 0: not kept), shared by every caller of
// t.Share: the one kept, or the one being made (coalesced: one making
// however many callers ask), or one the caller's request makes, leading the
// making. An answer past its time is served for StaleGrace more while it is
// made anew in the background, as a stale cache entry is. It is kept apart
// from the micro-cache, whose entries are at most an eighth of cache_size,
// but only while the guard has one (cache_size), charged to the held bytes
// in the pool of the caller's class (a kept answer that finds no room is
// not kept), and every caller gets the same bytes, lent to its share of the
// held bytes like a cached answer: the bytes count once in the held bytes,
// however many callers read them, and not at all when they are of up to
// hold.Small, as a cached answer's. The caller's own limits are its share of
// the held bytes and, if it leads a making, its per-client place or key cap
// for that time: its 429.
func (g *Guard) Own(pw *progress.Writer, r *http.Request, t *Ticket, maker func(ctx context.Context) (*coalesce.Result, time.Duration)) Verdict {
	who := t.Caller
	if err := g.check(who); err != nil {
		return HeldRefusal(err)
	}
	v, ok := g.own.kept.Load(t.Share)
	if !ok {
		v, _ = g.own.kept.LoadOrStore(t.Share, &ownSlot{holder: "own " + t.Share})
	}
	slot := v.(*ownSlot)
	if a := slot.answer.Load(); a != nil {
		if now := g.cache.Now(); now.Before(a.gone) {
			if !now.Before(a.expires) {
				g.remake(slot, r, t, maker)
			}
			return g.deliver(pw, who, a.res, true, true, metrics.Cached)
		}
	}
	var lead Verdict // of the caller's own lead
	res, how := g.own.makings.Do(r.Context(), t.Share+" answer", func(ctx context.Context) *coalesce.Result {
		// The caller leads: its request counts among its open requests
		// while the answer is made. A refusal is its own (a follower
		// then leads in its place, each joining the one making).
		if err := g.place(who); err != nil {
			lead = TooMany(err)
			return nil
		}
		defer g.unplace(who)
		res, _ := g.own.makings.Do(ctx, t.Share+" making", func(ctx context.Context) *coalesce.Result {
			return g.make(ctx, slot, who, maker)
		})
		switch {
		case res != nil:
		case ctx.Err() != nil:
			lead = ContextRefusal(ctx.Err())
		default:
			lead = Verdict{Outcome: metrics.BackendError, Status: http.StatusInternalServerError}
		}
		return res
	})
	switch {
	case how == coalesce.Abandoned:
		return ContextRefusal(r.Context().Err())
	case res == nil:
		return lead
	}
	outcome := metrics.Coalesced
	if how != coalesce.Shared {
		outcome = metrics.Served
		if who.Filtered() {
			outcome = metrics.Filtered
		}
	}
	return g.deliver(pw, who, res, true, true, outcome)
}

// remake makes the slot's answer anew in the background, unless that is
// under way: its callers meanwhile get the one kept, as a stale cache entry
// is served while it is refreshed.
func (g *Guard) remake(slot *ownSlot, r *http.Request, t *Ticket, maker func(ctx context.Context) (*coalesce.Result, time.Duration)) {
	if !slot.remaking.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer slot.remaking.Store(false)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), g.backgroundBudget())
		defer cancel()
		g.own.makings.Do(ctx, t.Share+" making", func(ctx context.Context) *coalesce.Result {
			return g.make(ctx, slot, t.Caller, maker)
		})
	}()
}

// make makes the slot's answer for who, and keeps it for the time maker
// gives, charged to the held bytes in the pool of who's class as a live
// topic keeps its latest event (hold.Budget.Keep): once, under the slot's
// holder, and not at all if small; a caller it is lent to (deliver) adds
// nothing to the total or the pool while it is kept. Under a
// guard without a micro-cache (cache_size off), or an answer with no time,
// nothing is kept, and each making is shared only by the callers that came
// while it ran.
func (g *Guard) make(ctx context.Context, slot *ownSlot, who Caller, maker func(ctx context.Context) (*coalesce.Result, time.Duration)) *coalesce.Result {
	res, ttl := maker(ctx)
	if res == nil {
		return nil
	}
	if ttl <= 0 || g.caching() == nil {
		g.keep(slot, nil)
		return res
	}
	now := g.cache.Now()
	// The slot's holder is bounded by the pool alone: its answers are at
	// most max_response, one per class at a time.
	share := hold.Share{Bytes: math.MaxInt64 / 2, Keyed: who.Keyed}
	claim, err := g.held.Keep(slot.holder, share, res.Body, len(res.Body))
	if err != nil {
		g.keep(slot, nil)
		return res
	}
	g.keep(slot, &ownAnswer{res: res, expires: now.Add(ttl), gone: now.Add(ttl + StaleGrace), kept: claim})
	return res
}

// keep puts a (nil: none) in the slot, releasing the claim of the answer it
// replaces: its bytes stay counted while a caller still holds them. Once
// the handler has left, a making that ends after it keeps nothing: the
// guard, and its held bytes, outlive the handler.
func (g *Guard) keep(slot *ownSlot, a *ownAnswer) {
	if old := slot.answer.Swap(a); old != nil {
		old.kept.Release()
	}
	if a != nil && g.own.gone.Load() {
		g.keep(slot, nil)
	}
}

// leaveOwn gives back what the handler's own answers keep, for good.
func (g *Guard) leaveOwn() {
	g.own.gone.Store(true)
	g.own.kept.Range(func(_, v any) bool {
		g.keep(v.(*ownSlot), nil)
		return true
	})
}
