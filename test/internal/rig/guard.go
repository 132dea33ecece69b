package rig

import (
	"cmp"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
)

// GatedBackend holds each request at the backend until the test releases
// it, and counts how many it holds.
type GatedBackend struct {
	*Backend
	InFlight, Peak atomic.Int32
	// marked is set from the point the test marks (mark); worst is the
	// most requests at the backend that an arrival after it found, itself
	// included.
	marked  atomic.Bool
	Worst   atomic.Int32
	Entered chan string   // each request's URI as it arrives
	release chan struct{} // one token lets one request answer
	once    sync.Once
	// Metrics is the URL queued reads the guard's queue from; "": the
	// admin API's /metrics.
	Metrics string
}

func NewGatedBackend(t *testing.T) *GatedBackend {
	g := &GatedBackend{Entered: make(chan string, 256), release: make(chan struct{}, 256)}
	g.Backend = NewBackend(t)
	g.Backend.Respond = g.respond
	t.Cleanup(g.Open)
	return g
}

func (g *GatedBackend) respond(u *url.URL) (int, []byte) {
	n := g.InFlight.Add(1)
	raise(&g.Peak, n)
	if g.marked.Load() {
		raise(&g.Worst, n)
	}
	g.Entered <- u.RequestURI()
	<-g.release
	g.InFlight.Add(-1)
	return BackendResponse(u)
}

// raise sets v to n if n is more.
func raise(v *atomic.Int32, n int32) {
	for old := v.Load(); n > old && !v.CompareAndSwap(old, n); old = v.Load() {
	}
}

// Mark starts counting worst.
func (g *GatedBackend) Mark() { g.marked.Store(true) }

// Let answers n held requests.
func (g *GatedBackend) Let(n int) {
	for range n {
		g.release <- struct{}{}
	}
}

// Open answers every request from now on.
func (g *GatedBackend) Open() { g.once.Do(func() { close(g.release) }) }

// Await waits for n requests to arrive.
func (g *GatedBackend) Await(t *testing.T, n int) {
	t.Helper()
	for range n {
		fixture.Recv(t, g.Entered, "a request at the backend")
	}
}

// down waits until at most n requests are at the backend.
func (g *GatedBackend) down(t *testing.T, n int32) {
	t.Helper()
	fixture.WaitFor(t, fmt.Sprintf("%d requests at the backend", n), func() bool { return g.InFlight.Load() <= n })
}

// Queued waits until the keyed callers waiting in the guard's queue and
// the requests at the backend add up to n: every caller sent so far is in
// one place or the other.
func (g *GatedBackend) Queued(t *testing.T, n int) {
	t.Helper()
	fixture.WaitFor(t, fmt.Sprintf("%d callers queued or at the backend", n), func() bool {
		got, _ := ScrapeURL(t, cmp.Or(g.Metrics, AdminURL+"/metrics"))
		return int(got[`caddy_http_statusgate_backend_requests_queued{class="keyed",guard=""}`])+int(g.InFlight.Load()) == n
	})
}

// ReloadUnderFullGuard loads the first config (load(true)), in front of be
// with max_in_flight 2 and a long queue; fills the guard, 2 keyed callers
// at the backend and 4 in the queue; reloads (load(false)), which must keep
// the guard; adds 4 callers, who wait behind the old ones; and lets them all
// through one at a time: the backend never holds more than 2. what names
// what the reload changed, for the message.
func ReloadUnderFullGuard(t *testing.T, be *GatedBackend, what string, load func(first bool)) {
	t.Helper()
	load(true)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() { Send(t, "GET", "/api/v1/player/"+Alex+"?old="+strconv.Itoa(i), WithKey(KeyA)) })
	}
	be.Await(t, 2)
	be.Queued(t, 6)
	load(false)
	for i := range 4 {
		wg.Go(func() { Send(t, "GET", "/api/v1/player/"+Alex+"?new="+strconv.Itoa(i), WithKey(KeyA)) })
	}
	be.Queued(t, 10) // the new callers wait behind the old
	for range 8 {
		be.Let(1)
		be.Await(t, 1)
	}
	be.Open()
	wg.Wait()
	if p := be.Peak.Load(); p > 2 {
		t.Errorf("backend peak %d with max_in_flight 2 through a reload that changed %s", p, what)
	}
}
