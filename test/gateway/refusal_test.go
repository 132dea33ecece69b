package gateway

// A refusal is its caller's own: an answer that refuses one caller's
// request is never shared with the callers who asked for the same answer
// at the same time.

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestRefusalNotCoalesced: a panel behind the gateway refuses a request
// with a bad credential of its own (401) or from a banned client (403),
// and holds that answer until two other callers of the same endpoint wait
// to share its trip: the refused caller gets the refusal, and each of the
// others the answer to its own request (before, the 401 and the 403 were
// shared with them).
func TestRefusalNotCoalesced(t *testing.T) {
	for _, c := range []struct {
		header string
		status int
	}{{"bad", http.StatusUnauthorized}, {"banned", http.StatusForbidden}} {
		arrived, release := make(chan struct{}, 1), make(chan struct{})
		var once sync.Once
		let := func() { once.Do(func() { close(release) }) }
		panel := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Panel-Auth") != c.header {
				WriteBackend(w, http.StatusOK, Envelope(`{"version":"1.21"}`))
				return
			}
			arrived <- struct{}{}
			<-release
			WriteBackend(w, c.status, ErrorEnvelope(c.status, http.StatusText(c.status), r.URL.Path))
		}))
		t.Cleanup(func() {
			let()
			panel.Close()
		})
		Gateway{Upstream: panel.Listener.Addr().String(), Shared: true, Statusgate: []string{"key " + KeyA, "max_per_client off"}}.Start(t)
		refused := make(chan Response, 1)
		go func() { refused <- Send(t, "GET", "/api/v1/server", WithKey(KeyA), "X-Panel-Auth: "+c.header) }()
		fixture.Recv(t, arrived, "the refused caller's trip at the panel")
		others := make([]chan Response, 2)
		for i := range others {
			others[i] = make(chan Response, 1)
			go func() { others[i] <- Send(t, "GET", "/api/v1/server", WithKey(KeyA)) }()
		}
		fixture.WaitFor(t, "two callers waiting to share the trip", func() bool { return CoalesceWaiting(t) == 2 })
		let()
		if r := fixture.Recv(t, refused, "the refused caller"); r.Status != c.status {
			t.Errorf("%s: the refused caller got %d %s", c.header, r.Status, Clip(r.Body))
		}
		for i, ch := range others {
			if r := fixture.Recv(t, ch, "a caller beside it"); r.Status != 200 {
				t.Errorf("%s: caller %d beside the refused one got %d %s, want the answer to its own request", c.header, i, r.Status, Clip(r.Body))
			}
		}
	}
}
