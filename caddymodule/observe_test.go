package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
)

const (
	botSecret = "bot-secret-0123456789abcdef"
	webSecret = "web-secret-0123456789abcdef"
)

// TestWhoAndWhat sends one request of every outcome and checks the
// placeholders each one leaves (and those the next handler saw), then the
// exact metrics of the whole mix.
func TestWhoAndWhat(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	h := provisionIn(t, ctx, "statusgate {\n\tkey discord-bot "+botSecret+"\n\tkey "+apikey.Digest(webSecret)+"\n\tenable custom/votes\n}")
	ok := &backend{body: `{"ok":true,"data":{},"meta":{"authenticated":true}}`}
	player := &backend{body: playerBody}
	down := &backend{err: caddyhttp.Error(http.StatusBadGateway, errors.New("refused"))}
	limited := &backend{err: caddyhttp.Error(http.StatusTooManyRequests, nil)}
	const ip = "192.0.2.1"
	tests := []struct {
		method, target string
		header         http.Header
		be             *backend
		status         int
		endpoint, key  string
		client         string
		outcome        metrics.Outcome
		forwarded      bool
	}{
		{"GET", "/api/v1/status", nil, ok, 200, "status", "", ip, metrics.Filtered, true},
		{"GET", "/api/v1/status", nil, ok, 200, "status", "", ip, metrics.Cached, false},
		{"GET", "/api/v1/status", keyHeader(botSecret), ok, 200, "status", "discord-bot", "discord-bot", metrics.Served, true},
		{"GET", "/api/v1/server", keyHeader(webSecret), ok, 200, "server", "key-2", "key-2", metrics.Served, true},
		{"HEAD", "/api/v1/custom/votes", keyHeader(webSecret), ok, 200, "custom/votes", "key-2", "key-2", metrics.Served, true},
		{"GET", "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df", nil, player, 200, "player", "", ip, metrics.Filtered, true},
		{"GET", "/api/v1/server", nil, ok, 404, "server", "", ip, metrics.Refused, false},
		{"GET", "/api/v1/server", keyHeader(apikey.Digest(webSecret)), ok, 404, "server", "", ip, metrics.Refused, false},
		{"GET", "/api/v1/nothing", keyHeader(botSecret), ok, 404, "", "", ip, metrics.NotFound, false},
		{"GET", "/", nil, ok, 404, "", "", ip, metrics.NotFound, false},
		{"OPTIONS", "/api/v1/server", nil, ok, 204, "", "", ip, metrics.Preflight, false},
		{"POST", "/api/v1/status", keyHeader(botSecret), ok, 405, "status", "discord-bot", "discord-bot", metrics.Method, false},
		{"GET", "/api/v1", nil, ok, 200, "index", "", ip, metrics.Index, false},
		{"GET", "/api/v1/server", keyHeader(webSecret), down, 502, "server", "key-2", "key-2", metrics.BackendError, true},
		{"GET", "/api/v1/server", keyHeader(webSecret), limited, 429, "server", "key-2", "key-2", metrics.RateLimited, true},
	}
	for _, tc := range tests {
		next := &seenBy{next: tc.be}
		got := serve(t, h, next, tc.method, tc.target, tc.header)
		what := tc.method + " " + tc.target
		if got.Code != tc.status {
			t.Errorf("%s: status %d, want %d", what, got.Code, tc.status)
		}
		want := map[string]string{
			placeholderEndpoint: tc.endpoint,
			placeholderKey:      tc.key,
			placeholderClient:   tc.client,
			placeholderOutcome:  tc.outcome.String(),
		}
		for p, v := range want {
			if g, _ := got.repl.GetString(p); g != v {
				t.Errorf("%s: {%s} = %q, want %q", what, p, g, v)
			}
		}
		switch {
		case tc.forwarded && next.seen == nil:
			t.Errorf("%s: not forwarded", what)
		case !tc.forwarded && next.seen != nil:
			t.Errorf("%s: forwarded", what)
		case tc.forwarded:
			// Who called what is known before next runs; the outcome is not.
			delete(want, placeholderOutcome)
			for p, v := range want {
				if next.seen[p] != v {
					t.Errorf("%s: next saw {%s} = %q, want %q", what, p, next.seen[p], v)
				}
			}
			if _, set := next.seen[placeholderOutcome]; set {
				t.Errorf("%s: next saw an outcome before there was one", what)
			}
		}
	}

	req := func(ep string, o metrics.Outcome) string {
		return fmt.Sprintf(`caddy_http_statusgate_requests_total{endpoint=%q,outcome=%q,server=""}`, ep, o)
	}
	playerOut := len(serve(t, h, player, "GET", "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df", nil).Body.String())
	statusOut := len(serve(t, h, ok, "GET", "/api/v1/status", nil).Body.String())
	want := map[string]float64{
		req("status", metrics.Filtered):               1,
		req("status", metrics.Cached):                 2,
		req("server", metrics.RateLimited):            1,
		req("status", metrics.Served):                 1,
		req("status", metrics.Method):                 1,
		req("server", metrics.Served):                 1,
		req("server", metrics.Refused):                2,
		req("server", metrics.BackendError):           1,
		req("custom/votes", metrics.Served):           1,
		req("player", metrics.Filtered):               2,
		req("index", metrics.Index):                   1,
		req(metrics.OtherEndpoint, metrics.NotFound):  2,
		req(metrics.OtherEndpoint, metrics.Preflight): 1,
		// The key is looked up for every path, so /api/v1/nothing counts it too.
		`caddy_http_statusgate_key_requests_total{key="discord-bot"}`:                        3,
		`caddy_http_statusgate_key_requests_total{key="key-2"}`:                              4,
		`caddy_http_statusgate_unknown_key_requests_total`:                                   1,
		`caddy_http_statusgate_fields_removed_total{endpoint="player",field="op"}`:           2,
		`caddy_http_statusgate_fields_removed_total{endpoint="player",field="banned"}`:       2,
		`caddy_http_statusgate_fields_removed_total{endpoint="player",field="discord"}`:      2,
		`caddy_http_statusgate_fields_removed_total{endpoint="player",field="chatplatform"}`: 0,
		`caddy_http_statusgate_filter_in_bytes_total{endpoint="player"}`:                     float64(2 * len(playerBody)),
		`caddy_http_statusgate_filter_out_bytes_total{endpoint="player"}`:                    float64(2 * playerOut),
		`caddy_http_statusgate_filter_in_bytes_total{endpoint="status"}`:                     float64(len(ok.body)),
		`caddy_http_statusgate_filter_out_bytes_total{endpoint="status"}`:                    float64(statusOut), // the second from the cache
		`caddy_http_statusgate_backend_requests_in_flight{guard=""}`:                         0,
	}
	got := scrapeStatusgate(t, ctx.GetMetricsRegistry())
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	total := 0.0
	for k, v := range got {
		if strings.HasPrefix(k, "caddy_http_statusgate_requests_total{") {
			total += v
		}
		if strings.Contains(k, "secret") {
			t.Errorf("a series names a secret: %s", k)
		}
	}
	if total != float64(len(tests)+2) {
		t.Errorf("%v requests counted, want %d", total, len(tests)+2)
	}
	// Disabled endpoints have no series; enabled ones have every outcome.
	if _, ok := got[req("whitelist", metrics.Served)]; ok {
		t.Error("the disabled whitelist endpoint has series")
	}
	if _, ok := got[req("bans", metrics.Method)]; !ok {
		t.Error("the enabled bans endpoint lacks its series")
	}
}

// TestReloadMetrics provisions the same config twice in one context, as two
// statusgate handlers of one config are, and again in a new context, as
// after a reload: no error and no panic, and each registry counts its own.
func TestReloadMetrics(t *testing.T) {
	provision := func(ctx caddy.Context) *Handler {
		return provisionIn(t, ctx, "statusgate {\n\tkey bot "+botSecret+"\n}")
	}
	ctx1, cancel1 := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel1()
	a, b := provision(ctx1), provision(ctx1)
	ctx2, cancel2 := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel2()
	c := provision(ctx2)
	// server, which is not cached: the reloaded config shares the first's
	// guard, and with it the micro-cache.
	for _, h := range []*Handler{a, b, c} {
		serve(t, h, &backend{body: `{}`}, "GET", "/api/v1/server", keyHeader(botSecret))
	}
	const served = `caddy_http_statusgate_requests_total{endpoint="server",outcome="served",server=""}`
	if got := scrapeStatusgate(t, ctx1.GetMetricsRegistry())[served]; got != 2 {
		t.Errorf("first config: %v served, want 2", got)
	}
	if got := scrapeStatusgate(t, ctx2.GetMetricsRegistry())[served]; got != 1 {
		t.Errorf("reloaded config: %v served, want 1", got)
	}
}

// TestRequestPathAllocations guards the cost of what this change adds to
// every request: the key lookup, the placeholders and the metrics allocate
// nothing once the replacer holds its entries.
func TestRequestPathAllocations(t *testing.T) {
	h, _ := newTestHandler(t, "key bot "+botSecret)
	r, repl := newRequest("GET", "/api/v1/server")
	r.Header.Set("X-Api-Key", botSecret)
	ep := h.table.lookup("server")
	w := httptest.NewRecorder()
	served := func(key int) {
		x := &exchange{w: w, r: r, repl: repl, ep: ep, who: h.callerFor(key, ep)}
		x.finish(guard.Verdict{Outcome: metrics.Served})
		h.conclude(x)
	}
	// Warm the replacer's map so that only steady-state costs are measured.
	served(0)
	allocs := testing.AllocsPerRun(200, func() {
		served(h.authenticate(r))
	})
	if allocs != 0 {
		t.Errorf("key lookup, placeholders and metrics allocate %.1f times a request", allocs)
	}
}

// BenchmarkObserve measures what placeholders and metrics add to a keyed
// pass-through: the four placeholders and the counters, on a fresh
// replacer as Caddy makes one per request. "replacer" is that replacer
// alone, to subtract.
func BenchmarkObserve(b *testing.B) {
	h := new(Handler)
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("statusgate {\n\tkey bot " + botSecret + "\n}")); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := h.provisionWith(ctx, zap.NewNop()); err != nil {
		b.Fatal(err)
	}
	defer h.Cleanup()
	r, _ := newRequest("GET", "/api/v1/status")
	ep := h.table.lookup("status")
	b.Run("replacer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = caddy.NewReplacer()
		}
	})
	b.Run("replacer+observe", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			repl := caddy.NewReplacer()
			identify(repl, r, ep, h.callerFor(0, ep))
			h.metrics.KeyUsed(0)
			settle(repl, ep, h.metrics, metrics.Served)
		}
	})
}
