package guard

// This file is the part of a trip that is the backend's: from the moment a
// request is sent until the backend has answered it. The ServerAPI plugin
// cannot be told that nobody waits any more (its server works off every
// request it was sent, from a queue without bound), so what the request
// takes of the gateway's count of the backend (its admission slot, its
// main-thread lane, its client's or key's place) stays taken until the
// backend is done with it, whatever its caller does: the caller's budget
// (timeout) bounds how long the caller waits, not how long the backend
// works. A caller whose budget ends gets its 504 at once and leaves the
// trip to run on, in a goroutine of its own (an errand), bounded by the
// guard's own patience (Patience); its answer is read and dropped, or kept
// for the micro-cache and for the callers who joined it meanwhile.

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/seal"
)

// Patience is how long a trip nobody waits for any more (its caller's
// budget ended, or its client left) keeps its places before the gateway
// gives it up: it closes the connection, and the places are given back
// whether or not the backend is still working on it. Five times the
// plugin's slowest answer (/placeholders' 2 s resolve timeout; an offline
// player about 1.4 s): with the backend held to max_in_flight its queue is
// empty, and an answer that takes longer is a backend that hangs, whose
// slots would otherwise be taken for ever.
const Patience = 10 * time.Second

// patience is Patience, which a test shortens to see it end.
var patience = Patience

// errBudgetShort is why a request is not sent: what is left of its budget
// is less than the backend took for any recent answer of the station.
var errBudgetShort = errors.New("the request's budget left cannot cover the backend's answer time")

// errand is one request the backend has: the trip's goroutine (run)
// answers it into sp and gives its places back when the backend is done;
// the caller waits for it (await), or leaves it to itself.
type errand struct {
	g       *Guard
	sp      *spool
	r       *http.Request // under the errand's own context: the caller's values, none of its ends
	t       *Ticket
	permits admission.Permits
	cancel  context.CancelFunc // gives the trip up: the caller's budget (streaming), Patience, a stop
	// done gets one signal when the trip is done (run's last word on the
	// errand): a channel of one, rather than one closed, so that an errand
	// whose caller took its answer is used again with it (errands).
	done chan struct{}

	// Written by run before it signals done.
	res   *coalesce.Result
	v     Verdict
	panic any

	// Set by the caller who abandons the trip, under sp.owner; read by run
	// after sp.end says the trip was abandoned.
	finish   func(*coalesce.Result) // of a shared trip handed on (coalesce.Hand)
	patience *time.Timer
	stopped  func() bool // the guard's stop no longer ends the trip
}

// errands recycles the errands whose callers took their answers (an
// abandoned one is its trip's, and left to the garbage collector): a trip
// that its caller waits for allocates none.
var errands = sync.Pool{New: func() any { return &errand{done: make(chan struct{}, 1)} }}

// trips counts a guard's trips kept past their callers, for its metrics
// (metrics.Trips).
type trips struct {
	kept                      atomic.Int64 // abandoned trips at the backend now
	answered, givenUp, unsent atomic.Uint64
}

// TripStats implements metrics.Trips.
func (t *trips) TripStats() metrics.TripStats {
	return metrics.TripStats{
		Kept:     int(t.kept.Load()),
		Answered: t.answered.Load(),
		GivenUp:  t.givenUp.Load(),
		Unsent:   t.unsent.Load(),
	}
}

// dispatch sends r, which t describes and which holds permits and its
// caller's place, to the backend in a goroutine of its own, and returns the
// errand: its places are given back when the backend is done.
func (g *Guard) dispatch(sp *spool, r *http.Request, t *Ticket, permits admission.Permits) *errand {
	// The request's context keeps the caller's values, and neither its
	// cancellation nor its deadline: the backend works on whether or not
	// anyone waits (await and abandon decide when the trip is given up).
	ctx := ownVars(context.WithoutCancel(r.Context()))
	// What the caller presented as its key, which the declared backend's
	// transport refuses to send (seal.Transport).
	ctx = seal.With(ctx, t.Secrets)
	ctx, cancel := context.WithCancel(ctx)
	e := errands.Get().(*errand)
	e.g, e.sp, e.r, e.t, e.permits, e.cancel = g, sp, r.WithContext(ctx), t, permits, cancel
	errandWorkers.start(e)
	return e
}

// await waits for the errand's answer for a caller who waits while waits
// lasts: the caller's budget and client. When waits ends first, the caller
// leaves with the refusal for why it ended, and the trip runs on, holding
// its places, until the backend answers or Patience has passed; unless the
// answer already streams to the caller's client, which only the budget
// ends, as it ends any answer under way.
func (e *errand) await(waits context.Context) (*coalesce.Result, Verdict) {
	select {
	case <-e.done:
		return e.result()
	case <-waits.Done():
	}
	if e.sp.abandon(e.leave) {
		return nil, ContextRefusal(waits.Err()) // the errand is the trip's now
	}
	if d, ok := waits.Deadline(); ok {
		cut := time.AfterFunc(time.Until(d), e.cancel)
		defer cut.Stop()
	}
	<-e.done
	return e.result()
}

// leave is what a caller who abandons the trip leaves it with, under the
// spool's owner lock (before run can see that it was abandoned): the end of
// its patience, a stop of the guard, and the followers of a shared trip,
// who keep waiting for its answer.
func (e *errand) leave() {
	g := e.g
	g.trips.kept.Add(1)
	e.finish = coalesce.Hand(e.r.Context())
	e.patience = time.AfterFunc(patience, func() {
		g.trips.givenUp.Add(1)
		e.cancel()
	})
	e.stopped = context.AfterFunc(g.stopping, e.cancel)
}

// result is the errand's answer, for the caller who waited for it, which
// gives the errand back to be used again (errands); a panic of the trip's
// goes on in the caller's goroutine (an answer that broke off while it
// streamed to the client is net/http's http.ErrAbortHandler).
func (e *errand) result() (*coalesce.Result, Verdict) {
	e.sp.handOn() // the trip is done, and the caller waited for it
	res, v, p := e.res, e.v, e.panic
	*e = errand{done: e.done}
	errands.Put(e)
	if p != nil {
		panic(p)
	}
	return res, v
}

// run is the trip's goroutine: it answers the request into the spool, keeps
// a whole answer in the micro-cache where its endpoint has one, and gives the
// request's places back. Abandoned, it then hands the answer to the callers
// who joined the trip and frees the spool.
func (e *errand) run() {
	g, t, sp := e.g, e.t, e.sp
	sent := time.Now()
	func() {
		defer func() {
			if p := recover(); p != nil {
				e.res, e.v, e.panic = nil, BadGateway(ErrBrokeOff), p
			}
		}()
		e.res, e.v = g.answer(sp, e.r, t)
	}()
	if sp.status != 0 {
		g.answerTime(t.Station.Name).add(time.Since(sent), sent)
	}
	g.store(t.Share, t.Station, e.res) // a copy: the answer's buffer stays the spool's
	e.permits.Release()
	g.unplace(t.Caller)
	e.cancel()
	if !sp.end() {
		e.done <- struct{}{} // the caller's now, which may use it again at once
		return
	}
	// Nobody waits for this answer: it is the trip's to finish.
	if e.patience.Stop() {
		g.trips.answered.Add(1)
	}
	e.stopped()
	g.trips.kept.Add(-1)
	if e.panic != nil && e.panic != http.ErrAbortHandler {
		g.logger.Error("backend trip failed", zap.String("endpoint", t.Station.Name), zap.Any("panic", e.panic))
	}
	if e.finish != nil {
		e.finish(e.res)
		if e.res != nil && e.res.Followers > 0 {
			sp.keep()
		}
	}
	sp.free()
	e.done <- struct{}{}
}

// uncovered is why a request should not be sent (its 504, ContextRefusal):
// its caller has left, or its budget ends before the quickest answer the
// backend gave the station lately could come (answerTimes), when the
// caller would get its 504 and the backend work for nobody, with a slot
// taken meanwhile; nil: it may go.
func (g *Guard) uncovered(ctx context.Context, st *Station) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	now := time.Now()
	if d.Sub(now) < g.answerTime(st.Name).floor(now) {
		g.trips.unsent.Add(1)
		return errBudgetShort
	}
	return nil
}

// answerTime is the record of how long the backend took to answer the
// station.
func (g *Guard) answerTime(station string) *answerTimes {
	if a, ok := g.times.Load(station); ok {
		return a.(*answerTimes)
	}
	a, _ := g.times.LoadOrStore(station, new(answerTimes))
	return a.(*answerTimes)
}

// answerTimes is how long the backend took for a station's last answers:
// their quickest, of those not older than answerMemory, is the least a
// request of the station waits for its answer.
type answerTimes struct {
	mu   sync.Mutex
	next int
	last [8]struct {
		took time.Duration
		at   time.Time
	}
}

// answerMemory is how long an answer's time counts: the backend's pace
// changes (players join, the game lags), and a station whose requests are
// all refused for their budget sends one again once its slow answers are
// forgotten.
const answerMemory = time.Minute

func (a *answerTimes) add(took time.Duration, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last[a.next].took, a.last[a.next].at = took, at
	a.next = (a.next + 1) % len(a.last)
}

// floor is the quickest recent answer's time; 0 when none is recent.
func (a *answerTimes) floor(now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var least time.Duration
	found := false
	for _, s := range a.last {
		if s.at.IsZero() || now.Sub(s.at) > answerMemory {
			continue
		}
		if !found || s.took < least {
			least, found = s.took, true
		}
	}
	return least
}
