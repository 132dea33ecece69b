package protect

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/mholt/caddy-ratelimit"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// concurrently sends each request at once and returns the responses in order.
func concurrently(t *testing.T, n int, req func(i int) Response) []Response {
	t.Helper()
	out := make([]Response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = req(i) })
	}
	wg.Wait()
	return out
}

// TestSharingIsolation runs anonymous and keyed callers of one slow player
// record at once with the defaults (coalescing and the micro-cache on): each
// class makes one trip to the backend, every anonymous caller gets the
// filtered document and every keyed caller the backend's bytes. After a reload
// that revokes key A, a key-A caller is anonymous again and never gets what was
// shared or cached for keyed callers before.
func TestSharingIsolation(t *testing.T) {
	be := NewBackend(t)
	g := Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA}, Shared: true}
	g.Start(t)
	target := "/api/v1/player/" + Alex
	SharedByClass(t, be, target, 12, nil, []string{WithKey(KeyA)})

	// status is cached for a second by default, per class.
	status := "/api/v1/status"
	keyed := Send(t, "GET", status, WithKey(KeyA))
	WantBackendBytes(t, keyed, status)
	for range 3 {
		WantFiltered(t, Send(t, "GET", status), status)
		WantBackendBytes(t, Send(t, "GET", status, WithKey(KeyA)), status)
	}
	if seen := be.Take(); len(seen) != 2 {
		t.Errorf("seven status calls in two classes within the time to live made %d trips, want 2", len(seen))
	}

	g.Statusgate = []string{"key " + KeyB}
	g.Start(t)
	for _, r := range []Response{Send(t, "GET", status, WithKey(KeyA)), Send(t, "GET", target, WithKey(KeyA))} {
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"authenticated":false`) {
			t.Errorf("revoked key after the reload: %d %s", r.Status, Clip(r.Body))
		}
	}
	WantFiltered(t, Send(t, "GET", target, WithKey(KeyA)), target, PlayerFields...)
}

// TestBackendBusy fills a backend limited to one request at a time: the next
// caller waits its turn in a queue of one, the one after is refused at once,
// and the waiting one is refused when the queue wait ends; the backend sees one
// request.
func TestBackendBusy(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "max_in_flight 1", "queue 1 300ms"}}.Start(t)
	out := HeldTogether(t, be, 3, func(i int) Response {
		return Send(t, "GET", "/api/v1/server", WithKey(KeyA))
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
			WantError(t, r, http.StatusServiceUnavailable, "/api/v1/server")
		}
	}
	if ok != 1 || busy != 2 {
		t.Errorf("%d answered, %d busy; want 1 and 2", ok, busy)
	}
	if seen := be.Take(); len(seen) != 1 {
		t.Errorf("backend saw %d requests, want 1", len(seen))
	}

	// With the queue off the next caller is refused at once: before the
	// first one's answer comes (held until the refusal is in), where a
	// queued one would get it after.
	Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "max_in_flight 1", "queue off"}}.Start(t)
	var order atomic.Int32
	var answered [2]int32
	out = HeldTogether(t, be, 2, func(i int) Response {
		defer func() { answered[i] = order.Add(1) }()
		return Send(t, "GET", "/api/v1/server", WithKey(KeyA))
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
		WantError(t, r, http.StatusServiceUnavailable, "/api/v1/server")
	}
	if seen := be.Take(); busy != 1 || len(seen) != 1 {
		t.Errorf("queue off: %d of 2 callers busy and %d requests at the backend, want 1 and 1", busy, len(seen))
	}
}

// TestCacheOff checks with the defaults otherwise (coalescing and the
// micro-cache on) that status, cached for a second by default, reaches the
// backend on every call once its cache is off, or the whole micro-cache.
func TestCacheOff(t *testing.T) {
	be := NewBackend(t)
	for _, line := range []string{"cache status off", "cache_size off"} {
		Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, line}, Shared: true}.Start(t)
		for range 3 {
			WantFiltered(t, Send(t, "GET", "/api/v1/status"), "/api/v1/status")
		}
		if seen := be.Take(); len(seen) != 3 {
			t.Errorf("%s: three status calls made %d trips to the backend, want 3", line, len(seen))
		}
	}
}

// TestTimeoutBudget checks that a backend slower than the budget is answered
// with the 504 envelope.
func TestTimeoutBudget(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "timeout 300ms"}}.Start(t)
	be.Misbehave(SendSlow)
	r := Send(t, "GET", "/api/v1/server", WithKey(KeyA))
	be.Misbehave(Behave)
	WantError(t, r, http.StatusGatewayTimeout, "/api/v1/server")
}

// TestRateLimitComposition puts caddy-ratelimit between the gateway and
// reverse_proxy, as docs/backend-protection.md shows: past the zone's events a caller gets the
// gateway's 429 envelope with Retry-After, and the backend sees only what the
// limit let through.
func TestRateLimitComposition(t *testing.T) {
	be := NewBackend(t)
	Gateway{
		Upstream:   be.Addr(),
		Statusgate: []string{"key " + KeyA},
		Global:     []string{"log {\n\t\tlevel ERROR\n\t}", "order rate_limit after statusgate"},
		Site:       []string{"rate_limit {\n\t\tzone per_client {\n\t\t\tkey {http.statusgate.client}\n\t\t\tevents 3\n\t\t\twindow 1m\n\t\t}\n\t}"},
	}.Start(t)
	target := "/api/v1/player/" + Alex
	for range 3 {
		WantFiltered(t, Send(t, "GET", target), target, PlayerFields...)
	}
	r := Send(t, "GET", target)
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("429 without a usable Retry-After: %q", ra)
	}
	r.Header.Del("Retry-After")
	WantError(t, r, http.StatusTooManyRequests, "/api/v1/player/"+Alex)
	// A refused request is not counted by the gateway's own decisions: a 404
	// is still a 404, answered before the limiter.
	WantNotFound(t, Send(t, "GET", "/api/v1/nope"), "/api/v1/nope")
	if seen := be.Take(); len(seen) != 3 {
		t.Errorf("backend saw %d requests, want the 3 the limit let through", len(seen))
	}
}
