package guard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
	"github.com/statusgate/statusgate/internal/fixture"
)

// own asks g for the answer of the gateway's own shared as share, made by
// makeIt, for an anonymous caller; it returns the verdict and what the
// client got.
func own(g *Guard, share string, makeIt func(context.Context) (*coalesce.Result, time.Duration)) (Verdict, string) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/api/v1/network", nil)
	v := g.Own(progress.New(rec, 0), r, &Ticket{Station: status(0), Caller: anonymous, Share: share}, makeIt)
	return v, rec.Body.String()
}

// making makes answers numbered by their making ({"making":n}), kept for
// ttl; the first waits until first is closed.
func making(n *atomic.Int32, first chan struct{}, ttl time.Duration) func(context.Context) (*coalesce.Result, time.Duration) {
	return func(context.Context) (*coalesce.Result, time.Duration) {
		i := n.Add(1)
		if i == 1 && first != nil {
			<-first
		}
		return &coalesce.Result{Status: http.StatusOK, Header: http.Header{}, Body: fmt.Appendf(nil, `{"making":%d}`, i)}, ttl
	}
}

// TestOwnMadeOnceAndKept: an answer the gateway makes on its own (a
// network's document) is made once for the callers that ask at once, kept
// for its time, charged to the held bytes while kept, served while made
// anew past it within the stale grace, made again past the grace, and given
// back when the handler leaves; a guard without a micro-cache keeps none.
func TestOwnMadeOnceAndKept(t *testing.T) {
	g, _ := join(t, forms[0], newGameServer(t, false), Limits{CacheSize: 1 << 20})
	clk := fixture.NewClock()
	g.setClock(clk.Now)
	const share = "network main class 1"
	var makings atomic.Int32
	first := make(chan struct{})
	makeIt := making(&makings, first, time.Second)

	const callers = 4
	verdicts := make(chan Verdict, callers)
	for range callers {
		go func() { v, _ := own(g, share, makeIt); verdicts <- v }()
	}
	fixture.WaitFor(t, "three callers to follow the first one's making", func() bool { return g.own.makings.Stats().Waiting == callers-1 })
	close(first)
	coalesced := 0
	for range callers {
		v := fixture.Recv(t, verdicts, "a caller's answer")
		if v.Status != 0 {
			t.Errorf("a caller: %+v", v)
		}
		if v.Outcome == metrics.Coalesced {
			coalesced++
		}
	}
	if n := makings.Load(); n != 1 || coalesced != callers-1 {
		t.Errorf("%d callers at once: %d makings, %d coalesced", callers, n, coalesced)
	}
	if held := g.counts().Held; held != int64(len(`{"making":1}`)) {
		t.Errorf("%d bytes held with the answer kept, want its length", held)
	}
	if v, body := own(g, share, makeIt); v.Outcome != metrics.Cached || body != `{"making":1}` || makings.Load() != 1 {
		t.Errorf("within its time: %+v %s after %d makings, want the kept answer", v, body, makings.Load())
	}

	clk.Advance(1500 * time.Millisecond) // past its time, within the grace
	if v, body := own(g, share, makeIt); v.Outcome != metrics.Cached || body != `{"making":1}` {
		t.Errorf("past its time: %+v %s, want the kept answer at once", v, body)
	}
	slot, _ := g.own.kept.Load(share)
	fixture.WaitFor(t, "the answer made anew in the background", func() bool {
		a := slot.(*ownSlot).answer.Load()
		return a != nil && string(a.res.Body) == `{"making":2}` && !slot.(*ownSlot).remaking.Load()
	})
	if v, body := own(g, share, makeIt); v.Outcome != metrics.Cached || body != `{"making":2}` {
		t.Errorf("once made anew: %+v %s", v, body)
	}
	clk.Advance(time.Second + StaleGrace) // past the grace
	if v, body := own(g, share, makeIt); v.Outcome == metrics.Cached || body != `{"making":3}` {
		t.Errorf("past the grace: %+v %s, want it made for the caller", v, body)
	}
	g.Leave()
	if held := g.counts().Held; held != 0 {
		t.Errorf("%d bytes held after the handler left", held)
	}

	uncached, _ := join(t, form{"no micro-cache", true}, newGameServer(t, false), Limits{})
	var n atomic.Int32
	for range 2 {
		own(uncached, share, making(&n, nil, time.Minute))
	}
	if n.Load() != 2 || uncached.counts().Held != 0 {
		t.Errorf("without a micro-cache: %d makings, %d bytes held; want 2 and none kept", n.Load(), uncached.counts().Held)
	}
}
