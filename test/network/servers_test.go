package network

// A network of servers written once (docs/network.md, "A network written
// once"): each game server declared once with its limits, the keys and the
// field policy once for every handler, the servers' own paths and the
// network's total, through a real Caddy.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/internal/sim"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// writtenOnce is docs/network.md's config of a network written once, as
// written, in front of the members ms (survival, lobby, creative, which
// stand for 10.0.0.2, .3 and .4), on the tests' ports, with the members'
// sites after it; edit changes the document's text first.
func writtenOnce(t *testing.T, ms []SimMember, edit func(string) string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(RepoRoot, "docs", "network.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, m := range regexp.MustCompile("(?ms)^```caddyfile\n(.*?)^```").FindAllStringSubmatch(string(doc), -1) {
		if strings.Contains(m[1], "server survival 10.0.0.2:8080 {") {
			block = m[1]
		}
	}
	if block == "" {
		t.Fatal("docs/network.md has no config of a network written once")
	}
	block = edit(block)
	for i, dial := range []string{"10.0.0.2:8080", "10.0.0.3:8080", "10.0.0.4:8080"} {
		block = strings.ReplaceAll(block, dial, ms[i].Addr())
	}
	global := fmt.Sprintf("{\n\tskip_install_trust\n\tadmin localhost:%d\n\thttp_port %d\n\thttps_port %d\n\tdefault_bind 127.0.0.1\n\tauto_https off\n\tgrace_period 5s\n\tlog {\n\t\tlevel ERROR\n\t}\n",
		AdminPort, HTTPPort, HTTPSPort)
	block = strings.Replace(block, "{\n", global, 1)
	block = strings.Replace(block, "stats.example.com {", fmt.Sprintf(":%d {", HTTPPort), 1)
	for i, m := range ms {
		block += "\n" + m.Site(i, "latency player_offline 300ms") + "\n"
	}
	return block
}

// TestNetworkWrittenOnce loads docs/network.md's three-server config as
// written: anonymous callers of every handler, the servers' own paths and
// the network, get no UUID; the bot's key, written once, works on every
// handler; a reload that lowers lobby's max_in_flight applies to lobby's
// own path and to the network's lobby at once; and under a flood of every
// path, each server holds at most its own max_in_flight.
func TestNetworkWrittenOnce(t *testing.T) {
	t.Setenv("BOT_KEY", KeyB)
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	LoadCaddyfile(t, writtenOnce(t, ms, func(s string) string { return s }))

	prefixes := []string{"", "/lobby", "/creative"}
	for _, p := range prefixes {
		r := Send(t, "GET", p+"/api/v1/status")
		if r.Status != 200 || len(uuidRE.FindAll(r.Body, -1)) > 0 || !bytes.Contains(r.Body, []byte(`"hiddenFields":["online"]`)) {
			t.Errorf("anonymous %s/api/v1/status: %d %s, want the counts and no UUID", p, r.Status, Clip(r.Body))
		}
		keyed := Send(t, "GET", p+"/api/v1/status", WithKey(KeyB))
		if keyed.Status != 200 || len(uuidRE.FindAll(keyed.Body, -1)) == 0 || !bytes.Contains(keyed.Body, []byte(`"authenticated":true`)) {
			t.Errorf("the bot's key at %s/api/v1/status: %d %s, want the players", p, keyed.Status, Clip(keyed.Body))
		}
	}
	anon := Send(t, "GET", "/api/v1/network")
	doc := ReadNetwork(t, anon)
	if len(uuidRE.FindAll(anon.Body, -1)) > 0 || doc.Data.ServerCount != 3 {
		t.Errorf("anonymous /api/v1/network: %s, want three servers and no UUID", Clip(anon.Body))
	}
	if doc := ReadNetwork(t, Send(t, "GET", "/api/v1/network", WithKey(KeyB))); !doc.Meta.Authenticated || len(doc.Data.Servers) != 3 || doc.Data.Servers[1].Players == nil {
		t.Errorf("the bot's /api/v1/network: %+v, want every server's players", doc)
	}

	// Lobby's limit lowered by a reload: its own path and the network's
	// lobby are one server, counted at one guard under the new limit.
	LoadCaddyfile(t, writtenOnce(t, ms, func(s string) string {
		return strings.Replace(s, "server lobby 10.0.0.3:8080 {\n\t\t\tmax_in_flight 4", "server lobby 10.0.0.3:8080 {\n\t\t\tmax_in_flight 2", 1)
	}))
	for _, m := range ms {
		sim.Lookup(m.Name).Reset()
	}
	var wg sync.WaitGroup
	for i := range 10 {
		for _, p := range prefixes {
			wg.Go(func() {
				Send(t, "GET", p+fmt.Sprintf("/api/v1/player/40094f2f-ca8f-4826-8b31-%012d?p=%s", i, strconv.Quote(p)), WithKey(KeyB))
			})
		}
		wg.Go(func() { Send(t, "GET", "/api/v1/network", WithKey(KeyB)) })
	}
	wg.Wait()
	for i, most := range []int{8, 2, 4} {
		st := sim.Lookup(ms[i].Name).Snapshot()
		t.Logf("%s: %d requests, at most %d at once (max_in_flight %d)", ms[i].ID, st.Requests, st.PeakInFlight, most)
		if st.PeakInFlight > most {
			t.Errorf("%s held %d requests at once, above its max_in_flight %d", ms[i].ID, st.PeakInFlight, most)
		}
		if st.Requests == 0 {
			t.Errorf("%s got no request", ms[i].ID)
		}
	}
}

// TestDeclaredServerOneGuard: a server declared once with a guard name of
// its own, max_in_flight 1 and no queue, is one guard for its handler and
// for the network that lists it: with its one place held by a request of
// its own path, the network's trip to it is refused there (the member left
// out) instead of reaching it as a second request (before, the member
// joined a guard of its own).
func TestDeclaredServerOneGuard(t *testing.T) {
	lobby, survival := NewGatedBackend(t), NewBackend(t)
	LoadCaddyfile(t, fmt.Sprintf(`{
	skip_install_trust
	admin localhost:%d
	http_port %d
	https_port %d
	default_bind 127.0.0.1
	auto_https off
	log {
		level ERROR
	}
	statusgate {
		server survival %s
		server lobby %s {
			max_in_flight 1
			queue off
			guard lobbyg
		}
		key %s
		timeout 30s
	}
}
:%d {
	handle_path /lobby/* {
		statusgate {
			server lobby
		}
	}
	handle {
		statusgate {
			server survival
			enable network
			network main {
				server survival
				server lobby
				self survival
			}
		}
	}
}
`, AdminPort, HTTPPort, HTTPSPort, survival.Addr(), lobby.Addr(), KeyA, HTTPPort))
	held := make(chan Response, 1)
	go func() { held <- Send(t, "GET", "/lobby/api/v1/server", WithKey(KeyA)) }()
	lobby.Await(t, 1)
	doc := ReadNetwork(t, Send(t, "GET", "/api/v1/network", WithKey(KeyA)))
	if !slices.Equal(doc.Meta.Unreachable, []string{"lobby"}) {
		t.Errorf("the network with lobby's one place held: unreachable %v, want lobby", doc.Meta.Unreachable)
	}
	lobby.Open()
	fixture.Recv(t, held, "lobby's held request")
	if p := lobby.Peak.Load(); p > 1 {
		t.Errorf("lobby held %d requests at once, above its max_in_flight 1: its handler and the network's member counted it at two guards", p)
	}
}
