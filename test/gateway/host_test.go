package gateway

// The Host the backend gets is the one its answers are shared under: a
// panel behind a catch-all site that routes by Host (a real Caddy, its
// sites' host matchers) never has one server's answers served as
// another's, whatever a client writes in its Host, plain or at a cached
// answer's stale edge, where the refresh is nobody's request.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// hostPanel is a Caddy panel in front of two game servers, on a port of the
// in-process Caddy: the site survival.test goes to survival, any other Host
// to the lobby (a catch-all site), as Caddy's host matcher compares Hosts.
// Every answer names its server and the trip that made it, counted across
// both.
type hostPanel struct {
	addr  string // the panel's host:port
	trips atomic.Int64
}

func newHostPanel(t *testing.T) (*hostPanel, []string) {
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	p := &hostPanel{addr: "127.0.0.1:" + strconv.Itoa(ports[0])}
	server := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := p.trips.Add(1)
			var data string
			switch r.URL.Path {
			case "/api/v1/worlds":
				data = fmt.Sprintf(`[{"name":"world","server":%q,"trip":%d}]`, name, n)
			case "/api/v1/status":
				data = fmt.Sprintf(`{"server":%q,"trip":%d,"online":[]}`, name, n)
			default:
				WriteBackend(w, http.StatusNotFound, ErrorEnvelope(http.StatusNotFound, "Not found", r.URL.Path))
				return
			}
			WriteBackend(w, http.StatusOK, Envelope(data))
		}))
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	survival, lobby := server("survival"), server("lobby")
	return p, []string{
		fmt.Sprintf("http://survival.test:%d {\n\treverse_proxy %s\n}", ports[0], survival),
		fmt.Sprintf("http://:%d {\n\treverse_proxy %s\n}", ports[0], lobby),
	}
}

// hostGet sends a GET of target to the gateway with the Host given.
func hostGet(t *testing.T, host, target string, headers ...string) Response {
	raw := "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n"
	for _, h := range headers {
		raw += h + "\r\n"
	}
	return SendRaw(t, "GET", raw+"Connection: close\r\n\r\n")
}

// answerOf is the server and the trip an answer of the panel names.
func answerOf(t *testing.T, what string, r Response) (server string, trip int64) {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if r.Err != nil || r.Status != 200 || json.Unmarshal(r.Body, &env) != nil {
		t.Fatalf("%s: %d %s (err %v)", what, r.Status, Clip(r.Body), r.Err)
	}
	var one struct {
		Server string `json:"server"`
		Trip   int64  `json:"trip"`
	}
	if json.Unmarshal(env.Data, &one) != nil {
		var many []struct {
			Server string `json:"server"`
			Trip   int64  `json:"trip"`
		}
		if json.Unmarshal(env.Data, &many) != nil || len(many) != 1 {
			t.Fatalf("%s: %s", what, Clip(r.Body))
		}
		one = many[0]
	}
	return one.Server, one.Trip
}

// TestHostAsSent: in front of a panel that routes by Host, behind a
// catch-all site, one request with Host survival.test. (or SURVIVAL.TEST.,
// or with a port) gets survival's answers, and honest survival.test
// callers, anonymous or keyed, get survival's answers after it, from the
// cache. Before, the share key dropped the trailing dot but the Host sent
// kept it, and the panel's host matcher, comparing it as written, sent it to
// the lobby: survival's callers then got the lobby's /status and /worlds
// for as long as they were cached.
func TestHostAsSent(t *testing.T) {
	Forms(t, func(t *testing.T, legacy bool) {
		panel, sites := newHostPanel(t)
		Gateway{Upstream: panel.addr, Legacy: legacy, Shared: true, Sites: sites,
			Statusgate: []string{"key " + KeyA, "cache status 1h", "snapshot status off", "cache worlds 1h"}}.Start(t)
		for _, host := range []string{"survival.test.", "SURVIVAL.TEST.", "Survival.Test:8443", "survival.test.:80"} {
			for _, c := range []struct{ target, key string }{{"/api/v1/status", ""}, {"/api/v1/worlds", WithKey(KeyA)}, {"/api/v1/status", WithKey(KeyA)}} {
				var headers []string
				if c.key != "" {
					headers = append(headers, c.key)
				}
				if server, _ := answerOf(t, host+" "+c.target, hostGet(t, host, c.target, headers...)); server != "survival" {
					t.Errorf("Host %s, %s %s: %s's answer, want survival's", host, c.target, c.key, server)
				}
				if server, _ := answerOf(t, "survival.test "+c.target, hostGet(t, "survival.test", c.target, headers...)); server != "survival" {
					t.Errorf("after Host %s, an honest survival.test caller of %s %s got %s's answer", host, c.target, c.key, server)
				}
			}
		}
		if server, _ := answerOf(t, "lobby.test", hostGet(t, "lobby.test", "/api/v1/status")); server != "lobby" {
			t.Errorf("lobby.test: %s's answer", server)
		}
	})
}

// TestHostAsSentStaleEdge: the same at a cached answer's stale edge, where
// a request that finds the entry stale gets it and starts its refresh:
// the refresh carries nothing of that caller's request (before, it carried
// its Host, survival.test., and stored the lobby's answer under
// survival's), and every honest caller after it gets survival's answers.
// The refresh is told by the trip number in the answers.
func TestHostAsSentStaleEdge(t *testing.T) {
	Forms(t, func(t *testing.T, legacy bool) {
		panel, sites := newHostPanel(t)
		Gateway{Upstream: panel.addr, Legacy: legacy, Shared: true, Sites: sites,
			Statusgate: []string{"key " + KeyA, "cache status 50ms", "snapshot status off"}}.Start(t)
		if server, _ := answerOf(t, "the first honest caller", hostGet(t, "survival.test", "/api/v1/status")); server != "survival" {
			t.Fatalf("the first honest caller got %s's answer", server)
		}
		first := panel.trips.Load()
		// The attacker asks until its request reaches the panel: the
		// refresh of the entry it found stale (or, on a machine slow past
		// the stale grace, a trip of its own).
		deadline := time.Now().Add(Patience)
		for panel.trips.Load() == first {
			if server, _ := answerOf(t, "survival.test.", hostGet(t, "survival.test.", "/api/v1/status")); server != "survival" {
				t.Fatalf("Host survival.test. got %s's answer", server)
			}
			if time.Now().After(deadline) {
				t.Fatal("no request of the attacker reached the panel")
			}
		}
		// Every honest caller gets survival's answers, until one of them
		// is the answer the attacker's request made (or a later one).
		for {
			server, trip := answerOf(t, "survival.test", hostGet(t, "survival.test", "/api/v1/status"))
			if server != "survival" {
				t.Fatalf("after the attacker's refresh, an honest survival.test caller got %s's answer (trip %d)", server, trip)
			}
			if trip > first {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the answer of the attacker's trip never reached an honest caller")
			}
		}
	})
}

// TestRefreshCarriesNoCallersValues: behind a backend that records what it
// gets, a cached answer's refresh is the request the caller's trip of the
// same key was, but for the caller's own: the same target and Host (the
// Host sent: a client's SURVIVAL.TEST.:8080 is survival.test), the same
// X-Forwarded-Host and X-Forwarded-Proto (reverse_proxy's, never a
// client's), none of the caller's other headers and not its address
// (X-Forwarded-For names the gateway). Before, the refresh was a copy of
// the request of the caller who found the entry stale, its Host, headers
// and address included.
func TestRefreshCarriesNoCallersValues(t *testing.T) {
	type seen struct {
		host   string
		header http.Header
	}
	got := make(chan seen, 100)
	// Every trip after the first is held until the test frees it: a
	// refresh, which the caller who found the entry stale does not wait
	// for, is told from a caller's own trip by that caller's answer coming
	// while the trip is held.
	var trips atomic.Int32
	free, closing := make(chan struct{}), make(chan struct{})
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Host, r.Header.Clone()}
		if trips.Add(1) > 1 {
			select {
			case <-free:
			case <-closing:
			case <-r.Context().Done():
			}
		}
		WriteBackend(w, http.StatusOK, Envelope(`{"online":[],"minecraft":1,"discord":null}`))
	}))
	t.Cleanup(be.Close)
	t.Cleanup(func() { close(closing) })
	// The caller comes through a trusted proxy (loopback), whose
	// X-Forwarded-For names the client.
	Gateway{Upstream: be.Listener.Addr().String(), Shared: true, Statusgate: []string{"key " + KeyA, "cache status 50ms", "snapshot status off"},
		Global: []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\ttrusted_proxies static private_ranges\n\t}"}}.Start(t)
	caller := []string{"Cookie: session=caller", "X-Forwarded-For: 198.51.100.9", "X-Forwarded-Host: evil.test", "X-Forwarded-Proto: gopher",
		"User-Agent: the-caller", "Accept-Language: fr"}
	get := func() Response { return hostGet(t, "SURVIVAL.TEST.:8080", "/api/v1/status", caller...) }
	if r := get(); r.Status != 200 {
		t.Fatalf("%d %s", r.Status, Clip(r.Body))
	}
	trip := fixture.Recv(t, got, "the caller's trip")
	if trip.host != "survival.test" || trip.header.Get("X-Forwarded-Host") != "survival.test" || trip.header.Get("X-Forwarded-Proto") != "http" ||
		trip.header.Get("X-Forwarded-For") != "198.51.100.9, 127.0.0.1" {
		t.Errorf("the caller's trip: Host %q, X-Forwarded-Host %q, -Proto %q, -For %q, want survival.test, survival.test, http, 198.51.100.9, 127.0.0.1",
			trip.host, trip.header.Get("X-Forwarded-Host"), trip.header.Get("X-Forwarded-Proto"), trip.header.Get("X-Forwarded-For"))
	}
	// Callers ask until the entry, stale, is refreshed: the next trip. A
	// trip whose caller waits for it (a pause past the stale grace on a
	// busy machine left the entry expired) is that caller's own, not a
	// refresh: freed, and the callers ask on.
	deadline := time.Now().Add(3 * Patience)
	var refresh seen
	for refresh.header == nil {
		answered := make(chan Response, 1)
		go func() { answered <- get() }()
		var r Response
		select {
		case r = <-answered:
		case tr := <-got:
			select {
			case r = <-answered:
				refresh = tr // answered while the trip is held: not its trip
			case <-time.After(Patience):
				free <- struct{}{} // the caller's own trip
				r = <-answered
			}
		}
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, Clip(r.Body))
		}
		if time.Now().After(deadline) {
			t.Fatal("no refresh reached the backend")
		}
	}
	free <- struct{}{}
	if refresh.host != trip.host {
		t.Errorf("the refresh's Host %q, the caller's trip's %q", refresh.host, trip.host)
	}
	for _, name := range []string{"X-Forwarded-Host", "X-Forwarded-Proto", "Accept-Encoding"} {
		if refresh.header.Get(name) != trip.header.Get(name) {
			t.Errorf("the refresh's %s %q, the caller's trip's %q", name, refresh.header.Get(name), trip.header.Get(name))
		}
	}
	for _, name := range []string{"Cookie", "User-Agent", "Accept-Language"} {
		if v, ok := refresh.header[name]; ok {
			t.Errorf("the refresh carried the caller's %s: %q", name, v)
		}
	}
	if xff := refresh.header.Get("X-Forwarded-For"); xff != "127.0.0.1" {
		t.Errorf("the refresh's X-Forwarded-For %q, want the gateway's own 127.0.0.1", xff)
	}
}
