package guard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
	"github.com/statusgate/statusgate/internal/fixture"
)

// own asks g for the answer of the gateway's own shared as share, made by
// makeIt, for an anonymous caller; it returns the verdict and what the
// client got.
func own(g *Guard, share string, makeIt func(context.Context) (*coalesce.Result, time.Duration)) (Verdict, string) {
	rec := httptest.NewRecorder()
	return ownTo(rec, g, anonymous, share, makeIt), rec.Body.String()
}

// ownTo is own for who, its answer written to w.
func ownTo(w http.ResponseWriter, g *Guard, who Caller, share string, makeIt func(context.Context) (*coalesce.Result, time.Duration)) Verdict {
	r := httptest.NewRequest(http.MethodGet, "/api/v1/network", nil)
	return g.Own(progress.New(w, 0), r, &Ticket{Station: status(0), Caller: who, Share: share}, makeIt)
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
// for its time (not charged to the held bytes: it is small), served while made
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
	if held := g.counts().Held; held != 0 {
		t.Errorf("%d bytes held with an answer of %d bytes kept, want none: answers of up to hold.Small are not charged", held, len(`{"making":1}`))
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

// stalledReader is a stalledWriter that says when it is first written to:
// its answer's claim on the held bytes is taken by then.
type stalledReader struct {
	stalledWriter
	once    sync.Once
	writing chan struct{} // closed at the first Write
}

func newStalledReader() *stalledReader {
	return &stalledReader{stalledWriter: stalledWriter{header: http.Header{}, taking: make(chan struct{})}, writing: make(chan struct{})}
}

func (w *stalledReader) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.writing) })
	return w.stalledWriter.Write(p)
}

// TestOwnKeptChargedOnce: a kept answer of the gateway's own over
// hold.Small is charged to the held bytes once, in the pool of its class,
// however many callers read it: a caller that takes nothing holds it lent,
// which adds nothing to the total or the pool while it is kept (as a live
// topic's event, hold.Budget.Keep). When the handler leaves, its bytes stay
// counted while the caller still holds them, and are given back once it
// has taken them.
func TestOwnKeptChargedOnce(t *testing.T) {
	for _, who := range []Caller{anonymous, keyed} {
		t.Run(who.Holder, func(t *testing.T) {
			g, _ := join(t, forms[0], newGameServer(t, false), Limits{CacheSize: 1 << 20})
			const share = "network main class 0"
			var makings atomic.Int32
			makeIt := func(context.Context) (*coalesce.Result, time.Duration) {
				i := makings.Add(1)
				body := fmt.Appendf(nil, `{"making":%d,"pad":"%s"}`, i, strings.Repeat("x", 2*hold.Small))
				return &coalesce.Result{Status: http.StatusOK, Header: http.Header{}, Body: body}, time.Minute
			}
			// held is what the held bytes count, and of them the anonymous
			// pool, for an answer of n bytes charged once in who's class.
			want := func(n int64) [2]int64 {
				if who.Keyed {
					return [2]int64{n, 0}
				}
				return [2]int64{n, n}
			}
			held := func() [2]int64 { return [2]int64{g.held.Held(), g.held.Anonymous()} }

			if v := ownTo(httptest.NewRecorder(), g, who, share, makeIt); v.Status != 0 {
				t.Fatalf("the first caller: %+v", v)
			}
			slot, _ := g.own.kept.Load(share)
			a := slot.(*ownSlot).answer.Load()
			if a == nil {
				t.Fatal("the answer was not kept")
			}
			size := int64(len(a.res.Body))
			if got := held(); got != want(size) {
				t.Errorf("the answer of %d bytes kept: held and anonymous %v, want %v", size, got, want(size))
			}

			w := newStalledReader()
			done := make(chan Verdict, 1)
			go func() { done <- ownTo(w, g, who, share, makeIt) }()
			fixture.Recv(t, w.writing, "the kept answer written to a client that takes nothing")
			if got := held(); got != want(size) {
				t.Errorf("the answer of %d bytes kept and read by a client that takes nothing: held and anonymous %v, want %v (once)", size, got, want(size))
			}

			g.Leave()
			if got := held(); got != want(size) {
				t.Errorf("the handler left, its client still holding the answer of %d bytes: held and anonymous %v, want %v", size, got, want(size))
			}
			close(w.taking)
			if v := fixture.Recv(t, done, "the stalled client's answer"); v.Outcome != metrics.Cached {
				t.Errorf("the stalled client: %+v, want the kept answer", v)
			}
			if got := held(); got != [2]int64{} || makings.Load() != 1 {
				t.Errorf("the client done, the handler gone: held and anonymous %v after %d makings, want none after 1", got, makings.Load())
			}
		})
	}
}

// TestOwnSmallKeptNotCharged: a kept answer of the gateway's own of up to
// hold.Small is not charged to the held bytes, kept or read, as no answer
// of up to 16 KiB is; it is still kept and served to the next caller.
func TestOwnSmallKeptNotCharged(t *testing.T) {
	g, _ := join(t, forms[0], newGameServer(t, false), Limits{CacheSize: 1 << 20})
	const share = "network main class 0"
	var makings atomic.Int32
	makeIt := func(context.Context) (*coalesce.Result, time.Duration) {
		makings.Add(1)
		return &coalesce.Result{Status: http.StatusOK, Header: http.Header{}, Body: []byte(strings.Repeat("x", hold.Small))}, time.Minute
	}
	if v, body := own(g, share, makeIt); v.Status != 0 || len(body) != hold.Small {
		t.Fatalf("the first caller: %+v, %d bytes", v, len(body))
	}
	if held, anon := g.held.Held(), g.held.Anonymous(); held != 0 || anon != 0 {
		t.Errorf("an answer of %d bytes kept: %d bytes held, %d anonymous; want none", hold.Small, held, anon)
	}
	w := newStalledReader()
	done := make(chan Verdict, 1)
	go func() { done <- ownTo(w, g, anonymous, share, makeIt) }()
	fixture.Recv(t, w.writing, "the kept answer written to a client that takes nothing")
	if held := g.held.Held(); held != 0 {
		t.Errorf("an answer of %d bytes kept and read by a client that takes nothing: %d bytes held, want none", hold.Small, held)
	}
	close(w.taking)
	if v := fixture.Recv(t, done, "the stalled client's answer"); v.Outcome != metrics.Cached || makings.Load() != 1 {
		t.Errorf("the second caller: %+v after %d makings, want the kept answer", v, makings.Load())
	}
}

// TestOwnRemakingEnds: an answer made anew in the background is given up
// at the guard's request budget, as a stale entry's refresh is: a making
// that hangs (a member's backend that never answers, under a guard with
// no budget of its own) would otherwise hold its remaking, and the callers
// past the grace who join it, for ever.
func TestOwnRemakingEnds(t *testing.T) {
	g, _ := join(t, forms[0], newGameServer(t, false), Limits{CacheSize: 1 << 20, Timeout: 50 * time.Millisecond})
	clk := fixture.NewClock()
	g.setClock(clk.Now)
	const share = "network main class 1"
	var n atomic.Int32
	hangs := func(ctx context.Context) (*coalesce.Result, time.Duration) {
		if n.Add(1) > 1 {
			<-ctx.Done() // the member's trip that never comes back
			return nil, 0
		}
		return &coalesce.Result{Status: http.StatusOK, Header: http.Header{}, Body: []byte(`{"making":1}`)}, time.Second
	}
	if v, _ := own(g, share, hangs); v.Status != 0 {
		t.Fatalf("the first making: %+v", v)
	}
	clk.Advance(1500 * time.Millisecond) // past its time, within the grace
	if v, body := own(g, share, hangs); v.Outcome != metrics.Cached || body != `{"making":1}` {
		t.Fatalf("past its time: %+v %s, want the kept answer", v, body)
	}
	slot, _ := g.own.kept.Load(share)
	fixture.WaitFor(t, "the remaking to start and be given up", func() bool { return n.Load() == 2 && !slot.(*ownSlot).remaking.Load() })
}
