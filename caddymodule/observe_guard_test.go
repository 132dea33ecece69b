package caddymodule

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/internal/fixture"
)

// TestGuardMetrics drives a guard through ServeHTTP and reads what its units
// counted from the config's registry: a cached endpoint's miss and hits, a
// trip that two followers shared, the slot it held meanwhile. A second
// handler of the same config sharing the guard does not double the counts,
// and the next config's registry carries them on.
func TestGuardMetrics(t *testing.T) {
	const block = "statusgate {\n\tkey " + testKey + "\n\tguard observed\n}"
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	h := provisionIn(t, ctx, block)
	series := func(family, labels string) string {
		return fmt.Sprintf(`caddy_http_statusgate_%s{guard="observed"%s}`, family, labels)
	}

	be := &counter{body: `{"ok":true,"data":{"online":[]},"meta":{"authenticated":true}}`}
	for range 3 {
		serve(t, h, be, "GET", "/api/v1/status", nil) // cached: 1s by default
	}

	const player = "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df"
	slow := &counter{body: playerBody, entered: make(chan struct{}, 4), release: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() { serve(t, h, slow, "GET", player, nil) })
	<-slow.entered
	for range 2 {
		wg.Go(func() { serve(t, h, slow, "GET", player, nil) })
	}
	var during map[string]float64
	fixture.WaitFor(t, "the followers to join the leader's trip", func() bool {
		during = scrapeStatusgate(t, ctx.GetMetricsRegistry())
		return during[series("coalesce_waiting", "")] == 2
	})
	for k, v := range map[string]float64{
		series("backend_requests_in_flight", ""): 1,
		series("coalesce_in_flight", ""):         1,
	} {
		if during[k] != v {
			t.Errorf("during the trip: %s = %v, want %v", k, during[k], v)
		}
	}
	close(slow.release)
	wg.Wait()
	if slow.n() != 1 {
		t.Fatalf("the backend saw %d player requests, want 1", slow.n())
	}

	// Only the cached endpoint looks in the cache: status's first miss and
	// two hits; player, which is not cached, never looks.
	want := map[string]float64{
		series("cache_lookups_total", `,result="hit"`):                                      2,
		series("cache_lookups_total", `,result="stale"`):                                    0,
		series("cache_lookups_total", `,result="miss"`):                                     1,
		series("cache_evictions_total", ""):                                                 0,
		series("cache_entries", ""):                                                         1,
		series("cache_bytes", ""):                                                           float64(units(h).Cache.Stats().Bytes),
		series("coalesce_requests_total", `,role="led"`):                                    2,
		series("coalesce_requests_total", `,role="shared"`):                                 2,
		series("coalesce_requests_total", `,role="alone"`):                                  0,
		series("coalesce_requests_total", `,role="abandoned"`):                              0,
		series("coalesce_unshared_total", `,reason="released"`):                             0,
		series("coalesce_unshared_total", `,reason="unshareable"`):                          0,
		series("coalesce_in_flight", ""):                                                    0,
		series("coalesce_waiting", ""):                                                      0,
		series("backend_requests_in_flight", ""):                                            0,
		series("held_bytes", ""):                                                            0,
		`caddy_http_statusgate_backend_requests_queued{class="anonymous",guard="observed"}`: 0,
		`caddy_http_statusgate_backend_requests_queued{class="keyed",guard="observed"}`:     0,
	}
	check := func(what string, reg map[string]float64) {
		t.Helper()
		for k, v := range want {
			if g, ok := reg[k]; !ok || g != v {
				t.Errorf("%s: %s = %v (present %v), want %v", what, k, g, ok, v)
			}
		}
	}
	check("after", scrapeStatusgate(t, ctx.GetMetricsRegistry()))
	if want[series("cache_bytes", "")] == 0 {
		t.Error("the cache holds no bytes")
	}

	// A second handler of the config, in front of the same guard.
	provisionIn(t, ctx, block)
	check("two handlers, one guard", scrapeStatusgate(t, ctx.GetMetricsRegistry()))

	// A reload that keeps the guard: the new registry reads it as it is.
	ctx2, cancel2 := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel2()
	h2 := provisionIn(t, ctx2, block)
	if !sameGuard(h2.guard, h.guard) {
		t.Fatal("the reload did not keep the guard")
	}
	serve(t, h2, be, "GET", "/api/v1/status", nil)
	want[series("cache_lookups_total", `,result="hit"`)]++
	check("reloaded", scrapeStatusgate(t, ctx2.GetMetricsRegistry()))
}
