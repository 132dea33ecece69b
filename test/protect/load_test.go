package protect

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestConcurrentCallers runs 32 callers at once, each mixing anonymous and
// keyed requests to player and a custom station, and checks that no response carries
// another caller's treatment: every anonymous one filtered (or hidden), every
// keyed one the backend's bytes, and the backend asked accordingly.
func TestConcurrentCallers(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be, "enable custom/votes")
	const callers, rounds = 32, 16
	// Each request its own at the backend: a player of its own, and the
	// query of a custom station (which keeps it).
	player := func(n int) string { return PlayerN(n) + "?detailed=true" }
	votes := "/api/v1/custom/votes?tag="

	var mu sync.Mutex
	anonSeen, keyedSeen := []string{}, []string{} // what the backend should have got
	expect := func(list *[]string, uri string) {
		mu.Lock()
		*list = append(*list, uri)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for j := range rounds {
				tag := fmt.Sprintf("c%d-%d", i, j)
				switch (i + j) % 4 {
				case 0:
					WantFiltered(t, Send(t, "GET", player(i*rounds+j)), player(i*rounds+j), PlayerFields...)
					expect(&anonSeen, player(i*rounds+j))
				case 1:
					WantBackendBytes(t, Send(t, "GET", player(i*rounds+j), WithKey(KeyA)), player(i*rounds+j))
					expect(&keyedSeen, player(i*rounds+j))
				case 2:
					WantNotFound(t, Send(t, "GET", votes+tag), votes+tag)
				case 3:
					WantBackendBytes(t, Send(t, "GET", votes+tag, WithKey(KeyA)), votes+tag)
					expect(&keyedSeen, votes+tag)
				}
			}
		})
	}
	wg.Wait()

	var gotAnon, gotKeyed []string
	for _, s := range be.Take() {
		if s.Header.Get("Accept-Encoding") == "identity" {
			gotAnon = append(gotAnon, s.RequestURI)
		} else {
			gotKeyed = append(gotKeyed, s.RequestURI)
		}
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"filtered (Accept-Encoding identity)", gotAnon, anonSeen}, {"keyed", gotKeyed, keyedSeen}} {
		slices.Sort(c.got)
		slices.Sort(c.want)
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s requests at the backend: got %d, want %d", c.what, len(c.got), len(c.want))
		}
	}
	if n := callers * rounds * 3 / 4; len(gotAnon)+len(gotKeyed) != n {
		t.Errorf("the backend got %d requests, want %d", len(gotAnon)+len(gotKeyed), n)
	}
}

// TestKeyRotationUnderLoad rotates the keys with a config reload while eight
// callers hammer with the key that stays: config A has keys A and B, config B
// has B and C. No request with B may be refused or answered wrongly;
// afterwards A is refused and C accepted.
func TestKeyRotationUnderLoad(t *testing.T) {
	be := NewBackend(t)
	g := Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "key " + KeyB}}
	g.Start(t)
	server := "/api/v1/server"
	check := func(when string, accepted, refused string) {
		t.Helper()
		WantBackendBytes(t, Send(t, "GET", server, WithKey(accepted)), server)
		WantNotFound(t, Send(t, "GET", server, WithKey(refused)), server)
		be.WantSeen(t, when, server)
	}
	check("before the reload", KeyA, KeyC)

	want := BackendBody(server)
	var before, after, failures, unanswered atomic.Int64
	var reloaded atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				done := reloaded.Load()
				r := Send(t, "GET", server, WithKey(KeyB))
				for try := 1; r.Status == 0 && try <= 3; try++ {
					// No response at all: Caddy's listener handover on a
					// reload resets connections still queued on the old
					// socket (plain Caddy does it too). A client retries
					// an idempotent GET; every answer must be right. A
					// connection the old server accepted after the new
					// config took over is the new config's to answer
					// (docs/operating.md, "Reloads"): never a refusal.
					unanswered.Add(1)
					r = Send(t, "GET", server, WithKey(KeyB))
				}
				if r.Status != 200 || r.Err != nil || !bytes.Equal(r.Body, want) {
					if failures.Add(1) <= 3 {
						t.Errorf("key B during the rotation: %d %s (err %v)", r.Status, Clip(r.Body), r.Err)
					}
				}
				if done {
					after.Add(1)
				} else {
					before.Add(1)
				}
			}
		})
	}
	// At least 50 requests on each side of the reload, counted, not timed.
	atLeast := func(n *atomic.Int64, what string) {
		t.Helper()
		for deadline := time.Now().Add(Patience); n.Load() < 50; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("key B: %d requests %s, want 50", n.Load(), what)
			}
		}
	}
	atLeast(&before, "before the reload")
	g.Statusgate = []string{"key " + KeyB, "key " + KeyC}
	g.Start(t)
	reloaded.Store(true)
	atLeast(&after, "after the reload")
	close(stop)
	wg.Wait()
	be.Take()

	t.Logf("key B: %d requests before the reload finished, %d after, %d failed; %d connections unanswered, retried",
		before.Load(), after.Load(), failures.Load(), unanswered.Load())
	if failures.Load() != 0 {
		t.Errorf("key B: %d failures; %d requests before, %d after the reload", failures.Load(), before.Load(), after.Load())
	}
	check("after the reload", KeyC, KeyA)
	WantBackendBytes(t, Send(t, "GET", server, WithKey(KeyB)), server)
	be.WantSeen(t, "key B after the reload", server)
}
