package caddymodule

// This file is a topic's polls (topicPolls): the answer a plain GET would
// get, fetched for the topic's viewers in turn, and when it is asked again.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/live"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
)

// charge is who a topic's poll is charged to when it is a viewer's turn
// (live.Viewer.By): the viewer's caller, with its limits, and the values of
// its placeholders that the handlers after statusgate read (a rate_limit's
// key), so that the poll passes what the viewer's plain GET would.
type charge struct {
	who         guard.Caller
	client, key any
}

// placeholderValue is the value statusgate set for the placeholder p on r.
func placeholderValue(r *http.Request, p string) any {
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		return noValue
	}
	v, _ := repl.Get(p)
	return v
}

// poller is the Fetch of a stream's topic: the answer a plain GET of the
// canonical request r gets, through answer (the guard's fetch: the
// micro-cache, coalescing with plain GETs, admission, the queue), each
// time on behalf of one of the topic's viewers, charged to that viewer's
// limits. It is made only if the topic is new, and its
// request, made of r's canonical parts only, outlives r: not the first
// viewer's headers or context, whose replacer holds the first viewer's
// whole request, which would stay pinned for the topic's life.
func (tp topicPolls) poller(r *http.Request, t *guard.Ticket, answer answerFunc) live.Fetch {
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	repl := caddy.NewReplacer()
	repl.Set(placeholderEndpoint, placeholderValue(r, placeholderEndpoint))
	ctx := context.WithValue(context.WithValue(context.Background(), caddyhttp.ServerCtxKey, srv), caddy.ReplacerCtxKey, repl)
	// Where the first viewer's request came in, the gateway's own address:
	// a poll's (guard.BackgroundRequest).
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, r.Context().Value(http.LocalAddrContextKey))
	base := r.WithContext(ctx)
	u := *r.URL
	base.URL = &u
	base.Header = http.Header{} // not the first viewer's, which the topic would keep
	return func(ctx context.Context, by any) ([]byte, time.Duration, bool) {
		c := by.(*charge)
		pt := *t // a ticket of each poll's own: a refresh it starts keeps it
		pt.Caller = c.who
		rctx, cancel := context.WithCancel(base.Context())
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		pr := tp.guard.BackgroundRequest(rctx, base, &pt)
		repl := pr.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		repl.Set(placeholderKey, c.key)
		repl.Set(placeholderClient, c.client)
		v, body, _ := tp.fetch(pr, &pt, answer)
		return body, liveInterval(pt.Station, body), v.Status == http.StatusTooManyRequests
	}
}

// fetch is one answer to r for t as a stream's event: the answer a plain
// GET would get, through answer; a refusal or a backend failure is the
// gateway's envelope (a failure is an event too, the plain GET's 502, 503
// or 504), and so is an answer that is not the backend's JSON (a proxy's
// HTML page, a body cut short), which a keyed plain GET gets as it came
// but an event cannot carry, and one larger than max_response: a plain GET
// streams it to its client as it comes, but a topic keeps its answer
// whole for as long as it lasts, so it gets the 502 of an answer that
// cannot be held (the write past max_response fails, and the trip ends
// there). The verdict says how it ended, and status is the answer's (the
// backend's, when the verdict is not a refusal).
func (tp topicPolls) fetch(r *http.Request, t *guard.Ticket, answer answerFunc) (v guard.Verdict, body []byte, status int) {
	rec := guard.NewCapture(int(tp.guard.Limits().MaxResponse))
	v = guard.Background(tp.logger, "live stream poll", t.Station, func() guard.Verdict {
		return answer(progress.New(rec, 0), r, t)
	})
	status = rec.Status
	if v.Cut {
		v.Status = http.StatusBadGateway
	}
	if rec.Over {
		v = guard.BadGateway(errEventTooLarge)
	}
	if v.Status == 0 && (rec.Status >= http.StatusInternalServerError || !json.Valid(rec.Body)) {
		// The backend's failure, as it came: the gateway's envelope.
		v = guard.BadGateway(errNotAnEvent)
		if rec.Status == http.StatusServiceUnavailable || rec.Status == http.StatusGatewayTimeout {
			v.Status = rec.Status
		}
	}
	if v.Status != 0 {
		// Logged as conclude logs a plain GET's: a failure, not a refusal,
		// nor the end of a wait that nobody waits for any more.
		if v.Failed() && r.Context().Err() == nil {
			logFailure(tp.logger, v.Status, t.Station.Name, v.Cause)
		}
		rec.Body, rec.Over = nil, false
		writeError(rec, v.Status, t.Path)
		status = v.Status
	}
	return v, rec.Body, status
}

var (
	// errNotAnEvent is why a backend answer is not a stream's event.
	errNotAnEvent = errors.New("backend answer is a failure or not JSON")
	// errEventTooLarge is why an answer larger than max_response is not.
	errEventTooLarge = errors.New("backend answer larger than max_response: a live topic keeps its answer whole")
)

// Polling: how long after an answer the poller asks again.
const (
	// snapshotLag is how long after a snapshot is due the poller asks for
	// it, so that the backend has taken it.
	snapshotLag = 100 * time.Millisecond
	// overdueStep is how soon the poller asks again when the answer's
	// snapshot is overdue: the micro-cache is refreshing it (a plain GET
	// would get the stale answer now and the fresh one a moment later), so
	// asking again costs a cache lookup, not a trip.
	overdueStep = 100 * time.Millisecond
)

// liveInterval is how long after the answer the poller asks again: when the
// answer's snapshot (meta.cachedAt) is replaced by the next one, for a
// snapshot station, or after the cache time, so that the backend sees one
// trip per snapshot whatever the number of viewers.
func liveInterval(ep *guard.Station, answer []byte) time.Duration {
	every := cmp.Or(ep.CacheTTL, ep.Snapshot)
	if ep.Snapshot <= 0 {
		return every
	}
	at, ok := guard.SnapshotTime(answer)
	if !ok {
		return every
	}
	due := time.Until(at.Add(ep.Snapshot)) + snapshotLag
	switch {
	case due > ep.Snapshot+snapshotLag:
		return every // a clock ahead of ours never makes the poller wait longer
	case due > 0:
		return due
	case ep.CacheTTL > 0:
		return overdueStep
	}
	return max(overdueStep, ep.Snapshot/5) // each poll is a trip
}

// topicPolls is what a stream's fetches need: the handler's guard, whose
// answers the streams carry, and its logger.
type topicPolls struct {
	guard  *guard.Guard
	logger *zap.Logger
}
