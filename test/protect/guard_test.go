package protect

// A guard is its backend's (docs/backend-protection.md, "What a guard is"):
// named by where its handler stands, kept with every count across reloads
// that change keys, policy or limits, its limits changed in place.

import (
	"bytes"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestGuardPerBackend: two sites on two ports of one host name, each in
// front of its own game server, default limits, no guard name, each with its
// own staff key; /worlds is public without its seed. Their micro-caches are
// primed, then the config is reloaded 30 times, each time with another key
// added (key rotation): every answer on each site, keyed or not, fresh or
// cached, is its own backend's, in both forms.
func TestGuardPerBackend(t *testing.T) { Forms(t, testGuardPerBackend) }

func testGuardPerBackend(t *testing.T, legacy bool) {
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addrB := "localhost:" + strconv.Itoa(ports[0])
	beA, beB := NewBackend(t), NewBackend(t)
	const seedB = "-777"
	beB.Respond = func(u *url.URL) (int, []byte) {
		status, body := BackendResponse(u)
		body = bytes.ReplaceAll(body, []byte(WorldSeed), []byte(seedB))
		return status, bytes.ReplaceAll(body, []byte(`"name":"world`), []byte(`"name":"b-world`))
	}
	load := func(extra string) {
		t.Helper()
		Gateway{Upstream: beA.Addr(), Legacy: legacy, Shared: true, Statusgate: []string{"key staff-a " + KeyA, "max_per_client off", "require_key worlds off", "protected_fields worlds seed", "cache worlds 1h"}, Sites: []string{
			fmt.Sprintf("http://%s {\n\t%s\n}", addrB, StatusgateLines(beB.Addr(), []string{"key staff-b " + KeyB, "max_per_client off", "require_key worlds off", "protected_fields worlds seed", "cache worlds 1h", extra}, nil, legacy)),
		}}.Start(t)
	}
	get := func(addr, key string) Response {
		raw := "GET /api/v1/worlds HTTP/1.1\r\nHost: " + addr + "\r\n"
		if key != "" {
			raw += WithKey(key) + "\r\n"
		}
		return SendRawTo(t, addr, "GET", raw+"Connection: close\r\n\r\n")
	}
	check := func(round int) {
		t.Helper()
		for _, c := range []struct {
			site, addr, key, own, other string
		}{
			{"A keyed", GatewayAddr, KeyA, `"seed":` + WorldSeed, "b-world"},
			{"A anonymous", GatewayAddr, "", `"name":"world"`, "b-world"},
			{"B keyed", addrB, KeyB, `"seed":` + seedB, `"name":"world"`},
			{"B anonymous", addrB, "", `"name":"b-world"`, `"name":"world"`},
		} {
			r := get(c.addr, c.key)
			if r.Err != nil || r.Status != 200 || !strings.Contains(string(r.Body), c.own) || strings.Contains(string(r.Body), c.other) {
				t.Fatalf("reload %d, site %s: %d %s (err %v): not its own backend's answer", round, c.site, r.Status, Clip(r.Body), r.Err)
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
	if a, b := len(beA.Take()), len(beB.Take()); a == 0 || b == 0 || !legacy && (a != 2 || b != 2) {
		t.Errorf("the backends saw %d and %d trips for 31 rounds of cached /worlds: the caches were not kept", a, b)
	}
}

// TestLimitLoweredByReload: max_in_flight lowered from 8 to 2 by a reload
// while 8 requests are at the backend and 6 wait. The guard stays, with its
// count: nobody new gets in until fewer than 2 are at the backend, and from
// then on never more than 2; nobody is refused. Both forms; CI runs it under
// the race detector.
func TestLimitLoweredByReload(t *testing.T) { Forms(t, testLimitLoweredByReload) }

func testLimitLoweredByReload(t *testing.T, legacy bool) {
	be := NewGatedBackend(t)
	lines := func(limit int) []string {
		return []string{"key " + KeyA, "max_in_flight " + strconv.Itoa(limit), "queue 64 60s", "timeout off"}
	}
	Gateway{Upstream: be.Addr(), Legacy: legacy, Statusgate: lines(8)}.Start(t)
	var wg sync.WaitGroup
	statuses := make(chan int, 32)
	for i := range 14 {
		wg.Go(func() {
			statuses <- Send(t, "GET", "/api/v1/player/"+Alex+"?n="+strconv.Itoa(i), WithKey(KeyA)).Status
		})
	}
	be.Await(t, 8)
	be.Queued(t, 14) // 8 at the backend, 6 in the guard's queue
	Gateway{Upstream: be.Addr(), Legacy: legacy, Statusgate: lines(2)}.Start(t)
	be.Mark()
	var got []int
	// 8 → 2 at the backend, one answer at a time, each in its caller's
	// hands (its slot given back) before the next: each slot goes out of
	// use, and nobody new gets in.
	for range 6 {
		be.Let(1)
		got = append(got, fixture.Recv(t, statuses, "an answer"))
	}
	for range 6 { // one at a time: each answer lets one waiter in
		be.Let(1)
		be.Await(t, 1)
	}
	be.Open()
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
	if w := be.Worst.Load(); w > 2 {
		t.Errorf("a request that arrived after the limit was lowered to 2 found %d at the backend", w)
	}
	if p := be.Peak.Load(); p > 8 {
		t.Errorf("backend peak %d, above the highest limit in force, 8", p)
	}
}

// TestTimeoutChangedUnderFullGuard: a reload changing only timeout while
// the guard is full (max_in_flight 2) does not start a fresh guard beside
// it, in both forms.
func TestTimeoutChangedUnderFullGuard(t *testing.T) { Forms(t, testTimeoutChangedUnderFullGuard) }

func testTimeoutChangedUnderFullGuard(t *testing.T, legacy bool) {
	be := NewGatedBackend(t)
	ReloadUnderFullGuard(t, be, "the timeout", func(first bool) {
		timeout := "59s"
		if first {
			timeout = "60s"
		}
		Gateway{Upstream: be.Addr(), Legacy: legacy, Statusgate: []string{"key " + KeyA, "max_in_flight 2", "queue 64 60s", "timeout " + timeout}}.Start(t)
	})
}

// TestKeyCapLoweredByReload: a key capped at 4 with 4 requests open, its cap
// lowered to 2 by a reload: the backend never sees a 5th, and the key gets a
// place again only under its new cap, in both forms.
func TestKeyCapLoweredByReload(t *testing.T) { Forms(t, testKeyCapLoweredByReload) }

func testKeyCapLoweredByReload(t *testing.T, legacy bool) {
	be := NewGatedBackend(t)
	lines := func(limit int) []string {
		return []string{fmt.Sprintf("key bot %s {\n\t\t\tmax_in_flight %d\n\t\t}", KeyA, limit), "timeout off"}
	}
	Gateway{Upstream: be.Addr(), Legacy: legacy, Statusgate: lines(4)}.Start(t)
	var wg sync.WaitGroup
	finished := make(chan int, 8)
	for i := range 4 {
		wg.Go(func() { finished <- Send(t, "GET", "/api/v1/player/"+Alex+"?n="+strconv.Itoa(i), WithKey(KeyA)).Status })
	}
	be.Await(t, 4)
	Gateway{Upstream: be.Addr(), Legacy: legacy, Statusgate: lines(2)}.Start(t)
	refused := func(when string) {
		t.Helper()
		if r := Send(t, "GET", "/api/v1/player/"+Alex+"?more", WithKey(KeyA)); r.Status != 429 {
			t.Fatalf("%s: the key's next request got %d, want 429", when, r.Status)
		}
	}
	// answered lets n of the key's requests answer and waits until their
	// callers have the answers: the key's places are given back by then.
	answered := func(n int) {
		t.Helper()
		be.Let(n)
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
	be.Mark()
	wg.Go(func() { Send(t, "GET", "/api/v1/player/"+Alex+"?fifth", WithKey(KeyA)) })
	be.Await(t, 1)
	refused("2 open again, cap 2")
	be.Open()
	wg.Wait()
	if p, w := be.Peak.Load(), be.Worst.Load(); p > 4 || w > 2 {
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
	be := NewBackend(t)
	StartDefault(t, be)
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
			msg := LoadRefused(t, Gateway{Upstream: be.Addr(), Legacy: c.legacy, Statusgate: append([]string{"max_in_flight 4"}, c.lines...), Sites: []string{
				fmt.Sprintf("http://%s {\n\t%s\n}", addrB, StatusgateLines(be.Addr(), append([]string{"max_in_flight 6"}, c.lines...), nil, c.legacy)),
			}}.Caddyfile())
			wants := []string{"share a guard " + c.why + " but not its limits", ":" + strconv.Itoa(HTTPPort), ":" + strconv.Itoa(ports[0]), "max_in_flight 4", "max_in_flight 6"}
			if !c.legacy {
				wants = append(wants, "in front of "+be.Addr())
			}
			for _, want := range wants {
				if !strings.Contains(msg, want) {
					t.Errorf("the error lacks %q: %s", want, msg)
				}
			}
			if r := Send(t, "GET", "/api/v1/server", WithKey(KeyA)); r.Status != 200 {
				t.Errorf("the running config after the refused load: %d", r.Status)
			}
		})
	}
}

// TestFailedLoadLeavesLimits: a config that raises max_in_flight and then
// fails to load (its proxy cannot read its client certificate) leaves the
// running config's limit in force on the guard they share, in both forms.
func TestFailedLoadLeavesLimits(t *testing.T) { Forms(t, testFailedLoadLeavesLimits) }

func testFailedLoadLeavesLimits(t *testing.T, legacy bool) {
	be := NewGatedBackend(t)
	lines := func(limit int) []string {
		return []string{"key " + KeyA, "max_in_flight " + strconv.Itoa(limit), "queue 64 60s", "timeout off"}
	}
	// The running config's metrics: after a failed load, the admin API's
	// /metrics reads the failed config's registry (Caddy 2.11).
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	metricsSite := fmt.Sprintf("http://127.0.0.1:%d {\n\tmetrics\n}", ports[0])
	be.Metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0])
	Gateway{Upstream: be.Addr(), Legacy: legacy, Statusgate: lines(2), Sites: []string{metricsSite}}.Start(t)
	msg := LoadRefused(t, Gateway{Upstream: be.Addr(), Legacy: legacy, Statusgate: lines(8), Sites: []string{metricsSite},
		Transport: []string{"tls_client_auth /nonexistent/client.pem /nonexistent/client.key"}}.Caddyfile())
	if !strings.Contains(msg, "client.pem") {
		t.Fatalf("refused for another reason: %s", msg)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { Send(t, "GET", "/api/v1/player/"+Alex+"?n="+strconv.Itoa(i), WithKey(KeyA)) })
	}
	be.Await(t, 2)
	be.Queued(t, 4) // 2 at the backend, 2 waiting: the limit is still 2
	for range 2 {
		be.Let(1)
		be.Await(t, 1)
	}
	be.Open()
	wg.Wait()
	if p := be.Peak.Load(); p > 2 {
		t.Errorf("backend peak %d under the running config's max_in_flight 2", p)
	}
}
