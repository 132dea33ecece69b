package gateway

// The request statusgate decided on is the request the backend gets
// (docs/configuration.md, "What may follow statusgate"): handlers after it
// may refuse it (a rate_limit), never change it, answer it or send it
// anywhere; the declared backend's placeholders are read on the client's
// request, and only what picks the server splits answers.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestGateCannotChangeTheRequest: a handler after a declared statusgate
// that changes what is sent (the Host a 1.0 route picked a server behind a
// panel with, a rewrite to another endpoint, a header) gets the caller the
// gateway's 502, and the backend nothing, where before the changed request
// went through: /creative's Host reached survival's cached answers, and the
// public /status carried the operator list.
func TestGateCannotChangeTheRequest(t *testing.T) {
	for _, c := range []struct {
		name, after, target string
		key                 bool
	}{
		{"request_header Host", "request_header Host survival.internal", "/api/v1/worlds", true},
		{"rewrite to a keyed endpoint", "rewrite /api/v1/status /api/v1/operators", "/api/v1/status", false},
		{"request_header of another header", "request_header X-Panel-Server creative", "/api/v1/status", false},
		{"method", "method POST", "/api/v1/status", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := NewBackend(t)
			Gateway{Routes: "route {\n\t\t" + strings.ReplaceAll(StatusgateLines(be.Addr(), []string{"key staff " + KeyA}, nil, false), "\n\t", "\n\t\t") +
				"\n\t\t" + c.after + "\n\t}"}.Start(t)
			var headers []string
			if c.key {
				headers = append(headers, WithKey(KeyA))
			}
			WantError(t, Send(t, "GET", c.target, headers...), http.StatusBadGateway, c.target)
			if seen := be.Take(); len(seen) != 0 {
				t.Errorf("the backend got %s, changed after statusgate decided", seen[0].RequestURI)
			}
		})
	}
}

// TestLeftoverReverseProxyReachesNothing: a migration left half done, the
// upstream on the statusgate line and the old reverse_proxy after it: the
// old upstream gets no request at all (before, every request went there
// first), and the caller gets 502.
func TestLeftoverReverseProxyReachesNothing(t *testing.T) {
	be, old := NewBackend(t), newServerBackend(t, "old")
	Gateway{Routes: StatusgateLines(be.Addr(), []string{"key " + KeyA}, nil, false) + "\n\treverse_proxy " + old.addr()}.Start(t)
	for _, key := range []string{"", KeyA} {
		var headers []string
		if key != "" {
			headers = append(headers, WithKey(key))
		}
		WantError(t, Send(t, "GET", "/api/v1/status", headers...), http.StatusBadGateway, "/api/v1/status")
	}
	if n := old.total(); n != 0 {
		t.Errorf("the leftover reverse_proxy's upstream got %d requests", n)
	}
	if n := len(be.Take()); n != 0 {
		t.Errorf("the declared backend was asked %d times", n)
	}
}

// TestMapOfTheQueryPicksTheBackend: a map of a query parameter that the
// endpoint does not read picks the upstream, as it does for a plain
// reverse_proxy: ?server=creative reaches creative (before, the parameter
// was cut before the map was read, and every request reached the default),
// and the two never share an answer.
func TestMapOfTheQueryPicksTheBackend(t *testing.T) {
	survival, creative := newServerBackend(t, "survival"), newServerBackend(t, "creative")
	mapping := fmt.Sprintf("map {query.server} {game} {\n\t\tcreative %s\n\t\tdefault %s\n\t}", creative.addr(), survival.addr())
	Gateway{Shared: true, Routes: mapping + "\n\t" + StatusgateLines("{game}", []string{"key staff " + KeyA}, nil, false)}.Start(t)
	for range 2 {
		wantServer(t, "?server=creative", Send(t, "GET", "/api/v1/status?server=creative"), "creative")
		wantServer(t, "no server", Send(t, "GET", "/api/v1/status"), "survival")
		wantServer(t, "?server=creative keyed", Send(t, "GET", "/api/v1/worlds?server=creative", WithKey(KeyA)), "creative")
	}
}

// TestTransportReloadKeepsTheCache: a reload that changes only a transport
// timeout of the proxy block keeps the backend's guard, its cache with it:
// two anonymous /status callers across it cost one trip (before: the
// reload named another backend, with an empty cache).
func TestTransportReloadKeepsTheCache(t *testing.T) {
	be := NewBackend(t)
	load := func(timeout string) {
		Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{"key " + KeyA, "cache status 1h"},
			Transport: []string{"response_header_timeout " + timeout}}.Start(t)
	}
	load("8s")
	WantFiltered(t, Send(t, "GET", "/api/v1/status"), "/api/v1/status")
	load("9s")
	WantFiltered(t, Send(t, "GET", "/api/v1/status"), "/api/v1/status")
	if n := len(be.Take()); n != 1 {
		t.Errorf("%d trips for two anonymous /status callers around a reload of a timeout, want 1", n)
	}
}

// TestUnsplitHeaderUp: a header_up of the client's address (a common
// habit) in the proxy block picks no server: 30 anonymous /status callers,
// each on a connection of its own (its own {remote}), cost one trip
// (before: 30).
func TestUnsplitHeaderUp(t *testing.T) {
	be := NewBackend(t)
	Gateway{Routes: StatusgateLines(be.Addr(), []string{"key " + KeyA, "max_per_client off"}, []string{"header_up X-Client-Address {remote}"}, false), Shared: true}.Start(t)
	for range 30 {
		WantFiltered(t, Send(t, "GET", "/api/v1/status"), "/api/v1/status")
	}
	if n := len(be.Take()); n != 1 {
		t.Errorf("%d trips for 30 anonymous /status callers with header_up X-Client-Address {remote}, want 1", n)
	}
}

// TestNoPlaceholderCarriesTheKey: a proxy block that would send the
// client's original target (with ?key=) or its key header upstream is
// refused at load, naming the placeholder; the running config stays.
func TestNoPlaceholderCarriesTheKey(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be)
	for _, p := range []string{"{http.request.orig_uri}", "{http.request.orig_uri.query}", "{http.request.header.X-API-Key}", "{query.key}"} {
		msg := LoadRefused(t, Gateway{Routes: StatusgateLines(be.Addr(), []string{"key " + KeyA, "allow_query_key"}, []string{"header_up X-Original " + p}, false)}.Caddyfile())
		if !strings.Contains(msg, "can carry the client's API key") {
			t.Errorf("%s: %s", p, msg)
		}
	}
	if r := Send(t, "GET", "/api/v1/status"); r.Status != 200 {
		t.Errorf("the running config after the refused loads: %d", r.Status)
	}
}

// TestTransportReloadKeepsTheCount: under a keyed flood held at
// max_in_flight 2, a reload that changes only a transport timeout keeps
// the guard and its count: the backend never holds more than 2 (before: a
// new guard beside the old one, and twice the limit).
func TestTransportReloadKeepsTheCount(t *testing.T) {
	be := NewGatedBackend(t)
	ReloadUnderFullGuard(t, be, "a transport timeout", func(first bool) {
		timeout := "59s"
		if first {
			timeout = "60s"
		}
		Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "max_in_flight 2", "queue 64 60s", "timeout off"},
			Transport: []string{"response_header_timeout " + timeout}}.Start(t)
	})
}

// TestUnnamedKeysAreTheirOwn: two sites in front of one backend, each with
// one unnamed key (both key-1 by their place) capped at one request: site
// B's key holding its one request open leaves site A's key its own (before,
// A's key got 429 with nothing open).
func TestUnnamedKeysAreTheirOwn(t *testing.T) {
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addrB := "localhost:" + strconv.Itoa(ports[0])
	be := NewGatedBackend(t)
	capped := func(key string) []string {
		return []string{"key " + key + " {\n\t\t\tmax_in_flight 1\n\t\t}", "timeout off"}
	}
	Gateway{Upstream: be.Addr(), Statusgate: capped(KeyA), Sites: []string{
		fmt.Sprintf("http://%s {\n\t%s\n}", addrB, StatusgateLines(be.Addr(), append(capped(KeyB), NoSharing...), nil, false)),
	}}.Start(t)
	held := make(chan Response, 1)
	go func() {
		held <- SendRawTo(t, addrB, "GET", "GET /api/v1/server?b HTTP/1.1\r\nHost: "+addrB+"\r\n"+WithKey(KeyB)+"\r\nConnection: close\r\n\r\n")
	}()
	be.Await(t, 1)
	a := make(chan Response, 1)
	go func() { a <- Send(t, "GET", "/api/v1/server?a", WithKey(KeyA)) }()
	be.Await(t, 1) // A's key reached the backend beside B's
	be.Open()
	if r := <-a; r.Status != 200 {
		t.Errorf("site A's key with nothing open: %d %s", r.Status, Clip(r.Body))
	}
	if r := <-held; r.Status != 200 {
		t.Errorf("site B's key: %d", r.Status)
	}
}

// TestNetworkConflictNamesTheServer: a handler in front of a server and
// another handler whose network lists that server, with other limits: the
// load is refused with a message that names the network's server and the
// handler it is listed in, and a fix that works (guard NAME does not
// apply to a network's servers).
func TestNetworkConflictNamesTheServer(t *testing.T) {
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	lobby, hub := newServerBackend(t, "lobby"), newServerBackend(t, "hub")
	StartDefault(t, NewBackend(t))
	addrB := "localhost:" + strconv.Itoa(ports[0])
	network := fmt.Sprintf("network main {\n\t\t\tserver hub %s\n\t\t\tserver lobby %s\n\t\t\tself hub\n\t\t}", hub.addr(), lobby.addr())
	msg := LoadRefused(t, Gateway{Upstream: hub.addr(), Statusgate: []string{"key " + KeyA, "enable network", network, "max_in_flight 4"}, Sites: []string{
		fmt.Sprintf("http://%s {\n\t%s\n}", addrB, StatusgateLines(lobby.addr(), []string{"key " + KeyA, "max_in_flight 6"}, nil, false)),
	}}.Caddyfile())
	for _, want := range []string{"server lobby (" + lobby.addr() + ") of network main in a statusgate handler on ", ":" + strconv.Itoa(HTTPPort),
		" in front of " + hub.addr(), ":" + strconv.Itoa(ports[0]), " in front of " + lobby.addr(), "guard NAME does not apply"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q: %s", want, msg)
		}
	}
}

// TestHeadersKeepAnswersApart: two paths of one site in front of one dial,
// whose proxy blocks differ only in a header the server behind the dial
// routes by (a multiplexer's X-Server): one server's counts, but never one
// answer for both, cached for an hour (before, the second path got the
// first's cached answer).
func TestHeadersKeepAnswersApart(t *testing.T) {
	mux := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteBackend(w, http.StatusOK, Envelope(fmt.Sprintf(`{"server":%q,"online":[]}`, r.Header.Get("X-Server"))))
	}))
	t.Cleanup(mux.Close)
	var routes []string
	for _, name := range []string{"a", "b"} {
		routes = append(routes, fmt.Sprintf("handle_path /%s/* {\n\t\t%s\n\t}", name,
			strings.ReplaceAll(StatusgateLines(mux.Listener.Addr().String(), []string{"key " + KeyA, "cache status 1h"}, []string{"header_up X-Server " + name}, false), "\n\t", "\n\t\t")))
	}
	Gateway{Shared: true, Routes: strings.Join(routes, "\n\t")}.Start(t)
	for range 2 {
		for _, name := range []string{"a", "b"} {
			wantServer(t, "/"+name, Send(t, "GET", "/"+name+"/api/v1/status", WithKey(KeyA)), name)
		}
	}
}

// TestGateCannotChangeASentPlaceholder: a vars after statusgate that
// changes what a header_up of the proxy block sends is refused like any
// change of the decided request (before, the backend got the changed
// header).
func TestGateCannotChangeASentPlaceholder(t *testing.T) {
	be := NewBackend(t)
	Gateway{Routes: "route {\n\t\tvars tier free\n\t\t" + strings.ReplaceAll(StatusgateLines(be.Addr(), []string{"key " + KeyA}, []string{"header_up X-Tier {vars.tier}"}, false), "\n\t", "\n\t\t") +
		"\n\t\tvars tier gold\n\t}"}.Start(t)
	WantError(t, Send(t, "GET", "/api/v1/status"), http.StatusBadGateway, "/api/v1/status")
	if seen := be.Take(); len(seen) != 0 {
		t.Errorf("the backend got X-Tier %q, changed after statusgate decided", seen[0].Header.Get("X-Tier"))
	}
}
