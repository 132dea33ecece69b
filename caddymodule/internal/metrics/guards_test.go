package metrics

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/live"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
	"github.com/statusgate/statusgate/internal/fixture"
)

// busyGuard is a guard with every unit, caught in the middle of its work:
// one request at the backend and one (anonymous) waiting for it, 20 KiB
// held for a client, a cache entry found once fresh and once missed, a
// coalesced trip whose answer, a 503, was not shared, and a trip under way
// with one follower waiting for it, and a live topic keeping an answer of
// 10 bytes. The waiters leave when the test ends.
func busyGuard(t *testing.T, name string) Guard {
	t.Helper()
	g := Guard{
		Name:    name,
		All:     admission.New(admission.Config{Limit: 1, Queue: 4, Wait: time.Minute}),
		Main:    admission.New(admission.Config{Limit: 1, Queue: 1, Wait: time.Minute}),
		Flights: coalesce.New(coalesce.Config{}),
		Cache:   microcache.New(microcache.Config{}),
		Held:    hold.New(1<<20, 1<<19, 1<<19),
		Topics:  live.NewMeter(noBound{}),
		Trips:   someTrips{},
	}
	hub := live.New(nil, nil, g.Topics)
	t.Cleanup(hub.Close)
	idle := func() live.Fetch {
		return func(ctx context.Context, _ any) ([]byte, time.Duration, bool) { <-ctx.Done(); return nil, 0, false }
	}
	if _, err := hub.Subscribe("topic", live.Viewer{Answer: []byte("0123456789"), Next: time.Hour}, idle); err != nil {
		t.Fatal(err)
	}
	p, err := admission.AcquireAll(context.Background(), admission.Keyed, g.All)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		_, _ = admission.AcquireAll(ctx, admission.Anonymous, g.All)
	}()
	t.Cleanup(func() { cancel(); <-waited; p.Release() })
	fixture.WaitFor(t, "the waiter", func() bool { return g.All.Stats().QueuedAnonymous == 1 })

	if _, err := g.Held.Hold("client", hold.Share{}, make([]byte, 20<<10)); err != nil {
		t.Fatal(err)
	}
	g.Cache.Put("k", microcache.Entry{Status: 200, Body: []byte("{}")}, time.Minute)
	g.Cache.GetStale("k")
	g.Cache.GetStale("other")
	g.Flights.Do(context.Background(), "k", func(context.Context) *coalesce.Result {
		return &coalesce.Result{Status: http.StatusServiceUnavailable}
	})
	started, release := make(chan struct{}), make(chan struct{})
	var trip sync.WaitGroup
	trip.Go(func() {
		g.Flights.Do(context.Background(), "slow", func(context.Context) *coalesce.Result {
			close(started)
			<-release
			return &coalesce.Result{Status: http.StatusOK}
		})
	})
	<-started
	trip.Go(func() {
		g.Flights.Do(context.Background(), "slow", func(context.Context) *coalesce.Result { return nil })
	})
	t.Cleanup(func() { close(release); trip.Wait() })
	fixture.WaitFor(t, "the follower", func() bool { return g.Flights.Stats().Waiting == 1 })
	return g
}

// noBound is a live.Budget that takes everything.
type noBound struct{}

func (noBound) Keep(string, any, bool, *live.Event) (func(), bool) { return func() {}, true }

// guardSeries is the scrape of one busyGuard (times n, for guards that sum)
// under the guard label name.
func guardSeries(name string, n float64) map[string]float64 {
	s := func(family, labels string) string {
		return fmt.Sprintf(`caddy_http_statusgate_%s{guard=%q%s}`, family, name, labels)
	}
	queued := func(class string) string { // labels sort by name
		return fmt.Sprintf(`caddy_http_statusgate_backend_requests_queued{class=%q,guard=%q}`, class, name)
	}
	kept := func(end string) string {
		return fmt.Sprintf(`caddy_http_statusgate_backend_trips_kept_total{end=%q,guard=%q}`, end, name)
	}
	return map[string]float64{
		s("backend_requests_in_flight", ""):                   n,
		queued("anonymous"):                                   n,
		queued("keyed"):                                       0,
		s("held_bytes", ""):                                   n * (20 << 10),
		s("held_anonymous_bytes", ""):                         n * (20 << 10),
		s("topic_bytes", ""):                                  n * 10,
		s("cache_lookups_total", `,result="hit"`):             n,
		s("cache_lookups_total", `,result="stale"`):           0,
		s("cache_lookups_total", `,result="miss"`):            n,
		s("cache_evictions_total", ""):                        0,
		s("cache_entries", ""):                                n,
		s("cache_bytes", ""):                                  n * (256 + 3), // the entry overhead, the key and the body
		s("coalesce_requests_total", `,role="led"`):           2 * n,
		s("coalesce_requests_total", `,role="shared"`):        0,
		s("coalesce_requests_total", `,role="alone"`):         0,
		s("coalesce_requests_total", `,role="abandoned"`):     0,
		s("coalesce_unshared_total", `,reason="released"`):    0,
		s("coalesce_unshared_total", `,reason="unshareable"`): n,
		s("coalesce_in_flight", ""):                           n,
		s("coalesce_waiting", ""):                             n,
		s("backend_trips_kept", ""):                           n,
		kept("answered"):                                      2 * n,
		kept("given_up"):                                      n,
		s("backend_requests_unsent_total", ""):                3 * n,
	}
}

// guardOnly is the scrape of reg without the series the handlers count.
func guardOnly(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	got := scrape(t, reg)
	for k := range got {
		if !strings.Contains(k, "guard=") {
			delete(got, k)
		}
	}
	return got
}

// The guard's own counters, read when scraped, exactly; the names pass
// promlint.
func TestGuardSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	exportGuard(t, register(t, reg), busyGuard(t, ""))
	checkSeries(t, guardOnly(t, reg), guardSeries("", 1), nil)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// A guard's switched-off units have no series: here everything but the
// micro-cache and the held bytes, which every guard has.
func TestGuardUnitsOff(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	g := Guard{Name: "lean", Cache: microcache.New(microcache.Config{}), Held: hold.New(1<<20, 1<<19, 1<<19)}
	exportGuard(t, register(t, reg), g)
	want := map[string]float64{}
	for k := range guardSeries("lean", 0) {
		if strings.Contains(k, "_cache_") || strings.Contains(k, "_held_") {
			want[k] = 0
		}
	}
	checkSeries(t, guardOnly(t, reg), want, nil)
}

// The handlers of one config share its registry. Two that share a guard
// export it once; handlers with guards of their own sum under the empty
// name; a named guard has series of its own. The next config's registry
// reads the guards it keeps as they are: their counts go on, not from zero,
// and are not added to the old registry's.
func TestGuardsOfOneLoad(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	shared, own, named := busyGuard(t, ""), busyGuard(t, ""), busyGuard(t, "mc")
	load := register(t, reg)
	for _, g := range []Guard{shared, shared, own, named, named} {
		exportGuard(t, load, g)
	}
	want := guardSeries("", 2)
	for k, v := range guardSeries("mc", 1) {
		want[k] = v
	}
	checkSeries(t, guardOnly(t, reg), want, nil)

	reloaded := prometheus.NewPedanticRegistry()
	exportGuard(t, register(t, reloaded), named)
	named.Cache.GetStale("k")
	want = guardSeries("mc", 1)
	want[`caddy_http_statusgate_cache_lookups_total{guard="mc",result="hit"}`] = 2
	checkSeries(t, guardOnly(t, reloaded), want, nil)
}

// exportGuard makes a handler's metrics in the load's collectors c,
// exporting g.
func exportGuard(t *testing.T, c *Collectors, g Guard) {
	t.Helper()
	m, err := c.New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	m.ExportGuard(g)
}

// TestDocumented: every family a config exports has its row in
// docs/observability.md, and every family the page names exists.
func TestDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	// The game's metrics are internal/gamemetrics's, checked there.
	doc, _, _ = bytes.Cut(doc, []byte("\n## The game's metrics"))
	reg := prometheus.NewPedanticRegistry()
	m, err := register(t, reg).New(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	m.ExportGuard(busyGuard(t, ""))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.GetName()] = true
		if !bytes.Contains(doc, []byte("| `"+f.GetName()+"` |")) {
			t.Errorf("%s has no row in docs/observability.md", f.GetName())
		}
	}
	for _, name := range regexp.MustCompile("`(caddy_http_statusgate_[a-z_]+)`").FindAllSubmatch(doc, -1) {
		if !exported[string(name[1])] {
			t.Errorf("docs/observability.md names %s, which no config exports", name[1])
		}
	}
}

// TestGuardExportedOnce: two handlers in front of one guard that use
// different units of it (one coalesces, the other not) export it once,
// with both units: its requests at the backend are not counted twice.
func TestGuardExportedOnce(t *testing.T) {
	m, err := register(t, prometheus.NewRegistry()).New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	all := admission.New(admission.Config{Limit: 4})
	held := hold.New(1<<20, 1<<19, 1<<19)
	flights := coalesce.New(coalesce.Config{})
	m.ExportGuard(Guard{All: all, Held: held})
	m.ExportGuard(Guard{All: all, Held: held, Flights: flights})
	if n := len(m.guards.guards); n != 1 || m.guards.guards[0].Flights != flights {
		t.Fatalf("one guard exported as %d, %+v", n, m.guards.guards)
	}
}
