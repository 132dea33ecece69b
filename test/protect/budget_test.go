package protect

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/internal/sim"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// A request's budget (timeout) bounds how long its caller waits, not how
// long the backend works: a caller whose budget ends gets its 504, and its
// request keeps its slot, its main-thread lane and its places until the
// backend answers (docs/backend-protection.md, "A trip counts until the
// backend is done").

// TestBudgetKeepsTheSlot: requests whose budget ends at the backend are
// answered 504 and keep their slot (or the main-thread lane) until the
// backend has answered them: nothing else reaches the backend meanwhile,
// not even a keyed request, and /metrics shows them kept. Once they are
// answered, a request of the same endpoint whose budget is shorter than
// those answers took is not sent at all. Before, the slots were given back
// with the 504, and every request after reached the backend beside them.
func TestBudgetKeepsTheSlot(t *testing.T) { Forms(t, testBudgetKeepsTheSlot) }

func testBudgetKeepsTheSlot(t *testing.T, legacy bool) {
	for _, c := range []struct {
		name   string
		target func(i int) string
		most   int // max_in_flight 2, max_main_thread 1
	}{
		{"player", PlayerN, 2},
		{"placeholders", func(i int) string {
			return "/api/v1/placeholders?uuid=" + Alex + "&p=%25n" + strconv.Itoa(i) + "%25"
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := NewGatedBackend(t)
			Gateway{Upstream: be.Addr(), Legacy: legacy, Shared: true, Statusgate: []string{
				"key " + KeyA, "timeout 300ms", "max_in_flight 2", "max_main_thread 1", "max_per_client off",
				"require_key placeholders off", "coalesce off",
			}, Global: []string{"log {\n\t\tlevel ERROR\n\t}"}}.Start(t)
			// The guard of the 1.0 form is the process's, and counts on
			// from the tests before.
			base, _ := ScrapeURL(t, AdminURL+"/metrics")
			answered := `caddy_http_statusgate_backend_trips_kept_total{end="answered",guard=""}`
			unsent := `caddy_http_statusgate_backend_requests_unsent_total{guard=""}`
			// The first requests reach the backend, which does not answer,
			// and their budget ends.
			answers := make(chan Response, c.most)
			for i := range c.most {
				go func() { answers <- Send(t, "GET", c.target(i)) }()
			}
			be.Await(t, c.most)
			for range c.most {
				if r := fixture.Recv(t, answers, "an answer at the budget's end"); r.Status != http.StatusGatewayTimeout {
					t.Errorf("a request at the backend past its budget: %d %s, want 504", r.Status, Clip(r.Body))
				}
			}
			// Their places are still the backend's: neither an anonymous
			// request nor a keyed one reaches it, and each is answered
			// 504 when its own budget ends.
			for i, headers := range [][]string{nil, {WithKey(KeyA)}} {
				target := c.target(10 + i)
				if r := Send(t, "GET", target, headers...); r.Status != http.StatusGatewayTimeout {
					t.Errorf("%s beside the kept trips: %d %s, want 504", target, r.Status, Clip(r.Body))
				}
			}
			if p := be.Peak.Load(); p != int32(c.most) {
				t.Errorf("the backend held %d requests at once, want %d: a slot was given back with its caller's 504", p, c.most)
			}
			m, _ := ScrapeURL(t, AdminURL+"/metrics")
			if got := m[`caddy_http_statusgate_backend_trips_kept{guard=""}`]; got != float64(c.most) {
				t.Errorf("backend_trips_kept %v, want %d", got, c.most)
			}
			// The backend answers: the places are back, the trips counted.
			be.Let(c.most)
			fixture.WaitFor(t, "the kept trips answered", func() bool {
				m, _ := ScrapeURL(t, AdminURL+"/metrics")
				return m[`caddy_http_statusgate_backend_trips_kept{guard=""}`] == 0 &&
					m[`caddy_http_statusgate_backend_requests_in_flight{guard=""}`] == 0 &&
					m[answered]-base[answered] == float64(c.most)
			})
			// Those answers took longer than a whole budget: a request of
			// the endpoint could not get its answer in time, and is not
			// sent.
			target := c.target(20)
			if r := Send(t, "GET", target); r.Status != http.StatusGatewayTimeout {
				t.Errorf("%s after answers slower than its budget: %d %s, want 504", target, r.Status, Clip(r.Body))
			}
			m, _ = ScrapeURL(t, AdminURL+"/metrics")
			if got := m[unsent] - base[unsent]; got != 1 {
				t.Errorf("backend_requests_unsent_total %v, want 1", got)
			}
			select {
			case uri := <-be.Entered:
				t.Errorf("%s reached the backend", uri)
			default:
			}
			// Another endpoint, whose answers come in time, is served.
			be.Open()
			if r := Send(t, "GET", "/api/v1/server", WithKey(KeyA)); r.Status != http.StatusOK {
				t.Errorf("/server: %d %s", r.Status, Clip(r.Body))
			}
		})
	}
}

// TestSlowAnswersShorterBudget is the attack of issue 50 on the demo
// backend (internal/sim, with the plugin's latencies: an offline player
// 425 ms to 1.4 s, /placeholders 50 ms to 2 s on the main thread): with a
// timeout of 1 s and of 2 s, 16 anonymous clients that each wait for
// random players and 4 that wait for /placeholders keep the backend at or
// below max_in_flight, and /placeholders at or below max_main_thread, and
// the staff key's /server is answered 200 throughout. Before, with 1 s,
// the plugin held 110 requests at once against max_in_flight 8.
func TestSlowAnswersShorterBudget(t *testing.T) {
	for _, timeout := range []string{"1s", "2s"} {
		t.Run(timeout, func(t *testing.T) {
			name := "budget-" + timeout
			simSite, upstream := SimSite(t, "name "+name)
			Gateway{Upstream: upstream, Shared: true, Sites: []string{simSite},
				Statusgate: []string{"key staff " + KeyA, "timeout " + timeout, "max_per_client off", "require_key placeholders off"},
				Global:     []string{"log {\n\t\tlevel ERROR\n\t}"}}.Start(t)
			stats := sim.Lookup(name)
			if stats == nil {
				t.Fatal("the sim's counters are not registered")
			}
			const rounds = 5
			var wg sync.WaitGroup
			statuses := make(chan int, 20*rounds)
			for c := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						target := fmt.Sprintf("/api/v1/player/%08x-0000-4000-8000-%012x", rand.Uint32(), rand.Uint64()&(1<<48-1))
						if c >= 16 {
							target = "/api/v1/placeholders?uuid=" + Alex + "&p=%25n" + strconv.Itoa(rand.IntN(1e6)) + "%25"
						}
						statuses <- Send(t, "GET", target).Status
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			staff, failed := 0, 0
			for flooding := true; flooding; {
				select {
				case <-done:
					flooding = false
				default:
				}
				r := Send(t, "GET", "/api/v1/server", WithKey(KeyA))
				staff++
				if r.Status != http.StatusOK {
					failed++
					t.Errorf("the staff key's /server during the flood: %d %s", r.Status, Clip(r.Body))
				}
			}
			close(statuses)
			seen := map[int]int{}
			for s := range statuses {
				seen[s]++
			}
			snap := stats.Snapshot()
			t.Logf("timeout %s: anonymous answers %v; staff %d of %d 200; backend peak %d (queued %d), placeholders peak %d, main-thread pending peak %d",
				timeout, seen, staff-failed, staff, snap.PeakInFlight, snap.PeakQueued, snap.Stations["placeholders"].PeakInFlight, snap.MainThread.PeakPending)
			if snap.PeakInFlight > 8 {
				t.Errorf("the backend held %d requests at once, want at most max_in_flight 8", snap.PeakInFlight)
			}
			if p := snap.Stations["placeholders"].PeakInFlight; p > 1 {
				t.Errorf("the backend held %d /placeholders at once, want at most max_main_thread 1", p)
			}
			if seen[0] > 0 {
				t.Errorf("%d anonymous requests got no answer", seen[0])
			}
		})
	}
}
