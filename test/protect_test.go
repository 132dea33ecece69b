package test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/mholt/caddy-ratelimit"

	"github.com/statusgate/statusgate/internal/fixture"
)

// concurrently sends each request at once and returns the responses in order.
func concurrently(t *testing.T, n int, req func(i int) response) []response {
	t.Helper()
	out := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = req(i) })
	}
	wg.Wait()
	return out
}

// heldTogether sends n requests at once while the backend holds its answers
// (holdAnswers), and lets the answers go once every caller is where it is
// going to be: at the backend, waiting to share a trip (the coalesce_waiting
// gauge of every guard), or answered (refused, or out of the queue). It
// returns the responses in order. However slow the machine, no caller comes
// after a trip it should have shared has ended, as one could after
// sendSlow's 1.5 s.
func heldTogether(t *testing.T, be *backend, n int, req func(i int) response) []response {
	t.Helper()
	be.holdAnswers()
	defer be.release()
	out := make([]response, n)
	var answered atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			out[i] = req(i)
			answered.Add(1)
		})
	}
	fixture.WaitFor(t, fmt.Sprintf("%d callers at the backend, sharing a trip or answered", n), func() bool {
		return be.atBackend()+coalesceWaiting(t)+int(answered.Load()) >= n
	})
	be.release()
	wg.Wait()
	return out
}

// coalesceWaiting is how many callers wait to share a trip, in every guard.
func coalesceWaiting(t *testing.T) int {
	t.Helper()
	got, _ := scrapeAdmin(t)
	waiting := 0
	for series, v := range got {
		if strings.HasPrefix(series, "caddy_http_statusgate_coalesce_waiting{") {
			waiting += int(v)
		}
	}
	return waiting
}

// sharedByClass sends 2×each callers of one player record at once to a slow
// backend, every other one with the headers of the filtered class and the
// rest with those of the whole class, and checks that each got its class's
// answer (the filtered document, or the backend's bytes) and that each class
// made one trip to the backend.
func sharedByClass(t *testing.T, be *backend, target string, each int, filtered, whole []string) {
	t.Helper()
	out := heldTogether(t, be, 2*each, func(i int) response {
		if i%2 == 0 {
			return send(t, "GET", target, filtered...)
		}
		return send(t, "GET", target, whole...)
	})
	for i, r := range out {
		if i%2 == 0 {
			wantFiltered(t, r, target, playerFields...)
		} else {
			wantBackendBytes(t, r, target)
		}
	}
	if seen := be.take(); len(seen) != 2 {
		t.Errorf("%d callers in two classes made %d trips to the backend, want 2", 2*each, len(seen))
	}
}

// TestSharingIsolation runs anonymous and keyed callers of one slow player
// record at once with the defaults (coalescing and the micro-cache on): each
// class makes one trip to the backend, every anonymous caller gets the
// filtered document and every keyed caller the backend's bytes. After a reload
// that revokes key A, a key-A caller is anonymous again and never gets what was
// shared or cached for keyed callers before.
func TestSharingIsolation(t *testing.T) {
	be := newBackend(t)
	g := gateway{upstream: be.addr(), statusgate: []string{"key " + keyA}, shared: true}
	g.start(t)
	target := "/api/v1/player/" + alex
	sharedByClass(t, be, target, 12, nil, []string{withKey(keyA)})

	// status is cached for a second by default, per class.
	status := "/api/v1/status"
	keyed := send(t, "GET", status, withKey(keyA))
	wantBackendBytes(t, keyed, status)
	for range 3 {
		wantFiltered(t, send(t, "GET", status), status)
		wantBackendBytes(t, send(t, "GET", status, withKey(keyA)), status)
	}
	if seen := be.take(); len(seen) != 2 {
		t.Errorf("seven status calls in two classes within the time to live made %d trips, want 2", len(seen))
	}

	g.statusgate = []string{"key " + keyB}
	g.start(t)
	for _, r := range []response{send(t, "GET", status, withKey(keyA)), send(t, "GET", target, withKey(keyA))} {
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"authenticated":false`) {
			t.Errorf("revoked key after the reload: %d %s", r.Status, clip(r.Body))
		}
	}
	wantFiltered(t, send(t, "GET", target, withKey(keyA)), target, playerFields...)
}

// TestBackendBusy fills a backend limited to one request at a time: the next
// caller waits its turn in a queue of one, the one after is refused at once,
// and the waiting one is refused when the queue wait ends; the backend sees one
// request.
func TestBackendBusy(t *testing.T) {
	be := newBackend(t)
	gateway{upstream: be.addr(), statusgate: []string{"key " + keyA, "max_in_flight 1", "queue 1 300ms"}}.start(t)
	out := heldTogether(t, be, 3, func(i int) response {
		return send(t, "GET", "/api/v1/server", withKey(keyA))
	})
	ok, busy := 0, 0
	for _, r := range out {
		switch r.Status {
		case http.StatusOK:
			ok++
		case http.StatusServiceUnavailable:
			busy++
			if r.Header.Get("Retry-After") != "1" {
				t.Errorf("503 without Retry-After 1: %v", r.Header)
			}
			r.Header.Del("Retry-After")
			wantError(t, r, http.StatusServiceUnavailable, "/api/v1/server")
		}
	}
	if ok != 1 || busy != 2 {
		t.Errorf("%d answered, %d busy; want 1 and 2", ok, busy)
	}
	if seen := be.take(); len(seen) != 1 {
		t.Errorf("backend saw %d requests, want 1", len(seen))
	}

	// With the queue off the next caller is refused at once: before the
	// first one's answer comes (held until the refusal is in), where a
	// queued one would get it after.
	gateway{upstream: be.addr(), statusgate: []string{"key " + keyA, "max_in_flight 1", "queue off"}}.start(t)
	var order atomic.Int32
	var answered [2]int32
	out = heldTogether(t, be, 2, func(i int) response {
		defer func() { answered[i] = order.Add(1) }()
		return send(t, "GET", "/api/v1/server", withKey(keyA))
	})
	busy = 0
	for i, r := range out {
		if r.Status != http.StatusServiceUnavailable {
			continue
		}
		busy++
		if answered[i] != 1 || r.Header.Get("Retry-After") != "1" {
			t.Errorf("queue off: 503 answered %d of 2 with Retry-After %q, want first and 1", answered[i], r.Header.Get("Retry-After"))
		}
		r.Header.Del("Retry-After")
		wantError(t, r, http.StatusServiceUnavailable, "/api/v1/server")
	}
	if seen := be.take(); busy != 1 || len(seen) != 1 {
		t.Errorf("queue off: %d of 2 callers busy and %d requests at the backend, want 1 and 1", busy, len(seen))
	}
}

// TestCacheOff checks with the defaults otherwise (coalescing and the
// micro-cache on) that status, cached for a second by default, reaches the
// backend on every call once its cache is off, or the whole micro-cache.
func TestCacheOff(t *testing.T) {
	be := newBackend(t)
	for _, line := range []string{"cache status off", "cache_size off"} {
		gateway{upstream: be.addr(), statusgate: []string{"key " + keyA, line}, shared: true}.start(t)
		for range 3 {
			wantFiltered(t, send(t, "GET", "/api/v1/status"), "/api/v1/status")
		}
		if seen := be.take(); len(seen) != 3 {
			t.Errorf("%s: three status calls made %d trips to the backend, want 3", line, len(seen))
		}
	}
}

// TestTimeoutBudget checks that a backend slower than the budget is answered
// with the 504 envelope.
func TestTimeoutBudget(t *testing.T) {
	be := newBackend(t)
	gateway{upstream: be.addr(), statusgate: []string{"key " + keyA, "timeout 300ms"}}.start(t)
	be.misbehave(sendSlow)
	r := send(t, "GET", "/api/v1/server", withKey(keyA))
	be.misbehave(behave)
	wantError(t, r, http.StatusGatewayTimeout, "/api/v1/server")
}

// TestRateLimitComposition puts caddy-ratelimit between the gateway and
// reverse_proxy, as docs/backend-protection.md shows: past the zone's events a caller gets the
// gateway's 429 envelope with Retry-After, and the backend sees only what the
// limit let through.
func TestRateLimitComposition(t *testing.T) {
	be := newBackend(t)
	gateway{
		upstream:   be.addr(),
		statusgate: []string{"key " + keyA},
		global:     []string{"log {\n\t\tlevel ERROR\n\t}", "order rate_limit after statusgate"},
		site:       []string{"rate_limit {\n\t\tzone per_client {\n\t\t\tkey {http.statusgate.client}\n\t\t\tevents 3\n\t\t\twindow 1m\n\t\t}\n\t}"},
	}.start(t)
	target := "/api/v1/player/" + alex
	for range 3 {
		wantFiltered(t, send(t, "GET", target), target, playerFields...)
	}
	r := send(t, "GET", target)
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("429 without a usable Retry-After: %q", ra)
	}
	r.Header.Del("Retry-After")
	wantError(t, r, http.StatusTooManyRequests, "/api/v1/player/"+alex)
	// A refused request is not counted by the gateway's own decisions: a 404
	// is still a 404, answered before the limiter.
	wantNotFound(t, send(t, "GET", "/api/v1/nope"), "/api/v1/nope")
	if seen := be.take(); len(seen) != 3 {
		t.Errorf("backend saw %d requests, want the 3 the limit let through", len(seen))
	}
}
