package protect

// Handlers in front of one server share the server's limits and counts,
// and each keeps the front door's choices: how many places one client may
// take, a request's budget, coalescing (docs/backend-protection.md, "The
// server's limits, and the front door's").

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestFrontDoorChoicesDiffer: a public site (max_per_client 1 and
// max_streams_per_client 1, no budget) and a staff site (no per-client
// bounds, a budget of 1s) in front of one
// server with max_in_flight 2 load together (before: refused, their limits
// disagreed). The public site refuses one client's second request, the
// staff site takes it; both count at the one guard, so the server never
// holds more than 2; the staff site's request that waits past its
// budget is its 504, while the public site's goes on; and one client gets
// one stream at the public site, and more at the staff site.
func TestFrontDoorChoicesDiffer(t *testing.T) {
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	staff := "localhost:" + strconv.Itoa(ports[0])
	be := NewGatedBackend(t)
	server := []string{"key " + KeyA, "max_in_flight 2", "queue 8 1m"}
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: append(server, "max_per_client 1", "timeout off", "max_streams_per_client 1"), Sites: []string{
		fmt.Sprintf("http://%s {\n\t%s\n}", staff, StatusgateLines(be.Addr(), append(server, "max_per_client off", "timeout 1s", "max_streams_per_client off"), nil, false)),
	}}.Start(t)
	staffGet := func(target string) Response {
		return SendRawTo(t, staff, "GET", "GET "+target+" HTTP/1.1\r\nHost: "+staff+"\r\nConnection: close\r\n\r\n")
	}
	public := make(chan Response, 1)
	go func() { public <- Send(t, "GET", PlayerN(1)) }()
	be.Await(t, 1)
	if r := Send(t, "GET", PlayerN(2)); r.Status != http.StatusTooManyRequests {
		t.Errorf("the public site's second request of one client: %d, want 429 (its max_per_client 1)", r.Status)
	}
	staffDone := make(chan Response, 2)
	go func() { staffDone <- staffGet(PlayerN(3)) }()
	be.Await(t, 1) // the staff site takes the client's second place
	go func() { staffDone <- staffGet(PlayerN(4)) }()
	// The server's two slots are taken: the staff site's second request
	// waits in the one queue, and its budget runs out there.
	for range 2 {
		r := fixture.Recv(t, staffDone, "the staff site's requests, past their budget")
		path := PlayerN(3)
		if r.Status == http.StatusGatewayTimeout && strings.Contains(string(r.Body), PlayerN(4)) {
			path = PlayerN(4)
		}
		WantError(t, r, http.StatusGatewayTimeout, path)
	}
	be.Open()
	if r := fixture.Recv(t, public, "the public site's request"); r.Status != 200 {
		t.Errorf("the public site's request, with no budget: %d", r.Status)
	}
	// The staff site's trips outlive their 504s, holding the client's
	// places until the backend has answered them, which it now does.
	AwaitKeptTrips(t)
	// Streams: the public site's one per client, the staff site's as many
	// as it likes, counted at the one guard's seats.
	OpenLive(t, nil, "/api/v1/status").WantStream(t, "the public site's first stream")
	if r := OpenLive(t, nil, "/api/v1/status"); r.Resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the public site's second stream of one client: %d, want 429 (its max_streams_per_client 1)", r.Resp.StatusCode)
	}
	for i := range 3 {
		req, _ := http.NewRequest("GET", "http://"+staff+"/api/v1/status", nil)
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Errorf("the staff site's stream %d of the same client: %d, want a stream", i+2, res.StatusCode)
		}
	}
	if p := be.Peak.Load(); p > 2 {
		t.Errorf("the server held %d at once, above its max_in_flight 2", p)
	}
}
