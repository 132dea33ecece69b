package protect

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestRenamedGuardKeepsCounting: a reload that names the guard of a full
// backend otherwise (max_in_flight 2, 2 keyed callers at the backend and 4
// in the queue): its upstream re-spelled as localhost:<port>, or guard
// <name> added, as the docs advise before a move. The new config's handler
// takes the old guard over, with its counts: 4 callers after the reload
// wait behind the old ones, and the backend never holds more than 2.
// Before, the new name was a guard at zero beside the old one, and the
// backend got 4 (the flood: 16 against 8).
func TestRenamedGuardKeepsCounting(t *testing.T) {
	for _, c := range []struct {
		name  string
		guard string // the new config's guard name, as the metrics label it
		lines func(be *GatedBackend) (upstream string, extra []string)
	}{
		{"localhost", "", func(be *GatedBackend) (string, []string) {
			_, port, _ := net.SplitHostPort(be.Addr())
			return "localhost:" + port, nil
		}},
		{"guard name added", "survival", func(be *GatedBackend) (string, []string) {
			return be.Addr(), []string{"guard survival"}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := NewGatedBackend(t)
			lines := []string{"key " + KeyA, "max_in_flight 2", "queue 64 60s", "timeout off"}
			Gateway{Upstream: be.Addr(), Statusgate: lines}.Start(t)
			var wg sync.WaitGroup
			send := func(tag string, n int) {
				for i := range n {
					wg.Go(func() { Send(t, "GET", "/api/v1/player/"+Alex+"?"+tag+"="+strconv.Itoa(i), WithKey(KeyA)) })
				}
			}
			send("old", 6)
			be.Await(t, 2)
			be.Queued(t, 6)
			upstream, extra := c.lines(be)
			Gateway{Upstream: upstream, Statusgate: append(append([]string{}, lines...), extra...)}.Start(t)
			send("new", 4)
			// The new callers wait behind the old (the guard's queue, under
			// the new config's label), or, in a guard of their own, reach
			// the backend beside them.
			queued := fmt.Sprintf(`caddy_http_statusgate_backend_requests_queued{class="keyed",guard=%q}`, c.guard)
			fixture.WaitFor(t, "the new callers queued behind the old", func() bool {
				got, _ := ScrapeURL(t, AdminURL+"/metrics")
				return int(got[queued])+int(be.InFlight.Load()) == 10 || be.InFlight.Load() > 2
			})
			for range 8 {
				be.Let(1)
				be.Await(t, 1)
			}
			be.Open()
			wg.Wait()
			if p := be.Peak.Load(); p > 2 {
				t.Errorf("backend peak %d with max_in_flight 2 through a reload that renamed the guard (%s)", p, c.name)
			}
		})
	}
}
