package caddymodule

// The backend protection through the handler (docs/backend-protection.md):
// admission, the queue, per-client and key places, the micro-cache and its
// refresh, shared trips, held bytes and answers too large to hold. The guard's
// own unit tests, against a fake game server, are internal/guard's.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
	"github.com/statusgate/statusgate/internal/fixture"
)

func TestCaddyfileBackendOptions(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"max_in_flight 4", `{"backend":{"max_in_flight":4}}`},
		{"max_in_flight off", `{"backend":{"max_in_flight":-1}}`},
		{"max_main_thread 2", `{"backend":{"max_main_thread":2}}`},
		{"max_main_thread off", `{"backend":{"max_main_thread":-1}}`},
		{"max_per_client 2", `{"backend":{"max_per_client":2}}`},
		{"max_per_client off", `{"backend":{"max_per_client":-1}}`},
		{"queue 16", `{"backend":{"queue_length":16}}`},
		{"queue 16 500ms", `{"backend":{"queue_length":16,"queue_wait":500000000}}`},
		{"queue off", `{"backend":{"queue_length":-1}}`},
		{"cache_size off", `{"backend":{"cache_size":-1}}`},
		{"timeout 3s", `{"backend":{"timeout":3000000000}}`},
		{"timeout off", `{"backend":{"timeout":-1}}`},
		{"cache status 2s", `{"backend":{"cache":{"status":2000000000}}}`},
		{"cache worlds off", `{"backend":{"cache":{"worlds":-1}}}`},
		{"snapshot status 10s", `{"backend":{"snapshot":{"status":10000000000}}}`},
		{"snapshot entities off", `{"backend":{"snapshot":{"entities":-1}}}`},
		{"coalesce off", `{"backend":{"coalesce":false}}`},
		{"cache_size 1MiB", `{"backend":{"cache_size":1048576}}`},
		{"max_response 2MiB", `{"backend":{"max_response":2097152}}`},
		{"max_held 128MiB", `{"backend":{"max_held":134217728}}`},
		{"write_timeout 30s", `{"backend":{"write_timeout":30000000000}}`},
		{"write_timeout off", `{"backend":{"write_timeout":-1}}`},
		{"client_prefix_v6 56", `{"backend":{"client_prefix_v6":56}}`},
		{"guard survival", `{"backend":{"guard":"survival"}}`},
		{"instances 2", `{"backend":{"instances":2}}`},
		{"max_topics 50", `{"backend":{"max_topics":50}}`},
		{"max_topics off", `{"backend":{"max_topics":-1}}`},
	} {
		h, err := parseTestCaddyfile("statusgate {\n\t" + tc.in + "\n}")
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got, _ := json.Marshal(h); string(got) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, words string }{
		{"max_in_flight", "wrong argument count"},
		{"max_in_flight 0", "max_in_flight: '0' is not a whole number of at least 1 or off"},
		{"max_in_flight eight", "max_in_flight: 'eight' is not a whole number"},
		{"max_in_flight 8 9", "wrong argument count"},
		{"max_main_thread -1", "max_main_thread: '-1' is not"},
		{"queue 8 2", "queue: '2' is not a positive duration"},
		{"queue 8 2s 3s", "wrong argument count"},
		{"timeout", "wrong argument count"},
		{"timeout 0s", "timeout: '0s' is not a positive duration"},
		{"timeout 5s 6s", "wrong argument count"},
		{"cache stats 1s", "cache: unknown endpoint 'stats'"},
		{"cache status", "wrong argument count"},
		{"cache status soon", "cache: 'soon' is not a positive duration"},
		{"snapshot status 0s", "snapshot: '0s' is not a positive duration"},
		{"cache_size lots", "cache_size: 'lots' is not a size"},
		{"coalesce maybe", "coalesce: 'maybe' is not on, off, true or false"},
		{"max_response big", "max_response: 'big' is not a size"},
		{"max_held 0", "max_held: '0' is not a size"},
		{"write_timeout 0s", "write_timeout: '0s' is not a positive duration"},
		{"write_timeout", "wrong argument count"},
		{"client_prefix_v6 0", "client_prefix_v6: '0' is not a prefix length from 1 to 128"},
		{"client_prefix_v6 129", "client_prefix_v6: '129' is not a prefix length"},
		{"guard a.b", "guard: 'a.b' is not a name"},
		{"guard a b", "wrong argument count"},
		{"instances", "wrong argument count"},
		{"instances off", "instances cannot be off: every gateway is one of at least one"},
		{"instances 0", "instances: '0' is not a count of gateways"},
		{"instances -2", "instances: '-2' is not a count of gateways"},
		{"instances two", "instances: 'two' is not a count of gateways"},
		{"instances 2 3", "wrong argument count"},
		{"instances 17", "instances: 17 is too many gateways to divide max_held (67108864 bytes) among: each would hold 3947580 bytes, less than max_response (4194304 bytes)"},
		{"max_topics 0", "max_topics: '0' is not a whole number of at least 1 or off"},
		{"max_topics many", "max_topics: 'many' is not a whole number"},
		{"max_topics", "wrong argument count"},
	} {
		_, err := parseTestCaddyfile("statusgate {\n\tkey k s3cret-s3cret-s3cret\n\t" + tc.in + "\n}")
		if err == nil || !strings.Contains(err.Error(), tc.words) || !strings.HasSuffix(err.Error(), "Testfile:3") {
			t.Errorf("%s: error %v, want %q at Testfile:3", tc.in, err, tc.words)
		}
	}
	twice, err := parseTestCaddyfile("statusgate {\n\ttimeout 1s\n\ttimeout 2s\n}")
	if err == nil || !strings.Contains(err.Error(), "'timeout' given twice") {
		t.Errorf("timeout twice: %v %v", twice, err)
	}
}

// TestInstancesShare checks each gateway's share of the backend: the
// backend's slots, the queue and the held bytes divided by instances,
// rounded down and at least 1, off left off, and everything that bounds one
// client or the main-thread lane left whole.
func TestInstancesShare(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    BackendConfig
		want guard.Limits // only InFlight, Queue, MaxHeld, MainThread, PerClient, Instances
	}{
		{"alone", BackendConfig{}, guard.Limits{InFlight: 8, Queue: 64, MaxHeld: 64 << 20, MainThread: 1, PerClient: 4, Instances: 1}},
		{"one of one", BackendConfig{Instances: 1}, guard.Limits{InFlight: 8, Queue: 64, MaxHeld: 64 << 20, MainThread: 1, PerClient: 4, Instances: 1}},
		{"two", BackendConfig{Instances: 2}, guard.Limits{InFlight: 4, Queue: 32, MaxHeld: 32 << 20, MainThread: 1, PerClient: 4, Instances: 2}},
		{"three round down", BackendConfig{Instances: 3}, guard.Limits{InFlight: 2, Queue: 21, MaxHeld: (64 << 20) / 3, MainThread: 1, PerClient: 4, Instances: 3}},
		{"at least 1", BackendConfig{Instances: 10, MaxInFlight: 8, QueueLength: 4, MaxResponse: 1 << 20}, guard.Limits{InFlight: 1, Queue: 1, MaxHeld: (64 << 20) / 10, MainThread: 1, PerClient: 4, Instances: 10}},
		{"off stays off", BackendConfig{Instances: 2, MaxInFlight: off, QueueLength: off, MaxMainThread: off, MaxPerClient: off}, guard.Limits{InFlight: 0, Queue: 0, MaxHeld: 32 << 20, MainThread: 0, PerClient: 0, Instances: 2}},
	} {
		l, err := resolveLimits(tc.c)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := guard.Limits{InFlight: l.InFlight, Queue: l.Queue, MaxHeld: l.MaxHeld, MainThread: l.MainThread, PerClient: l.PerClient, Instances: l.Instances}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		c     BackendConfig
		words string
	}{
		{BackendConfig{Instances: off}, "backend.instances cannot be off (-1): every gateway is one of at least one"},
		{BackendConfig{Instances: -3}, "backend.instances: -3 is not a count of gateways"},
		// 64 MiB / 32 is 2 MiB, less than the 4 MiB answer it must hold.
		{BackendConfig{Instances: 32}, "backend.instances: 32 is too many gateways to divide max_held (67108864 bytes) among: each would hold 2097152 bytes, less than max_response (4194304 bytes), the largest answer a gateway must be able to hold; with these sizes at most 16 gateways can share the backend"},
		{BackendConfig{Instances: 9999999999}, "backend.instances: 9999999999 is too many gateways to divide max_held (67108864 bytes) among: each would hold 0 bytes"},
		// Too large an answer for max_held is max_response's mistake, whatever instances says.
		{BackendConfig{Instances: 2, MaxResponse: 8 << 20, MaxHeld: 4 << 20}, "backend.max_response: 8388608 (8MiB) is more than max_held, 4194304 (4MiB)"},
	} {
		if _, err := resolveLimits(tc.c); err == nil || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("%+v: error %v, want %q", tc.c, err, tc.words)
		}
	}
}

// TestInstancesAdmission checks that the share is what a guard admits: with
// max_in_flight 4 and instances 2 the backend sees 2 at once and the queue
// holds 1 (3 / 2), so the fourth caller gets 503 at once; and that startup
// says so.
func TestInstancesAdmission(t *testing.T) {
	// A queue wait no busy machine uses up: the third caller waits in it
	// until the test lets the first go.
	h, logs := newTestHandler(t, "max_in_flight 4\nqueue 3 1m\ninstances 2\ndisable placeholders\n"+queryStation)
	g := newGate()
	codes := make(chan int, 4)
	for i := range 3 {
		go func() { codes <- serve(t, h, g, "GET", fmt.Sprintf(queryTarget+"?n=%d", i), nil).Code }()
		if i < 2 {
			<-g.entered
		}
	}
	// The third waits in the queue of 1; the fourth finds it full.
	fixture.WaitFor(t, "the third caller to be queued", func() bool { return units(h).All.Stats().QueuedAnonymous == 1 })
	if code := serve(t, h, g, "GET", queryTarget+"?n=3", nil).Code; code != 503 {
		t.Errorf("fourth caller: %d, want 503 (2 slots and a queue of 1)", code)
	}
	for range 3 {
		g.release <- struct{}{}
	}
	for range 3 {
		if code := fixture.Recv(t, codes, "an admitted caller's answer"); code != 200 {
			t.Errorf("admitted caller: %d", code)
		}
	}
	if g.peak != 2 {
		t.Errorf("backend saw %d at once, want this gateway's share, 2", g.peak)
	}
	said := logs.FilterMessageSnippet("one of several gateways").All()
	if len(said) != 1 {
		t.Fatalf("startup logged %d share lines, want 1", len(said))
	}
	f := said[0].ContextMap()
	if f["instances"] != int64(2) || f["max_in_flight"] != int64(2) || f["queue_length"] != int64(1) || f["max_held"] != int64(32<<20) ||
		!strings.Contains(fmt.Sprint(f["main_thread_lane"]), "another gateway owns") {
		t.Errorf("share logged as %v", f)
	}
	if n := logs.FilterMessageSnippet("instances is more than max_in_flight").Len(); n != 0 {
		t.Errorf("instances 2 of max_in_flight 4 warned %d times", n)
	}
	// A gateway alone says nothing of shares.
	_, logs = newTestHandler(t, "max_in_flight 4")
	if n := logs.FilterMessageSnippet("one of several").Len(); n != 0 {
		t.Errorf("a gateway alone logged %d share lines", n)
	}
}

// More gateways than the backend has slots is taken, each gateway admitting
// 1, and said at load with what the gateways admit together; instances too
// many for the held bytes is refused at the instances line, also when
// max_held comes after it, and a max_held large enough after it is taken.
func TestInstancesAboveMaxInFlight(t *testing.T) {
	h, logs := newTestHandler(t, "max_in_flight 4\ninstances 6\ndisable placeholders")
	if l := h.guard.Limits(); l.InFlight != 1 || l.Instances != 6 {
		t.Errorf("share %+v, want 1 of instances 6", l)
	}
	ws := logs.FilterMessageSnippet("instances is more than max_in_flight").All()
	if len(ws) != 1 || ws[0].Level != zap.WarnLevel {
		t.Fatalf("%d warnings, want 1 at WARN", len(ws))
	}
	if f := ws[0].ContextMap(); f["instances"] != int64(6) || f["max_in_flight"] != int64(4) || f["admitted_together"] != int64(6) {
		t.Errorf("warning fields %v", f)
	}
	_, err := parseTestCaddyfile("statusgate {\n\tinstances 9999999999\n\tmax_held 128MiB\n}")
	if err == nil || !strings.Contains(err.Error(), "instances: 9999999999 is too many gateways to divide max_held (134217728 bytes)") || !strings.HasSuffix(err.Error(), "Testfile:2") {
		t.Errorf("error %v, want the instances line, Testfile:2", err)
	}
	if _, err := parseTestCaddyfile("statusgate {\n\tinstances 32\n\tmax_held 128MiB\n}"); err != nil {
		t.Errorf("instances 32 with max_held 128MiB: %v", err)
	}
}

// queryStation is the config of a public custom station, queryTarget: the
// backend gets its whole query, so that requests told apart by a query
// (?n=1, ?n=2) are apart at the backend too, never one shared trip.
const (
	queryStation = "enable custom/t\nrequire_key custom/t off"
	queryTarget  = "/api/v1/custom/t"
)

// gate is a next handler that holds every request until released, so that a
// test controls how many are in flight.
type gate struct {
	mu       sync.Mutex
	inFlight int
	peak     int
	entered  chan string // the path of each request as it arrives
	release  chan struct{}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	g.mu.Lock()
	g.inFlight++
	g.peak = max(g.peak, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	g.entered <- r.URL.RequestURI()
	select {
	case <-g.release:
	case <-r.Context().Done():
		return caddyhttp.Error(http.StatusGatewayTimeout, r.Context().Err())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write([]byte(`{"ok":true,"data":{},"meta":{}}`))
	return err
}

// TestAdmission drives the limits through ServeHTTP: the backend never sees
// more than max_in_flight, a keyed caller waiting behind a full backend is
// admitted before anonymous callers that waited longer, and a caller past the
// wait bound gets 503 Backend busy with Retry-After.
func TestAdmission(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\n"+queryStation+"\nmax_in_flight 2\nqueue 4 300ms")
	g := newGate()
	type result struct {
		who     string
		status  int
		retry   string
		msg     string
		outcome string
	}
	results := make(chan result, 16)
	call := func(who string, hdr http.Header) {
		r := serve(t, h, g, "GET", queryTarget+"?who="+who, hdr)
		outcome, _ := r.repl.GetString(placeholderOutcome)
		results <- result{who, r.Code, r.Header().Get("Retry-After"), r.envelope.Error.Message, outcome}
	}
	// Two fill the backend; two anonymous callers queue, then a keyed one,
	// each once the one before is in the queue.
	stats := func() admission.Stats { return units(h).All.Stats() }
	for _, who := range []string{"first0", "first1"} {
		go call(who, nil)
		<-g.entered
	}
	for i, who := range []string{"anon0", "anon1"} {
		go call(who, nil)
		fixture.WaitFor(t, who+" in the queue", func() bool { return stats().QueuedAnonymous == i+1 })
	}
	go call("keyed", keyHeader(testKey))
	fixture.WaitFor(t, "the keyed caller in the queue", func() bool { return stats().QueuedKeyed == 1 })

	g.release <- struct{}{} // one slot frees: it goes to the keyed caller
	if who := fixture.Recv(t, g.entered, "the freed slot"); who != queryTarget+"?who=keyed" {
		t.Errorf("the freed slot went to %s, not to the keyed caller", who)
	}
	// Both slots stay taken past the wait bound: the anonymous callers get
	// their 503 while they are.
	got := map[string]result{}
	for range 3 {
		r := fixture.Recv(t, results, "the callers' answers")
		got[r.who] = r
	}
	_, anon0 := got["anon0"]
	_, anon1 := got["anon1"]
	if _, keyed := got["keyed"]; keyed || !anon0 || !anon1 {
		t.Fatalf("answered while both slots were taken: %v; want a first caller and the two anonymous ones", got)
	}
	g.release <- struct{}{}
	g.release <- struct{}{}
	for range 2 {
		r := fixture.Recv(t, results, "the callers' answers")
		got[r.who] = r
	}
	for who, r := range got {
		switch {
		case strings.HasPrefix(who, "anon"):
			if r.status != 503 || r.retry != "1" || r.msg != "Backend busy" || r.outcome != "busy" {
				t.Errorf("%s: %d with Retry-After %q, message %q, outcome %q; want 503, 1, Backend busy, busy", who, r.status, r.retry, r.msg, r.outcome)
			}
		case r.status != 200:
			t.Errorf("%s: %d, want 200", who, r.status)
		}
	}
	if g.peak > 2 {
		t.Errorf("backend saw %d requests at once, limit 2", g.peak)
	}
}

// TestMainThreadLimit checks that placeholders go one at a time while other
// stations still get through.
func TestMainThreadLimit(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\nqueue 4 200ms")
	g := newGate()
	codes := make(chan int, 4)
	go func() { codes <- serve(t, h, g, "GET", "/api/v1/placeholders?p=x", keyHeader(testKey)).Code }()
	if p := <-g.entered; !strings.HasPrefix(p, "/api/v1/placeholders") {
		t.Fatalf("entered %s", p)
	}
	go func() { codes <- serve(t, h, g, "GET", "/api/v1/placeholders?p=y", keyHeader(testKey)).Code }()
	go func() { codes <- serve(t, h, g, "GET", "/api/v1/status", nil).Code }()
	if p := <-g.entered; p != "/api/v1/status" {
		t.Fatalf("a second placeholders request reached the backend while one was in flight")
	}
	// The waiting placeholders request is refused at 200 ms, while the
	// other two are still at the backend.
	if c := fixture.Recv(t, codes, "the waiting placeholders request"); c != 503 {
		t.Errorf("the waiting placeholders request got %d, want 503", c)
	}
	g.release <- struct{}{}
	g.release <- struct{}{}
	if a, b := fixture.Recv(t, codes, "a released request"), fixture.Recv(t, codes, "a released request"); a != 200 || b != 200 {
		t.Errorf("codes %d %d after the release, want 200 and 200", a, b)
	}
}

// TestRateLimitedByNext checks the envelope for a 429 that a rate limiter
// after the gateway returns, with its Retry-After kept.
func TestRateLimitedByNext(t *testing.T) {
	h, logs := newTestHandler(t, "")
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Retry-After", "7")
		return caddyhttp.Error(http.StatusTooManyRequests, nil)
	})
	r := serve(t, h, next, "GET", "/api/v1/status", nil)
	if r.Code != 429 || r.envelope.Error.Message != "Too many requests" || r.Header().Get("Retry-After") != "7" {
		t.Errorf("got %d %q Retry-After %q", r.Code, r.envelope.Error.Message, r.Header().Get("Retry-After"))
	}
	if n := logs.FilterMessage("backend response refused").Len(); n != 0 {
		t.Errorf("a rate-limited caller was logged as a backend failure %d times", n)
	}
}

// TestTimeoutBudget checks that a backend that hangs is answered with the 504
// envelope once the budget is spent.
func TestTimeoutBudget(t *testing.T) {
	h, _ := newTestHandler(t, "timeout 100ms")
	g := newGate()
	start := time.Now()
	done := make(chan reply, 1)
	go func() { done <- serve(t, h, g, "GET", "/api/v1/status", nil) }()
	<-g.entered
	select {
	case r := <-done:
		if r.Code != 504 || r.envelope.Error.Message != "Gateway timeout" {
			t.Errorf("got %d %q", r.Code, r.envelope.Error.Message)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("took %v", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the budget did not end the request")
	}
}

// TestMicroCache checks that a cached endpoint reaches the backend once per
// time to live and class, that anonymous and keyed callers never share an
// entry, and that clients are still told not to store the answer.
func TestMicroCache(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\ncache status 1m\ncache player off")
	be := &counter{body: `{"ok":true,"data":{"online":[],"op":true},"meta":{"authenticated":true}}`}
	var anon []string
	for range 3 {
		r := serve(t, h, be, "GET", "/api/v1/status", nil)
		if r.Code != 200 || r.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("anonymous: %d, Cache-Control %q", r.Code, r.Header().Get("Cache-Control"))
		}
		anon = append(anon, r.Body.String())
	}
	if be.n() != 1 || anon[0] != anon[1] || anon[1] != anon[2] {
		t.Fatalf("three anonymous calls: backend called %d times; bodies %q", be.n(), anon)
	}
	keyed := serve(t, h, be, "GET", "/api/v1/status", keyHeader(testKey))
	if be.n() != 2 || keyed.Body.String() != be.body {
		t.Errorf("keyed caller got the anonymous entry: backend %d calls, body %s", be.n(), keyed.Body)
	}
	serve(t, h, be, "GET", "/api/v1/status?history=true", nil)
	if be.n() != 3 {
		t.Errorf("a different query shared the entry")
	}
	head := serve(t, h, be, "HEAD", "/api/v1/status", nil)
	if be.n() != 3 || head.Body.Len() != 0 || head.Header().Get("Content-Length") != strconv.Itoa(len(anon[0])) {
		t.Errorf("HEAD: backend %d calls, body %q, Content-Length %q", be.n(), head.Body, head.Header().Get("Content-Length"))
	}
	for range 2 {
		serve(t, h, be, "GET", "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df", nil)
	}
	if be.n() != 5 {
		t.Errorf("player is not cached, yet the backend saw %d calls, want 5", be.n())
	}
}

// TestCacheOffAfterReload: a reload that turns an endpoint's cache off keeps
// the guard, and with it the old config's entries, which the new config must
// not serve.
func TestCacheOffAfterReload(t *testing.T) {
	before, _ := newTestHandler(t, "guard cached\ncache status 1m")
	after, _ := newTestHandler(t, "guard cached\ncache status off")
	if !sameGuard(before.guard, after.guard) {
		t.Fatal("the reload did not keep the guard")
	}
	be := &counter{body: `{"ok":true,"data":{"online":[]},"meta":{"authenticated":false}}`}
	serve(t, before, be, "GET", "/api/v1/status", nil)
	be.body = `{"ok":true,"data":{"online":["new"]},"meta":{"authenticated":false}}`
	r := serve(t, after, be, "GET", "/api/v1/status", nil)
	if be.n() != 2 || !strings.Contains(r.Body.String(), `"new"`) {
		t.Errorf("with its cache off, status reached the backend %d times (want 2) and answered %s", be.n(), r.Body)
	}
}

// TestMaxPerClient checks that one anonymous client past max_per_client is
// answered at once with the gateway's 429 (the guard's tests follow the
// places themselves: a keyed caller not counted, a place given back).
func TestMaxPerClient(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\nrequire_key server off\nmax_per_client 2\ncoalesce off")
	g := newGate()
	codes := make(chan int, 2)
	for i := range 2 {
		go func() { codes <- serve(t, h, g, "GET", fmt.Sprintf("/api/v1/server?n=%d", i), nil).Code }()
		<-g.entered
	}
	r := serve(t, h, g, "GET", "/api/v1/server?n=3", nil)
	if o, _ := r.repl.GetString(placeholderOutcome); r.Code != 429 || r.Header().Get("Retry-After") != "1" ||
		r.envelope.Error.Message != "Too many requests" || o != "rate_limited" {
		t.Errorf("third anonymous request: %d Retry-After %q %q outcome %q", r.Code, r.Header().Get("Retry-After"), r.envelope.Error.Message, o)
	}
	for range 2 {
		g.release <- struct{}{}
	}
	for range 2 {
		if c := <-codes; c != 200 {
			t.Errorf("status %d", c)
		}
	}
}

// TestMaxPerClientAuthOff checks that the per-client limit holds while auth is
// off too: then nobody has a key, so every caller is counted.
func TestMaxPerClientAuthOff(t *testing.T) {
	h, _ := newTestHandler(t, "auth off\nmax_per_client 1\ncoalesce off")
	g := newGate()
	done := make(chan int, 1)
	go func() { done <- serve(t, h, g, "GET", "/api/v1/server?n=1", nil).Code }()
	<-g.entered
	if r := serve(t, h, g, "GET", "/api/v1/server?n=2", nil); r.Code != http.StatusTooManyRequests {
		t.Errorf("a second request of one client with auth off: %d, want 429", r.Code)
	}
	g.release <- struct{}{}
	if c := <-done; c != 200 {
		t.Errorf("first request: %d", c)
	}
}

// TestClientAddress checks who counts as one client for the per-client
// limits: an IPv4 address, an IPv6 /64 (or the configured prefix), an
// IPv4-mapped IPv6 address as its IPv4 address.
func TestClientAddress(t *testing.T) {
	for _, tc := range []struct {
		ip     string
		prefix int
		want   string
	}{
		{"203.0.113.7", 64, "203.0.113.7"},
		{"2001:db8:1:2:aaaa::1", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:aaaa::1", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2:aaaa::1", 128, "2001:db8:1:2:aaaa::1"},
		{"::ffff:203.0.113.7", 64, "203.0.113.7"},
	} {
		r, _ := newRequest("GET", "/api/v1/status")
		caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, tc.ip)
		if got := clientAddress(r, tc.prefix); got != tc.want {
			t.Errorf("%s /%d: %q, want %q", tc.ip, tc.prefix, got, tc.want)
		}
	}
	r, _ := newRequest("GET", "/api/v1/status")
	r.RemoteAddr = "[2001:db8::9]:4711"
	caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, "")
	if got := clientAddress(r, 64); got != "2001:db8::/64" {
		t.Errorf("from RemoteAddr: %q", got)
	}
}

// TestMaxPerClientIPv6Prefix checks that addresses of one /64 share one
// client's places.
func TestMaxPerClientIPv6Prefix(t *testing.T) {
	h, _ := newTestHandler(t, "key "+testKey+"\nrequire_key server off\nmax_per_client 1\ncoalesce off")
	g := newGate()
	done := make(chan int, 2)
	from := func(ip, target string) (*http.Request, *caddy.Replacer) {
		r, repl := newRequest("GET", target)
		caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, ip)
		return r, repl
	}
	async := func(r *http.Request) {
		go func() {
			rec := httptest.NewRecorder()
			_ = h.ServeHTTP(rec, r, g)
			done <- rec.Code
		}()
	}
	first, _ := from("2001:db8:1:2::1", "/api/v1/server?n=1")
	async(first)
	<-g.entered
	second, repl := from("2001:db8:1:2:dead:beef::2", "/api/v1/server?n=2")
	rec := httptest.NewRecorder()
	_ = h.ServeHTTP(rec, second, g)
	if o, _ := repl.GetString(placeholderOutcome); rec.Code != 429 || o != "rate_limited" {
		t.Errorf("another address of the same /64: %d %q, want 429", rec.Code, o)
	}
	other, _ := from("2001:db8:1:3::1", "/api/v1/server?n=3")
	async(other)
	<-g.entered // another /64 is another client
	g.release <- struct{}{}
	g.release <- struct{}{}
	for range 2 {
		if c := <-done; c != 200 {
			t.Errorf("status %d", c)
		}
	}
}

// TestGuardSharing checks what names a guard, outside an HTTP server (test/
// checks it through a real Caddy): a declared backend, in any spelling of
// the same declaration, and nothing else; a name; and, for the handlers of
// the 1.0 form, one guard for the process, whose answers stay each
// handler's. Handlers that share a guard in one load share its limits, and
// a later load's are in force.
func TestGuardSharing(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	join := func(load *App, c BackendConfig, declared string) (*guard.Guard, error) {
		t.Helper()
		var b *upstream.Backend
		if declared != "" {
			var err error
			if b, err = upstream.Parse("proxy", json.RawMessage(declared)); err != nil {
				t.Fatal(err)
			}
		}
		l, err := resolveLimits(c)
		if err != nil {
			t.Fatal(err)
		}
		g, err := joinGuard(load, ctx, c, l, b, "policy", zap.NewNop(), "")
		if err == nil {
			t.Cleanup(g.Leave)
		}
		return g, err
	}
	newLoad := func() *App {
		a := new(App)
		if err := a.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		return a
	}
	const survival = `{"upstreams":[{"dial":"10.0.0.2:8080"}]}`
	load1 := newLoad()
	g1, _ := join(load1, BackendConfig{}, survival)
	g2, err := join(load1, BackendConfig{}, "{\n  \"upstreams\": [ { \"dial\": \"10.0.0.2:8080\" } ]\n}")
	if err != nil || !sameGuard(g2, g1) || !sameAnswers(g2, g1) {
		t.Errorf("one declaration in two spellings: %v, shared %v", err, g2 != nil && sameGuard(g2, g1))
	}
	for name, other := range map[string]string{
		"another upstream":      `{"upstreams":[{"dial":"10.0.0.3:8080"}]}`,
		"another Host":          `{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["creative.internal"]}}}}`,
		"a rewrite":             `{"upstreams":[{"dial":"10.0.0.2:8080"}],"rewrite":{"uri":"/creative{http.request.uri}"}}`,
		"the upstreams swapped": `{"upstreams":[{"dial":"10.0.0.3:8080"},{"dial":"10.0.0.2:8080"}]}`,
	} {
		g, err := join(load1, BackendConfig{}, other)
		if err != nil || sameGuard(g, g1) || sameAnswers(g, g1) {
			t.Errorf("%s shares the guard or its answers (%v)", name, err)
		}
	}
	if _, err := join(load1, BackendConfig{MaxInFlight: 4}, survival); err == nil ||
		!strings.Contains(err.Error(), "share a guard (they declare the same backend) but not its limits: here max_in_flight 4, there max_in_flight 8") ||
		!strings.Contains(err.Error(), "in front of 10.0.0.2:8080") {
		t.Errorf("one backend with two sets of limits in one load: %v", err)
	}
	// A reload keeps the declared backend's guard, and puts its limits in force.
	load2 := newLoad()
	g3, err := join(load2, BackendConfig{MaxInFlight: 4}, survival)
	if err != nil || !sameGuard(g3, g1) || !sameAnswers(g3, g1) || g3.Limits().InFlight != 4 {
		t.Errorf("a reload that keeps the declaration: %v", err)
	}

	// Named guards: by name, across declarations and loads; not the
	// answers of two declarations.
	n1, _ := join(load1, BackendConfig{Guard: "survival"}, survival)
	n2, _ := join(load2, BackendConfig{Guard: "survival"}, `{"upstreams":[{"dial":"10.0.0.9:8080"}]}`)
	if !sameGuard(n1, n2) || sameGuard(n1, g1) || sameAnswers(n1, n2) {
		t.Error("a named guard is not shared by name alone")
	}
	// A name in the 1.0 form says the handlers are one game server: the
	// counts and the answers are the name's.
	o1, _ := join(load1, BackendConfig{Guard: "old"}, "")
	o2, _ := join(load2, BackendConfig{Guard: "old"}, "")
	if !sameGuard(o1, o2) || !sameAnswers(o1, o2) {
		t.Error("two 1.0 handlers naming one guard do not share it")
	}
	if _, err := join(load1, BackendConfig{Guard: "survival", MaxInFlight: 6}, ""); err == nil || !strings.Contains(err.Error(), "(both name it guard survival) but not its limits") {
		t.Errorf("one guard name with two sets of limits in one load: %v", err)
	}

	// The 1.0 form: one guard in the process, answers each handler's own.
	u1, _ := join(load1, BackendConfig{}, "")
	u2, err := join(load1, BackendConfig{}, "")
	if err != nil || !sameGuard(u1, u2) || sameAnswers(u1, u2) || sameGuard(u1, g1) {
		t.Errorf("two handlers without upstreams: %v", err)
	}
	if _, err := join(load1, BackendConfig{MaxInFlight: 5}, ""); err == nil || !strings.Contains(err.Error(), "neither declares its upstreams") {
		t.Errorf("handlers without upstreams with two sets of limits in one load: %v", err)
	}
	u3, err := join(load2, BackendConfig{MaxInFlight: 5}, "")
	if err != nil || !sameGuard(u3, u1) || u3.Limits().InFlight != 5 {
		t.Errorf("a later load of the 1.0 form: %v", err)
	}
	// The Caddyfile finds it with its lines (TestHeldFitsCaddyfile); the
	// JSON when provisioned, with the option's path.
	wantProvisionError(t, `{"backend":{"max_response":2097152,"max_held":1048576}}`,
		"backend.max_response: 2097152 (2MiB) is more than max_held, 1048576 (1MiB): no answer that large could be held; write max_held 2097152 or more, or a smaller max_response")
}

// TestClientGone: a client that leaves while its request waits, wherever it
// waits (in the admission queue, behind an identical request, at the
// backend, keyed or through the field layer), ends the same way: 499 in the
// access log, nothing written, outcome client_gone, nothing logged as a
// backend failure. At the backend, which works on whether or not anyone
// waits, the request ends when the backend is done, holding its slot until
// then.
func TestClientGone(t *testing.T) {
	const server = "/api/v1/server"
	// leave sends target and has its client leave once there holds: the
	// request waits where the case means it to; then, left, runs before the
	// request is waited for.
	leave := func(t *testing.T, h *Handler, next caddyhttp.Handler, target string, hdr http.Header, there func() bool, left func()) {
		t.Helper()
		r, repl := newRequest("GET", target)
		for k, v := range hdr {
			r.Header[k] = v
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = h.ServeHTTP(rec, r.WithContext(ctx), next)
		}()
		fixture.WaitFor(t, target+" where its client leaves it", there)
		cancel()
		if left != nil {
			left()
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the request did not end when its client left")
		}
		o, _ := repl.GetString(placeholderOutcome)
		if rec.Code != guard.StatusClientClosed || rec.Body.Len() != 0 || o != "client_gone" {
			t.Errorf("got %d, %d body bytes, outcome %q; want 499, nothing, client_gone", rec.Code, rec.Body.Len(), o)
		}
	}
	noFailures := func(t *testing.T, logs *observer.ObservedLogs) {
		t.Helper()
		if n := logs.FilterMessage("backend response refused").Len(); n != 0 {
			t.Errorf("a client that left was logged as a backend failure %d times", n)
		}
	}

	t.Run("queued", func(t *testing.T) {
		h, logs := newTestHandler(t, "key "+testKey+"\nmax_in_flight 1\nqueue 4 5s\ncoalesce off")
		g := newGate()
		first := make(chan reply, 1)
		go func() { first <- serve(t, h, g, "GET", server+"?n=1", keyHeader(testKey)) }()
		<-g.entered
		leave(t, h, g, server+"?n=2", keyHeader(testKey), func() bool { return units(h).All.Stats().QueuedKeyed == 1 }, nil)
		g.release <- struct{}{}
		if r := <-first; r.Code != 200 {
			t.Errorf("the caller at the backend got %d", r.Code)
		}
		noFailures(t, logs)
	})
	t.Run("following", func(t *testing.T) {
		h, logs := newTestHandler(t, "key "+testKey)
		g := newGate()
		first := make(chan reply, 1)
		go func() { first <- serve(t, h, g, "GET", server, keyHeader(testKey)) }()
		<-g.entered
		leave(t, h, g, server, keyHeader(testKey), func() bool { return units(h).Flights.Stats().Waiting == 1 }, nil)
		g.release <- struct{}{}
		if r := <-first; r.Code != 200 {
			t.Errorf("the leader got %d", r.Code)
		}
		noFailures(t, logs)
	})
	for _, tc := range []struct {
		name   string
		target string
		hdr    http.Header
	}{
		{"at the backend, keyed", server, keyHeader(testKey)},
		{"at the backend, filtered", "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, logs := newTestHandler(t, "key "+testKey+"\ntimeout off")
			g := newGate()
			leave(t, h, g, tc.target, tc.hdr, func() bool {
				select {
				case <-g.entered:
					return true
				default:
					return false
				}
			}, func() {
				// Still at the backend, which has not answered: the slot
				// stays taken until it does.
				if n := units(h).All.Stats().InFlight; n != 1 {
					t.Errorf("%d requests hold a slot after the client left, want the one still at the backend", n)
				}
				g.release <- struct{}{}
			})
			noFailures(t, logs)
		})
	}
}
