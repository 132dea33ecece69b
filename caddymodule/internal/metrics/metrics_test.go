package metrics

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddyserver/caddy/v2"

	scrapepkg "github.com/statusgate/statusgate/internal/scrape"
)

// scrape gathers reg's statusgate series.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got, err := scrapepkg.Series(families, "caddy_http_statusgate_")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func req(endpoint string, o Outcome) string {
	return fmt.Sprintf(`caddy_http_statusgate_requests_total{endpoint=%q,outcome=%q,server=""}`, endpoint, o)
}

// checkSeries compares the scrape with want: the same series, and the same
// values for those in want; series listed in zero must be present and 0.
func checkSeries(t *testing.T, got map[string]float64, want map[string]float64, zero []string) {
	t.Helper()
	for _, k := range zero {
		if _, dup := want[k]; !dup {
			want[k] = 0
		}
	}
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("missing series %s", k)
		} else if g != v {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s = %v", k, v)
		}
	}
}

func TestOutcomes(t *testing.T) {
	want := []string{"served", "filtered", "index", "not_found", "refused", "method", "preflight", "backend_error",
		"busy", "rate_limited", "cached", "coalesced", "bad_request", "client_gone", "streamed", "stream_cut"}
	var got []string
	for _, o := range Outcomes() {
		got = append(got, o.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("outcomes %q,\nwant %q", got, want)
	}
	if s := Outcome(len(want)).String(); s != "" {
		t.Errorf("Outcome(%d).String() = %q", len(want), s)
	}
}

var testConfig = Config{
	Endpoints: []string{"status", "player", "custom/votes"},
	Fields:    map[string][]string{"player": {"op", "banned", "op"}},
	Keys:      []string{"discord-bot", "website"},
}

// A scripted mix of requests, and the exact scrape it gives: every series
// pre-created at zero, the counted ones at their counts, nothing else.
func TestScrapeExact(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := register(t, reg).New(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	status, player, votes, other := m.Endpoint("status"), m.Endpoint("player"), m.Endpoint("custom/votes"), m.Other()
	for range 3 {
		status.Count(Served)
	}
	status.Count(Filtered)
	status.Count(Filtered)
	status.Count(BackendError)
	player.Count(Filtered)
	player.FieldsRemoved([]string{"op", "discord"}) // discord is not configured: not counted
	player.FieldsRemoved([]string{"banned", "op"})
	player.FilterBytes(1000, 900)
	player.FilterBytes(24, 0)
	player.FilterBytes(-5, -1) // nonsense: not counted, no panic
	votes.Count(Refused)
	votes.Count(Outcome(200)) // not an outcome: not counted
	other.Count(NotFound)
	other.Count(NotFound)
	other.Count(Preflight)
	other.FilterBytes(7, 7) // nothing is exported for _other but its requests
	m.KeyUsed(0)
	m.KeyUsed(0)
	m.KeyUsed(1)
	m.KeyUsed(2)  // out of range: not counted
	m.KeyUsed(-1) // ditto
	m.KeyRefused(1)
	m.KeyRefused(5) // out of range: not counted
	m.UnknownKey()
	status.Count(Cached)
	player.Count(Coalesced)
	player.Count(Busy)
	votes.Count(RateLimited)
	status.StreamOpened()
	status.StreamOpened()
	status.StreamClosed()
	status.EventSent()
	status.ViewerCut()
	m.StreamRefused(StreamRefusedPerClient)
	m.StreamRefused("nonsense") // not a reason: not counted

	want := map[string]float64{
		req("status", Served):         3,
		req("status", Filtered):       2,
		req("status", BackendError):   1,
		req("player", Filtered):       1,
		req("custom/votes", Refused):  1,
		req(OtherEndpoint, NotFound):  2,
		req(OtherEndpoint, Preflight): 1,
		`caddy_http_statusgate_fields_removed_total{endpoint="player",field="op"}`:     2,
		`caddy_http_statusgate_fields_removed_total{endpoint="player",field="banned"}`: 1,
		`caddy_http_statusgate_filter_in_bytes_total{endpoint="player"}`:               1024,
		`caddy_http_statusgate_filter_out_bytes_total{endpoint="player"}`:              900,
		`caddy_http_statusgate_key_requests_total{key="discord-bot"}`:                  2,
		`caddy_http_statusgate_key_requests_total{key="website"}`:                      1,
		`caddy_http_statusgate_key_refused_total{key="website"}`:                       1,
		`caddy_http_statusgate_unknown_key_requests_total`:                             1,
		req("status", Cached):                                                          1,
		req("player", Coalesced):                                                       1,
		req("player", Busy):                                                            1,
		req("custom/votes", RateLimited):                                               1,
		`caddy_http_statusgate_streams_open{endpoint="status"}`:                        1,
		`caddy_http_statusgate_stream_events_total{endpoint="status"}`:                 1,
		`caddy_http_statusgate_stream_viewers_cut_total{endpoint="status"}`:            1,
		`caddy_http_statusgate_streams_refused_total{reason="max_streams_per_client"}`: 1,
	}
	var zero []string
	for _, ep := range []string{"status", "player", "custom/votes", OtherEndpoint} {
		for _, o := range Outcomes() {
			zero = append(zero, req(ep, o))
		}
	}
	for _, ep := range []string{"status", "player", "custom/votes"} {
		for _, name := range []string{"filter_in_bytes", "filter_out_bytes"} {
			zero = append(zero, fmt.Sprintf(`caddy_http_statusgate_%s_total{endpoint=%q}`, name, ep))
		}
	}
	zero = append(zero, `caddy_http_statusgate_key_refused_total{key="discord-bot"}`)
	for _, ep := range []string{"player", "custom/votes"} {
		for _, name := range []string{"streams_open", "stream_events_total", "stream_viewers_cut_total"} {
			zero = append(zero, fmt.Sprintf(`caddy_http_statusgate_%s{endpoint=%q}`, name, ep))
		}
	}
	for _, reason := range []string{StreamRefusedTotal, StreamRefusedHeld, StreamRefusedReload, StreamRefusedTopics} {
		zero = append(zero, fmt.Sprintf(`caddy_http_statusgate_streams_refused_total{reason=%q}`, reason))
	}
	checkSeries(t, scrape(t, reg), want, zero)
	// requests: 4 endpoints × 16 outcomes; fields: 2; filter bytes: 3 × 2;
	// keys: 2, and 2 of refusals; the unknown-key counter; live streams:
	// 3 endpoints × 3, and 5 reasons. No guard: no guard series.
	if n, want := len(scrape(t, reg)), 4*16+2+3*2+2+2+1+3*3+5; n != want {
		t.Errorf("%d series, want %d", n, want)
	}
}

// The exposition text of the smaller families, HELP and TYPE included, as a
// scrape of Caddy's metrics endpoint shows it.
func TestExposition(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := register(t, reg).New(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	m.KeyUsed(1)
	m.Endpoint("player").FieldsRemoved([]string{"banned"})
	const want = `# HELP caddy_http_statusgate_fields_removed_total Responses from which a protected field was removed, by endpoint and field.
# TYPE caddy_http_statusgate_fields_removed_total counter
caddy_http_statusgate_fields_removed_total{endpoint="player",field="banned"} 1
caddy_http_statusgate_fields_removed_total{endpoint="player",field="op"} 0
# HELP caddy_http_statusgate_key_requests_total Requests that presented an accepted API key, by the key's name.
# TYPE caddy_http_statusgate_key_requests_total counter
caddy_http_statusgate_key_requests_total{key="discord-bot"} 0
caddy_http_statusgate_key_requests_total{key="website"} 1
# HELP caddy_http_statusgate_unknown_key_requests_total Requests that presented an API key that matches no configured key.
# TYPE caddy_http_statusgate_unknown_key_requests_total counter
caddy_http_statusgate_unknown_key_requests_total 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"caddy_http_statusgate_fields_removed_total",
		"caddy_http_statusgate_key_requests_total",
		"caddy_http_statusgate_unknown_key_requests_total",
	); err != nil {
		t.Error(err)
	}
	// The names follow Prometheus' conventions (promlint).
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "caddy_http_statusgate_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

// Only the config names series: an endpoint, key or field that was not
// configured gets nothing, whatever is asked for.
func TestBoundedLabels(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := register(t, reg).New(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	before := scrape(t, reg)
	for _, name := range []string{"/api/v1/status", "../etc", "nope", "Status", "", OtherEndpoint} {
		if e := m.Endpoint(name); e != nil {
			t.Errorf("Endpoint(%q) is not nil", name)
		}
		m.Endpoint(name).Count(Served) // a nil Endpoint counts nothing, without a panic
		m.Endpoint(name).FieldsRemoved([]string{"op"})
		m.Endpoint(name).FilterBytes(1, 1)
	}
	m.Endpoint("status").FieldsRemoved([]string{"op", "seed"}) // status has no configured fields
	for i := -3; i < 100; i++ {
		if i < 0 || i >= len(testConfig.Keys) {
			m.KeyUsed(i)
		}
	}
	checkSeries(t, scrape(t, reg), before, nil)
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	if m.Endpoint("status") != nil || m.Other() != nil {
		t.Error("a nil Metrics gave an Endpoint")
	}
	m.KeyUsed(0)
	m.UnknownKey()
	m.Other().Count(NotFound)
}

// Without a registry the counters work and nothing is exported.
func TestNilRegistry(t *testing.T) {
	m, err := (*Collectors)(nil).New(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	m.Endpoint("status").Count(Served)
	m.KeyUsed(1)
	if got := testutil.ToFloat64(m.Endpoint("status").requests[Served]); got != 1 {
		t.Errorf("served = %v", got)
	}
	if got := testutil.ToFloat64(m.keys[1]); got != 1 {
		t.Errorf("key website = %v", got)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Endpoints: []string{""}}, `metrics: invalid endpoint name ""`},
		{Config{Endpoints: []string{"st\xffatus"}}, `metrics: invalid endpoint name "st\xffatus"`},
		{Config{Endpoints: []string{"_other"}}, `metrics: endpoint name "_other" is reserved for requests that match no endpoint`},
		{Config{Endpoints: []string{"status", "player", "status"}}, `metrics: endpoint "status" listed twice`},
		{Config{Endpoints: []string{"status"}, Fields: map[string][]string{"player": {"op"}}}, `metrics: fields of endpoint "player", which is not among the endpoints`},
		{Config{Endpoints: []string{"player"}, Fields: map[string][]string{"player": {"op", ""}}}, `metrics: invalid field name "" of endpoint "player"`},
		{Config{Keys: []string{"a", ""}}, `metrics: invalid key name ""`},
		{Config{Keys: []string{"a", "b", "a"}}, `metrics: key name "a" listed twice`},
	} {
		reg := prometheus.NewPedanticRegistry()
		load := register(t, reg)
		before := len(scrape(t, reg))
		m, err := load.New(c.cfg)
		if err == nil || err.Error() != c.want {
			t.Errorf("New(%+v) = %v, want %q", c.cfg, err, c.want)
		}
		if m != nil {
			t.Errorf("New(%+v) returned metrics with an error", c.cfg)
		}
		if len(scrape(t, reg)) != before {
			t.Errorf("New(%+v) registered series despite the error", c.cfg)
		}
	}
}

// Two statusgate handlers in one config share its collectors, registered
// once in Caddy's registry: both sets of label values exist, and a request
// counts once. The registry takes one load's collectors.
func TestTwoHandlersOneRegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	load := register(t, reg)
	if _, err := Register(reg); err == nil {
		t.Error("a second load's collectors registered in the load's registry")
	}
	a, err := load.New(Config{Endpoints: []string{"status", "player"}, Keys: []string{"bot"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := load.New(Config{Endpoints: []string{"status", "bans"}, Keys: []string{"web"}})
	if err != nil {
		t.Fatalf("second handler: %v", err)
	}
	a.Endpoint("status").Count(Served)
	b.Endpoint("status").Count(Served)
	b.Endpoint("bans").Count(Refused)
	a.KeyUsed(0)
	b.KeyUsed(0)
	got := scrape(t, reg)
	for k, v := range map[string]float64{
		req("status", Served):                                 2,
		req("bans", Refused):                                  1,
		req("player", Served):                                 0,
		req(OtherEndpoint, Method):                            0,
		`caddy_http_statusgate_key_requests_total{key="bot"}`: 1,
		`caddy_http_statusgate_key_requests_total{key="web"}`: 1,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
		if _, ok := got[k]; !ok {
			t.Errorf("missing %s", k)
		}
	}
	// status, player, bans and _other, each with every outcome: status's
	// series are shared, not doubled.
	n := 0
	for k := range got {
		if strings.HasPrefix(k, "caddy_http_statusgate_requests_total{") {
			n++
		}
	}
	if n != 4*int(numOutcomes) {
		t.Errorf("%d request series, want %d", n, 4*numOutcomes)
	}
}

// A reload: Caddy v2.11.9 gives every config load a new context with a new
// registry. The new config's metrics register without conflict beside
// Caddy's own collectors, start from zero, carry only the new config's label
// values, and the old handler, still finishing its requests, does not count
// into them.
func TestReload(t *testing.T) {
	ctx1, cancel1 := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel1()
	old, err := register(t, ctx1.GetMetricsRegistry()).New(Config{Endpoints: []string{"status"}, Keys: []string{"retired", "bot"}})
	if err != nil {
		t.Fatal(err)
	}
	old.Endpoint("status").Count(Served)
	old.KeyUsed(0)

	ctx2, cancel2 := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel2()
	if ctx1.GetMetricsRegistry() == ctx2.GetMetricsRegistry() {
		t.Fatal("Caddy reuses the metrics registry across config loads; the reload handling of this package assumes it does not")
	}
	cur, err := register(t, ctx2.GetMetricsRegistry()).New(Config{Endpoints: []string{"status", "bans"}, Keys: []string{"bot"}})
	if err != nil {
		t.Fatalf("after reload: %v", err)
	}
	cur.Endpoint("status").Count(Served)
	cur.Endpoint("status").Count(Served)
	old.Endpoint("status").Count(Served) // the old config finishing a request
	cur.KeyUsed(0)

	got2 := scrape(t, ctx2.GetMetricsRegistry())
	if got2[req("status", Served)] != 2 {
		t.Errorf("new registry: status served = %v, want 2", got2[req("status", Served)])
	}
	if _, ok := got2[req("bans", Served)]; !ok {
		t.Error("new registry lacks the new endpoint")
	}
	if got2[`caddy_http_statusgate_key_requests_total{key="bot"}`] != 1 {
		t.Errorf("new registry: key bot = %v, want 1", got2[`caddy_http_statusgate_key_requests_total{key="bot"}`])
	}
	if _, ok := got2[`caddy_http_statusgate_key_requests_total{key="retired"}`]; ok {
		t.Error("the removed key still has a series after the reload")
	}
	got1 := scrape(t, ctx1.GetMetricsRegistry())
	if got1[req("status", Served)] != 2 || got1[`caddy_http_statusgate_key_requests_total{key="retired"}`] != 1 {
		t.Errorf("old registry: %v", got1)
	}
	// Caddy's own collectors are still there and gather cleanly beside ours.
	families, err := ctx2.GetMetricsRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == "go_goroutines" }) {
		t.Error("Caddy's own metrics are missing from the registry")
	}
}

// Another collector holding one of the names makes Register fail with an
// error, not a panic. What Register registered before it stays: Caddy
// drops the failed config's registry whole.
func TestRegistryConflict(t *testing.T) {
	for _, foreign := range []prometheus.Collector{
		// Same name, other labels.
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "caddy_http_statusgate_fields_removed_total", Help: "x"}, []string{"x"}),
		// Same name, labels and help, but a gauge.
		prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: subsystem, Name: "filter_out_bytes_total",
			Help: "Response bytes the field layer wrote to callers."}, []string{"endpoint"}),
	} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(foreign)
		c, err := Register(reg)
		if err == nil || !strings.HasPrefix(err.Error(), "registering statusgate metrics: ") || c != nil {
			t.Fatalf("Register = %v, %v; want a registration error", c, err)
		}
	}
}

func TestHotPathAllocs(t *testing.T) {
	m, err := register(t, prometheus.NewPedanticRegistry()).New(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	e := m.Endpoint("player")
	hidden := []string{"op", "banned"}
	allocs := testing.AllocsPerRun(1000, func() {
		e.Count(Filtered)
		m.Other().Count(NotFound)
		e.FieldsRemoved(hidden)
		e.FilterBytes(4096, 4000)
		m.KeyUsed(1)
		m.UnknownKey()
	})
	if allocs != 0 {
		t.Errorf("the hot path allocates %.1f times per request", allocs)
	}
}

func BenchmarkCount(b *testing.B) {
	m, err := register(b, prometheus.NewPedanticRegistry()).New(testConfig)
	if err != nil {
		b.Fatal(err)
	}
	e := m.Endpoint("status")
	b.ReportAllocs()
	for b.Loop() {
		e.Count(Served)
	}
}

func BenchmarkCountParallel(b *testing.B) {
	m, err := register(b, prometheus.NewPedanticRegistry()).New(testConfig)
	if err != nil {
		b.Fatal(err)
	}
	e := m.Endpoint("status")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e.Count(Served)
		}
	})
}

func BenchmarkKeyUsed(b *testing.B) {
	m, err := register(b, prometheus.NewPedanticRegistry()).New(testConfig)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.KeyUsed(1)
	}
}

// A filtered response: its outcome, two removed fields and its bytes.
func BenchmarkFilteredResponse(b *testing.B) {
	m, err := register(b, prometheus.NewPedanticRegistry()).New(testConfig)
	if err != nil {
		b.Fatal(err)
	}
	e := m.Endpoint("player")
	hidden := []string{"op", "banned"}
	b.ReportAllocs()
	for b.Loop() {
		e.Count(Filtered)
		e.FieldsRemoved(hidden)
		e.FilterBytes(130000, 129000)
	}
}

// register is a config load's collectors, registered in reg.
func register(t testing.TB, reg *prometheus.Registry) *Collectors {
	t.Helper()
	c, err := Register(reg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
