package test

// A guard is its backend's (docs/backend-protection.md, "What a guard is"):
// named by where its handler stands, kept with every count across reloads
// that change keys, policy or limits, its limits changed in place.

import (
	"bytes"
	"cmp"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"
)

// gatedBackend holds each request at the backend until the test releases
// it, and counts how many it holds.
type gatedBackend struct {
	*backend
	inFlight, peak atomic.Int32
	// marked is set from the point the test marks (mark); worst is the
	// most requests at the backend that an arrival after it found, itself
	// included.
	marked  atomic.Bool
	worst   atomic.Int32
	entered chan string   // each request's URI as it arrives
	release chan struct{} // one token lets one request answer
	once    sync.Once
	// metrics is the URL queued reads the guard's queue from; "": the
	// admin API's /metrics.
	metrics string
}

func newGatedBackend(t *testing.T) *gatedBackend {
	g := &gatedBackend{entered: make(chan string, 256), release: make(chan struct{}, 256)}
	g.backend = newBackend(t)
	g.backend.respond = g.respond
	t.Cleanup(g.open)
	return g
}

func (g *gatedBackend) respond(u *url.URL) (int, []byte) {
	n := g.inFlight.Add(1)
	raise(&g.peak, n)
	if g.marked.Load() {
		raise(&g.worst, n)
	}
	g.entered <- u.RequestURI()
	<-g.release
	g.inFlight.Add(-1)
	return backendResponse(u)
}

// raise sets v to n if n is more.
func raise(v *atomic.Int32, n int32) {
	for old := v.Load(); n > old && !v.CompareAndSwap(old, n); old = v.Load() {
	}
}

// mark starts counting worst.
func (g *gatedBackend) mark() { g.marked.Store(true) }

// let answers n held requests.
func (g *gatedBackend) let(n int) {
	for range n {
		g.release <- struct{}{}
	}
}

// open answers every request from now on.
func (g *gatedBackend) open() { g.once.Do(func() { close(g.release) }) }

// await waits for n requests to arrive.
func (g *gatedBackend) await(t *testing.T, n int) {
	t.Helper()
	for range n {
		fixture.Recv(t, g.entered, "a request at the backend")
	}
}

// down waits until at most n requests are at the backend.
func (g *gatedBackend) down(t *testing.T, n int32) {
	t.Helper()
	fixture.WaitFor(t, fmt.Sprintf("%d requests at the backend", n), func() bool { return g.inFlight.Load() <= n })
}

// queued waits until the keyed callers waiting in the guard's queue and
// the requests at the backend add up to n: every caller sent so far is in
// one place or the other.
func (g *gatedBackend) queued(t *testing.T, n int) {
	t.Helper()
	fixture.WaitFor(t, fmt.Sprintf("%d callers queued or at the backend", n), func() bool {
		got, _ := scrapeURL(t, cmp.Or(g.metrics, adminURL+"/metrics"))
		return int(got[`caddy_http_statusgate_backend_requests_queued{class="keyed",guard=""}`])+int(g.inFlight.Load()) == n
	})
}

// TestGuardPerBackend: two sites on two ports of one host name, each in
// front of its own game server, default limits, no guard name, each with its
// own staff key; /worlds is public without its seed. Their micro-caches are
// primed, then the config is reloaded 30 times, each time with another key
// added (key rotation): every answer on each site, keyed or not, fresh or
// cached, is its own backend's, in both forms.
func TestGuardPerBackend(t *testing.T) { forms(t, testGuardPerBackend) }

func testGuardPerBackend(t *testing.T, legacy bool) {
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addrB := "localhost:" + strconv.Itoa(ports[0])
	beA, beB := newBackend(t), newBackend(t)
	const seedB = "-777"
	beB.respond = func(u *url.URL) (int, []byte) {
		status, body := backendResponse(u)
		body = bytes.ReplaceAll(body, []byte(worldSeed), []byte(seedB))
		return status, bytes.ReplaceAll(body, []byte(`"name":"world`), []byte(`"name":"b-world`))
	}
	load := func(extra string) {
		t.Helper()
		gateway{upstream: beA.addr(), legacy: legacy, shared: true, statusgate: []string{"key staff-a " + keyA, "max_per_client off", "require_key worlds off", "protected_fields worlds seed", "cache worlds 1h"}, sites: []string{
			fmt.Sprintf("http://%s {\n\t%s\n}", addrB, statusgateLines(beB.addr(), []string{"key staff-b " + keyB, "max_per_client off", "require_key worlds off", "protected_fields worlds seed", "cache worlds 1h", extra}, nil, legacy)),
		}}.start(t)
	}
	get := func(addr, key string) response {
		raw := "GET /api/v1/worlds HTTP/1.1\r\nHost: " + addr + "\r\n"
		if key != "" {
			raw += withKey(key) + "\r\n"
		}
		return sendRawTo(t, addr, "GET", raw+"Connection: close\r\n\r\n")
	}
	check := func(round int) {
		t.Helper()
		for _, c := range []struct {
			site, addr, key, own, other string
		}{
			{"A keyed", gatewayAddr, keyA, `"seed":` + worldSeed, "b-world"},
			{"A anonymous", gatewayAddr, "", `"name":"world"`, "b-world"},
			{"B keyed", addrB, keyB, `"seed":` + seedB, `"name":"world"`},
			{"B anonymous", addrB, "", `"name":"b-world"`, `"name":"world"`},
		} {
			r := get(c.addr, c.key)
			if r.Err != nil || r.Status != 200 || !strings.Contains(string(r.Body), c.own) || strings.Contains(string(r.Body), c.other) {
				t.Fatalf("reload %d, site %s: %d %s (err %v): not its own backend's answer", round, c.site, r.Status, clip(r.Body), r.Err)
			}
		}
	}
	load("")
	check(0) // primes both caches: /worlds is cached an hour, whatever the rounds take
	for i := 1; i <= 30; i++ {
		load(fmt.Sprintf("key rotated-%d k-%d-0123456789abcdef", i, i))
		check(i)
	}
	// Declared, the caches outlive the reloads: each backend made one trip
	// per class (keyed, anonymous), in the first round. In the form of 1.0
	// each handler of each load has answers of its own.
	if a, b := len(beA.take()), len(beB.take()); a == 0 || b == 0 || !legacy && (a != 2 || b != 2) {
		t.Errorf("the backends saw %d and %d trips for 31 rounds of cached /worlds: the caches were not kept", a, b)
	}
}

// TestLimitLoweredByReload: max_in_flight lowered from 8 to 2 by a reload
// while 8 requests are at the backend and 6 wait. The guard stays, with its
// count: nobody new gets in until fewer than 2 are at the backend, and from
// then on never more than 2; nobody is refused. Both forms; CI runs it under
// the race detector.
func TestLimitLoweredByReload(t *testing.T) { forms(t, testLimitLoweredByReload) }

func testLimitLoweredByReload(t *testing.T, legacy bool) {
	be := newGatedBackend(t)
	lines := func(limit int) []string {
		return []string{"key " + keyA, "max_in_flight " + strconv.Itoa(limit), "queue 64 60s", "timeout off"}
	}
	gateway{upstream: be.addr(), legacy: legacy, statusgate: lines(8)}.start(t)
	var wg sync.WaitGroup
	statuses := make(chan int, 32)
	for i := range 14 {
		wg.Go(func() {
			statuses <- send(t, "GET", "/api/v1/player/"+alex+"?n="+strconv.Itoa(i), withKey(keyA)).Status
		})
	}
	be.await(t, 8)
	be.queued(t, 14) // 8 at the backend, 6 in the guard's queue
	gateway{upstream: be.addr(), legacy: legacy, statusgate: lines(2)}.start(t)
	be.mark()
	var got []int
	// 8 → 2 at the backend, one answer at a time, each in its caller's
	// hands (its slot given back) before the next: each slot goes out of
	// use, and nobody new gets in.
	for range 6 {
		be.let(1)
		got = append(got, fixture.Recv(t, statuses, "an answer"))
	}
	for range 6 { // one at a time: each answer lets one waiter in
		be.let(1)
		be.await(t, 1)
	}
	be.open()
	wg.Wait()
	close(statuses)
	for s := range statuses {
		got = append(got, s)
	}
	for _, s := range got {
		if s != 200 {
			t.Errorf("a caller got %d, want every one 200", s)
		}
	}
	if w := be.worst.Load(); w > 2 {
		t.Errorf("a request that arrived after the limit was lowered to 2 found %d at the backend", w)
	}
	if p := be.peak.Load(); p > 8 {
		t.Errorf("backend peak %d, above the highest limit in force, 8", p)
	}
}

// TestTimeoutChangedUnderFullGuard: a reload changing only timeout while
// the guard is full (max_in_flight 2) does not start a fresh guard beside
// it, in both forms.
func TestTimeoutChangedUnderFullGuard(t *testing.T) { forms(t, testTimeoutChangedUnderFullGuard) }

func testTimeoutChangedUnderFullGuard(t *testing.T, legacy bool) {
	be := newGatedBackend(t)
	reloadUnderFullGuard(t, be, "the timeout", func(first bool) {
		timeout := "59s"
		if first {
			timeout = "60s"
		}
		gateway{upstream: be.addr(), legacy: legacy, statusgate: []string{"key " + keyA, "max_in_flight 2", "queue 64 60s", "timeout " + timeout}}.start(t)
	})
}

// reloadUnderFullGuard loads the first config (load(true)), in front of be
// with max_in_flight 2 and a long queue; fills the guard, 2 keyed callers
// at the backend and 4 in the queue; reloads (load(false)), which must keep
// the guard; adds 4 callers, who wait behind the old ones; and lets them all
// through one at a time: the backend never holds more than 2. what names
// what the reload changed, for the message.
func reloadUnderFullGuard(t *testing.T, be *gatedBackend, what string, load func(first bool)) {
	t.Helper()
	load(true)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() { send(t, "GET", "/api/v1/player/"+alex+"?old="+strconv.Itoa(i), withKey(keyA)) })
	}
	be.await(t, 2)
	be.queued(t, 6)
	load(false)
	for i := range 4 {
		wg.Go(func() { send(t, "GET", "/api/v1/player/"+alex+"?new="+strconv.Itoa(i), withKey(keyA)) })
	}
	be.queued(t, 10) // the new callers wait behind the old
	for range 8 {
		be.let(1)
		be.await(t, 1)
	}
	be.open()
	wg.Wait()
	if p := be.peak.Load(); p > 2 {
		t.Errorf("backend peak %d with max_in_flight 2 through a reload that changed %s", p, what)
	}
}

// TestKeyCapLoweredByReload: a key capped at 4 with 4 requests open, its cap
// lowered to 2 by a reload: the backend never sees a 5th, and the key gets a
// place again only under its new cap, in both forms.
func TestKeyCapLoweredByReload(t *testing.T) { forms(t, testKeyCapLoweredByReload) }

func testKeyCapLoweredByReload(t *testing.T, legacy bool) {
	be := newGatedBackend(t)
	lines := func(limit int) []string {
		return []string{fmt.Sprintf("key bot %s {\n\t\t\tmax_in_flight %d\n\t\t}", keyA, limit), "timeout off"}
	}
	gateway{upstream: be.addr(), legacy: legacy, statusgate: lines(4)}.start(t)
	var wg sync.WaitGroup
	finished := make(chan int, 8)
	for i := range 4 {
		wg.Go(func() { finished <- send(t, "GET", "/api/v1/player/"+alex+"?n="+strconv.Itoa(i), withKey(keyA)).Status })
	}
	be.await(t, 4)
	gateway{upstream: be.addr(), legacy: legacy, statusgate: lines(2)}.start(t)
	refused := func(when string) {
		t.Helper()
		if r := send(t, "GET", "/api/v1/player/"+alex+"?more", withKey(keyA)); r.Status != 429 {
			t.Fatalf("%s: the key's next request got %d, want 429", when, r.Status)
		}
	}
	// answered lets n of the key's requests answer and waits until their
	// callers have the answers: the key's places are given back by then.
	answered := func(n int) {
		t.Helper()
		be.let(n)
		for range n {
			if s := fixture.Recv(t, finished, "an answer"); s != 200 {
				t.Fatalf("a request open across the reload got %d, want 200", s)
			}
		}
	}
	refused("4 open, cap lowered to 2")
	answered(2)
	refused("2 open, cap 2")
	answered(1)
	be.mark()
	wg.Go(func() { send(t, "GET", "/api/v1/player/"+alex+"?fifth", withKey(keyA)) })
	be.await(t, 1)
	refused("2 open again, cap 2")
	be.open()
	wg.Wait()
	if p, w := be.peak.Load(), be.worst.Load(); p > 4 || w > 2 {
		t.Errorf("backend peak %d for a key capped at 4, then 2; %d once the open ones were under the new cap", p, w)
	}
}

// TestGuardLimitsDisagree: two sites that share a guard with other limits
// stop the load with an error that names both sites, why they share it and
// the limits that differ, and the running config stays. They share it by
// name, by declaring the same backend, or, in the form of 1.0, by declaring
// none.
func TestGuardLimitsDisagree(t *testing.T) {
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	be := newBackend(t)
	startDefault(t, be)
	addrB := "localhost:" + strconv.Itoa(ports[0])
	for _, c := range []struct {
		name   string
		legacy bool
		lines  []string
		why    string
	}{
		{"a guard name", false, []string{"guard game"}, "(both name it guard game)"},
		{"one backend", false, nil, "(they declare the same backend)"},
		{"1.0 with a guard name", true, []string{"guard game"}, "(both name it guard game)"},
		{"1.0", true, nil, "(neither declares its upstreams, and such handlers share one guard)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := loadRefused(t, gateway{upstream: be.addr(), legacy: c.legacy, statusgate: append([]string{"max_in_flight 4"}, c.lines...), sites: []string{
				fmt.Sprintf("http://%s {\n\t%s\n}", addrB, statusgateLines(be.addr(), append([]string{"max_in_flight 6"}, c.lines...), nil, c.legacy)),
			}}.caddyfile())
			wants := []string{"share a guard " + c.why + " but not its limits", ":" + strconv.Itoa(httpPort), ":" + strconv.Itoa(ports[0]), "max_in_flight 4", "max_in_flight 6"}
			if !c.legacy {
				wants = append(wants, "in front of "+be.addr())
			}
			for _, want := range wants {
				if !strings.Contains(msg, want) {
					t.Errorf("the error lacks %q: %s", want, msg)
				}
			}
			if r := send(t, "GET", "/api/v1/server", withKey(keyA)); r.Status != 200 {
				t.Errorf("the running config after the refused load: %d", r.Status)
			}
		})
	}
}

// TestFailedLoadLeavesLimits: a config that raises max_in_flight and then
// fails to load (its proxy cannot read its client certificate) leaves the
// running config's limit in force on the guard they share, in both forms.
func TestFailedLoadLeavesLimits(t *testing.T) { forms(t, testFailedLoadLeavesLimits) }

func testFailedLoadLeavesLimits(t *testing.T, legacy bool) {
	be := newGatedBackend(t)
	lines := func(limit int) []string {
		return []string{"key " + keyA, "max_in_flight " + strconv.Itoa(limit), "queue 64 60s", "timeout off"}
	}
	// The running config's metrics: after a failed load, the admin API's
	// /metrics reads the failed config's registry (Caddy 2.11).
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	metricsSite := fmt.Sprintf("http://127.0.0.1:%d {\n\tmetrics\n}", ports[0])
	be.metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0])
	gateway{upstream: be.addr(), legacy: legacy, statusgate: lines(2), sites: []string{metricsSite}}.start(t)
	msg := loadRefused(t, gateway{upstream: be.addr(), legacy: legacy, statusgate: lines(8), sites: []string{metricsSite},
		transport: []string{"tls_client_auth /nonexistent/client.pem /nonexistent/client.key"}}.caddyfile())
	if !strings.Contains(msg, "client.pem") {
		t.Fatalf("refused for another reason: %s", msg)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { send(t, "GET", "/api/v1/player/"+alex+"?n="+strconv.Itoa(i), withKey(keyA)) })
	}
	be.await(t, 2)
	be.queued(t, 4) // 2 at the backend, 2 waiting: the limit is still 2
	for range 2 {
		be.let(1)
		be.await(t, 1)
	}
	be.open()
	wg.Wait()
	if p := be.peak.Load(); p > 2 {
		t.Errorf("backend peak %d under the running config's max_in_flight 2", p)
	}
}
