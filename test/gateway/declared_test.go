package gateway

// The backend statusgate declares in its own config (statusgate <upstream>
// { proxy { ... } }), and the form of 1.0 beside it: no answer of one game
// server ever goes to a caller of another, whatever the reloads change.

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// serverBackend is a game server that says which it is in every answer: its
// name, or, as a panel or vhost proxy in front of several would, the name
// the request's Host header asks for. It counts the trips per name.
type serverBackend struct {
	srv  *httptest.Server
	name string // "": by the Host header

	mu    sync.Mutex
	trips map[string]int
}

func newServerBackend(t *testing.T, name string) *serverBackend {
	sb := &serverBackend{name: name, trips: map[string]int{}}
	sb.srv = httptest.NewServer(sb)
	t.Cleanup(sb.srv.Close)
	return sb
}

func (sb *serverBackend) addr() string { return sb.srv.Listener.Addr().String() }

func (sb *serverBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := sb.name
	if name == "" {
		name = r.Host
	}
	sb.mu.Lock()
	sb.trips[name]++
	sb.mu.Unlock()
	var data string
	switch r.URL.Path {
	case "/api/v1/worlds":
		data = fmt.Sprintf(`[{"name":"world","server":%q,"seed":%d}]`, name, len(name))
	case "/api/v1/status":
		data = fmt.Sprintf(`{"server":%q,"online":[]}`, name)
	default:
		WriteBackend(w, http.StatusNotFound, ErrorEnvelope(http.StatusNotFound, "Not found", r.URL.Path))
		return
	}
	WriteBackend(w, http.StatusOK, Envelope(data))
}

// total is the trips the backend made for every name together.
func (sb *serverBackend) total() int {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	n := 0
	for _, v := range sb.trips {
		n += v
	}
	return n
}

// wantServer checks that r is a whole answer of the server called name.
func wantServer(t *testing.T, what string, r Response, name string) {
	t.Helper()
	if r.Err != nil || r.Status != 200 || !strings.Contains(string(r.Body), fmt.Sprintf(`"server":%q`, name)) {
		t.Fatalf("%s: %d %s (err %v), want %s's answer", what, r.Status, Clip(r.Body), r.Err, name)
	}
}

// TestOneDialTwoServers: game servers behind one upstream address, told
// apart by the Host the proxy sends (a panel in front of them), in one site
// under handle_path; 30 reloads add, remove and reorder the blocks. Every
// answer, keyed or not, fresh or cached, is its own server's. Declared, the
// caches outlive the reloads, each block's its own: cached for an hour, a
// server's three answers (/worlds keyed, /status of each class) are fetched
// once for each run of rounds its block is in, whatever the rounds take (a
// reload without the block ends its guard, cache and all).
func TestOneDialTwoServers(t *testing.T) {
	Forms(t, func(t *testing.T, legacy bool) {
		panel := newServerBackend(t, "")
		servers := []string{"survival", "creative", "hardcore-survival"}
		load := func(blocks []string) {
			t.Helper()
			var routes []string
			for _, name := range blocks {
				lines := []string{"key staff " + KeyA, "max_per_client off", "cache worlds 1h", "cache status 1h"}
				routes = append(routes, fmt.Sprintf("handle_path /%s/* {\n\t\t%s\n\t}", name,
					strings.ReplaceAll(StatusgateLines(panel.addr(), lines, []string{"header_up Host " + name}, legacy), "\n\t", "\n\t\t")))
			}
			Gateway{Shared: true, Routes: strings.Join(routes, "\n\t")}.Start(t)
		}
		rng := rand.New(rand.NewPCG(31, 0))
		var before []string // the previous round's blocks
		want := 0           // the trips the declared form makes
		for round := range 31 {
			blocks := slices.Clone(servers)
			rng.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
			blocks = blocks[:1+rng.IntN(len(blocks))]
			if round == 0 {
				blocks = servers
			}
			load(blocks)
			for _, name := range blocks {
				if !slices.Contains(before, name) {
					want += 3
				}
				for _, c := range []struct{ path, key string }{{"/api/v1/worlds", KeyA}, {"/api/v1/status", ""}, {"/api/v1/status", KeyA}} {
					var headers []string
					if c.key != "" {
						headers = append(headers, WithKey(c.key))
					}
					wantServer(t, fmt.Sprintf("round %d %v, /%s%s", round, blocks, name, c.path), Send(t, "GET", "/"+name+c.path, headers...), name)
				}
			}
			before = blocks
		}
		if trips := panel.total(); !legacy && trips != want {
			t.Errorf("the panel saw %d trips, want %d (three per run of rounds a server's block is in): the declared backends' caches did not outlive the reloads", trips, want)
		}
	})
}

// TestPlaceholderUpstream: an upstream given by a placeholder, set by a map
// before statusgate. Requests whose Host maps to two servers never get each
// other's answers, and a reload that points the map's default at another
// server serves that server's answers from then on, cached ones included.
func TestPlaceholderUpstream(t *testing.T) {
	Forms(t, func(t *testing.T, legacy bool) {
		a, b := newServerBackend(t, "a"), newServerBackend(t, "b")
		load := func(def string) {
			t.Helper()
			mapping := fmt.Sprintf("map {host} {game} {\n\t\tb.localhost %s\n\t\tdefault %s\n\t}", b.addr(), def)
			Gateway{Shared: true, Routes: mapping + "\n\t" + StatusgateLines("{game}", []string{"key staff " + KeyA}, nil, legacy)}.Start(t)
		}
		get := func(host, path string, key bool) Response {
			raw := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n"
			if key {
				raw += WithKey(KeyA) + "\r\n"
			}
			return SendRaw(t, "GET", raw+"Connection: close\r\n\r\n")
		}
		load(a.addr())
		for round := range 3 {
			for _, key := range []bool{true, false} {
				wantServer(t, fmt.Sprintf("round %d, the default", round), get(GatewayAddr, "/api/v1/status", key), "a")
				wantServer(t, fmt.Sprintf("round %d, b.localhost", round), get("b.localhost", "/api/v1/status", key), "b")
				wantServer(t, fmt.Sprintf("round %d, worlds of the default", round), get(GatewayAddr, "/api/v1/worlds", true), "a")
			}
		}
		for round, def := range []*serverBackend{b, a, b} {
			load(def.addr())
			for _, key := range []bool{true, false} {
				wantServer(t, fmt.Sprintf("reload %d, the default", round), get(GatewayAddr, "/api/v1/status", key), def.name)
			}
			wantServer(t, fmt.Sprintf("reload %d, worlds of the default", round), get(GatewayAddr, "/api/v1/worlds", true), def.name)
		}
	})
}

// TestNamedRouteUpstream: statusgate in a named route that a site invokes;
// a reload that changes only the route's upstream serves the new server's
// answers, cached ones included.
func TestNamedRouteUpstream(t *testing.T) {
	Forms(t, func(t *testing.T, legacy bool) {
		a, b := newServerBackend(t, "a"), newServerBackend(t, "b")
		load := func(up *serverBackend) {
			t.Helper()
			route := "&(stats) {\n\t" + StatusgateLines(up.addr(), []string{"key staff " + KeyA}, nil, legacy) + "\n}"
			if legacy {
				// Caddy's adapter keeps a named route's first handler
				// alone unless its handlers are in a route block.
				route = "&(stats) {\n\troute {\n\t" + StatusgateLines(up.addr(), []string{"key staff " + KeyA}, nil, legacy) + "\n\t}\n}"
			}
			Gateway{Shared: true, Routes: "invoke stats", Sites: []string{route}}.Start(t)
		}
		for round, up := range []*serverBackend{a, b, a, b} {
			load(up)
			for range 2 {
				wantServer(t, fmt.Sprintf("reload %d, worlds", round), Send(t, "GET", "/api/v1/worlds", WithKey(KeyA)), up.name)
				wantServer(t, fmt.Sprintf("reload %d, status", round), Send(t, "GET", "/api/v1/status"), up.name)
			}
		}
	})
}

// TestRateLimitCountsTrips: rate_limit written as the README shows it
// (ordered after statusgate, keyed by {http.statusgate.client}) in front of
// a declared backend counts only the trips that reach the backend: cached
// answers cost no token, each key and each address has its own bucket, and
// its 429 is the gateway's envelope.
func TestRateLimitCountsTrips(t *testing.T) {
	Forms(t, func(t *testing.T, legacy bool) {
		be := NewBackend(t)
		Gateway{
			Upstream:   be.Addr(),
			Legacy:     legacy,
			Shared:     true,
			Statusgate: []string{"key staff " + KeyA, "max_per_client off"},
			Global:     []string{"log {\n\t\tlevel ERROR\n\t}", "order rate_limit after statusgate"},
			// A zone of each form's own: a zone's counts outlive a reload.
			Site: []string{"rate_limit {\n\t\tzone per_client_" + fmt.Sprint(legacy) + " {\n\t\t\tkey {http.statusgate.client}\n\t\t\tevents 3\n\t\t\twindow 1m\n\t\t}\n\t}"},
		}.Start(t)
		for i := range 10 {
			if r := Send(t, "GET", "/api/v1/worlds", WithKey(KeyA)); r.Status != 200 {
				t.Fatalf("cached /worlds, call %d: %d", i, r.Status)
			}
		}
		target := "/api/v1/player/" + Alex
		for i := range 3 {
			if r := Send(t, "GET", target+"?n="+fmt.Sprint(i)); r.Status != 200 {
				t.Fatalf("anonymous trip %d: %d", i, r.Status)
			}
		}
		r := Send(t, "GET", target+"?n=3")
		if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Errorf("429 without a usable Retry-After: %q", ra)
		}
		r.Header.Del("Retry-After")
		WantError(t, r, http.StatusTooManyRequests, target)
		// The key has a bucket of its own, and its cached /worlds cost one token.
		for i := range 2 {
			if r := Send(t, "GET", target+"?k="+fmt.Sprint(i), WithKey(KeyA)); r.Status != 200 {
				t.Fatalf("keyed trip %d: %d", i, r.Status)
			}
		}
		if r := Send(t, "GET", target+"?k=2", WithKey(KeyA)); r.Status != 429 {
			t.Errorf("the key's fourth trip: %d, want 429", r.Status)
		}
		if seen := be.Take(); len(seen) != 6 {
			t.Errorf("the backend saw %d requests, want 6: one /worlds and the five trips the limit let through", len(seen))
		}
	})
}

// TestHandlerAfterDeclaredBackend: with a declared backend, a handler after
// statusgate that answers the request (a reverse_proxy left over from 1.0,
// here to another server) is refused with 502: the client never gets the
// other server's answer, and the declared backend is not asked.
func TestHandlerAfterDeclaredBackend(t *testing.T) {
	be, other := NewBackend(t), newServerBackend(t, "other")
	Gateway{Routes: StatusgateLines(be.Addr(), []string{"key " + KeyA}, nil, false) + "\n\treverse_proxy " + other.addr()}.Start(t)
	WantError(t, Send(t, "GET", "/api/v1/server", WithKey(KeyA)), http.StatusBadGateway, "/api/v1/server")
	if n := len(be.Take()); n != 0 {
		t.Errorf("the declared backend was asked %d times, after another handler answered", n)
	}
}
