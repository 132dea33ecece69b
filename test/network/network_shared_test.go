package network

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// The network's document is the gateway's own work, done once per snapshot
// for each class of caller and shared (docs/network.md, "One document per
// snapshot, for everyone"); a member's failure is the member's, never the
// caller's (issue 43).

// statusMember is a member server the test writes the /status of: body
// gives its answer (status and bytes) to each request, which it counts.
type statusMember struct {
	id string
	be *Backend
	// body answers /api/v1/status; nil: backendResponse.
	body func() (int, []byte)
}

// newStatusMembers are members with these ids, each answering /status with
// body(id).
func newStatusMembers(t *testing.T, body func(id string) func() (int, []byte), ids ...string) []*statusMember {
	var ms []*statusMember
	for _, id := range ids {
		m := &statusMember{id: id, be: NewBackend(t), body: body(id)}
		m.be.Respond = func(u *url.URL) (int, []byte) {
			if u.Path == "/api/v1/status" && m.body != nil {
				return m.body()
			}
			return BackendResponse(u)
		}
		ms = append(ms, m)
	}
	return ms
}

// trips is how many /status requests reached the member.
func (m *statusMember) trips() int {
	m.be.Mu.Lock()
	defer m.be.Mu.Unlock()
	n := 0
	for _, s := range m.be.All {
		if strings.HasPrefix(s.RequestURI, "/api/v1/status") {
			n++
		}
	}
	return n
}

// statusOf is a member's /status answer with these players and counts,
// taken now.
func statusOf(players []string, online int64, discord string) []byte {
	list, _ := json.Marshal(players)
	now := time.Now().UnixMilli()
	return []byte(fmt.Sprintf(`{"ok":true,"data":{"online":%s,"minecraft":%d,"discord":%s},"meta":{"version":"v1","server":"global","updatedAt":%d,"cachedAt":%d,"authenticated":true}}`,
		list, online, discord, now, now))
}

// playersOf is n UUIDs, the i-th of seed's.
func playersOf(seed, n int) []string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", seed, i)
	}
	return ps
}

// statusGateway is a gateway in front of the first member, with the
// network of all of them (self the first), the lines given, and the
// defaults of sharing (coalescing, the micro-cache, max_per_client 4).
func statusGateway(ms []*statusMember, lines ...string) Gateway {
	var block strings.Builder
	block.WriteString("network main {\n")
	for _, m := range ms {
		fmt.Fprintf(&block, "\t\t\tserver %s %s\n", m.id, m.be.Addr())
	}
	fmt.Fprintf(&block, "\t\t\tself %s\n\t\t}", ms[0].id)
	return Gateway{Upstream: ms[0].be.Addr(), Shared: true,
		Statusgate: append([]string{"enable network", block.String()}, lines...)}
}

// manyAtOnce sends n requests at once, from this one address, and returns
// their answers.
func manyAtOnce(t *testing.T, n int, target string, headers ...string) []Response {
	start := make(chan struct{})
	out := make([]Response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = Send(t, "GET", target, headers...)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// wantAllLeftOut checks that every answer is the document of the members
// but left, with left in meta.unreachable.
func wantAllLeftOut(t *testing.T, rs []Response, servers int, left ...string) {
	t.Helper()
	statuses := map[int]int{}
	bad := 0
	for _, r := range rs {
		statuses[r.Status]++
		var doc NetworkDoc
		if r.Status != 200 || json.Unmarshal(r.Body, &doc) != nil || doc.Data.ServerCount != servers || !slices.Equal(doc.Meta.Unreachable, left) {
			if bad++; bad == 1 {
				t.Errorf("an answer: %d %s", r.Status, Clip(r.Body))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d answers are not the document with %v left out: statuses %v", bad, len(rs), left, statuses)
	}
}

// TestNetworkFailingMemberIsLeftOut: a member that hangs, answers 500 or
// answers more than max_response is left out and named in meta.unreachable
// for 200 callers at once from one address, every one of whom gets 200
// (never the 429 of its per-client limit, which the members' trips are not
// charged to), and the failing member gets one trip for them all.
func TestNetworkFailingMemberIsLeftOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fail makes the member creative fail, in front of which the test
		// may put a door; it returns the address the network names, and
		// how many trips reached the member there.
		fail func(t *testing.T, m *statusMember) (string, func() int)
		// lines are the statusgate block's own.
		lines []string
	}{
		{"hanging", func(t *testing.T, m *statusMember) (string, func() int) {
			d := newDoor(t, m.be.Addr())
			d.stuck.Store(true)
			return d.addr, func() int { return int(d.hits.Load()) }
		}, []string{"timeout 1s"}},
		{"answering 500", func(t *testing.T, m *statusMember) (string, func() int) {
			m.body = func() (int, []byte) { return 500, ErrorEnvelope(500, "boom", "/api/v1/status") }
			return m.be.Addr(), m.trips
		}, nil},
		{"over max_response", func(t *testing.T, m *statusMember) (string, func() int) {
			big := statusOf(playersOf(3, 3000), 3000, "null") // about 120 KB
			m.body = func() (int, []byte) { return 200, big }
			return m.be.Addr(), m.trips
		}, []string{"max_response 64KB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := newStatusMembers(t, func(id string) func() (int, []byte) {
				return func() (int, []byte) { return 200, statusOf([]string{Alex}, 1, "null") }
			}, "survival", "lobby", "creative")
			addr, trips := tc.fail(t, ms[2])
			g := statusGateway(ms, append([]string{"require_key network off"}, tc.lines...)...)
			g.Statusgate[1] = strings.Replace(g.Statusgate[1], ms[2].be.Addr(), addr, 1)
			g.Global = []string{"log {\n\t\toutput discard\n\t}"} // a line per member failure
			g.Start(t)

			wantAllLeftOut(t, manyAtOnce(t, 200, "/api/v1/network"), 2, "creative")
			if n := trips(); n > 1 {
				t.Errorf("the failing member got %d trips for 200 callers, want at most 1", n)
			}
			for _, m := range ms[:2] {
				if n := m.trips(); n != 1 {
					t.Errorf("%s got %d trips for 200 callers, want 1", m.id, n)
				}
			}
		})
	}
}

// TestNetworkLargeMembers: two members of 2.3 MB make a document larger
// than max_response (4 MiB): every caller, anonymous or keyed, gets 200
// with the largest member left out and named in meta.unreachable, never
// the 429 of an answer larger than its share of the held bytes.
func TestNetworkLargeMembers(t *testing.T) {
	sizes := map[string]int{"survival": 59000, "lobby": 62000} // UUIDs, ~39 bytes each
	ms := newStatusMembers(t, func(id string) func() (int, []byte) {
		body := statusOf(playersOf(len(id), sizes[id]), int64(sizes[id]), "null")
		return func() (int, []byte) { return 200, body }
	}, "survival", "lobby")
	for _, m := range ms {
		if _, b := m.body(); len(b) < 2_250_000 || len(b) > 2_450_000 {
			t.Fatalf("%s's status is %d bytes, want about 2.3 MB", m.id, len(b))
		}
	}
	statusGateway(ms, "key "+KeyA, "require_key network off").Start(t)
	for _, who := range []struct {
		name    string
		headers []string
	}{{"anonymous", nil}, {"keyed", []string{WithKey(KeyA)}}} {
		r := Send(t, "GET", "/api/v1/network", who.headers...)
		doc := ReadNetwork(t, r)
		if doc.Data.ServerCount != 1 || doc.Data.Servers[0].Server != "survival" || !slices.Equal(doc.Meta.Unreachable, []string{"lobby"}) ||
			doc.Data.TotalOnline != sizes["survival"] || len(r.Body) > 4<<20 {
			t.Errorf("%s: %d bytes, serverCount %d, unreachable %v, totalOnline %d; want survival alone, lobby left out",
				who.name, len(r.Body), doc.Data.ServerCount, doc.Meta.Unreachable, doc.Data.TotalOnline)
		}
	}
}

// TestNetworkInvalidUTF8Member: a member of 1.6 MB whose player names are
// invalid UTF-8 grows past max_response when the gateway writes them (each
// 0xFF byte as U+FFFD): the bound is the document as written, so that
// member is left out and named, and the caller gets 200, not a 429.
func TestNetworkInvalidUTF8Member(t *testing.T) {
	names := make([]string, 40000)
	for i := range names {
		names[i] = strings.Repeat("\xff", 36)
	}
	// Written by hand: encoding/json would write each byte as \ufffd.
	var list bytes.Buffer
	list.WriteByte('[')
	for i, n := range names {
		if i > 0 {
			list.WriteByte(',')
		}
		list.WriteString(`"` + n + `"`)
	}
	list.WriteByte(']')
	now := time.Now().UnixMilli()
	big := fmt.Appendf(nil, `{"ok":true,"data":{"online":%s,"minecraft":40000,"discord":null},"meta":{"version":"v1","updatedAt":%d,"cachedAt":%d}}`, list.Bytes(), now, now)
	if len(big) < 1_500_000 || len(big) > 1_700_000 {
		t.Fatalf("the member's status is %d bytes, want about 1.6 MB", len(big))
	}
	ms := newStatusMembers(t, func(id string) func() (int, []byte) {
		if id == "lobby" {
			return func() (int, []byte) { return 200, big }
		}
		return func() (int, []byte) { return 200, statusOf([]string{Alex}, 1, "null") }
	}, "survival", "lobby")
	g := statusGateway(ms, "require_key network off")
	g.Global = []string{"log {\n\t\toutput discard\n\t}"}
	g.Start(t)
	r := Send(t, "GET", "/api/v1/network")
	doc := ReadNetwork(t, r)
	if doc.Data.ServerCount != 1 || !slices.Equal(doc.Meta.Unreachable, []string{"lobby"}) || len(r.Body) > 4<<20 {
		t.Errorf("%d bytes: %+v", len(r.Body), doc.Meta)
	}
}

// TestNetworkOneBuildForEveryone: 200 anonymous callers at once of three
// members of 390 KB whose players are protected cost each member one trip
// and the gateway one document: what the 200 requests allocate in all is a
// small part of one copy of the members' answers per caller (which is
// what each call cost when every caller built its own).
func TestNetworkOneBuildForEveryone(t *testing.T) {
	ms := newStatusMembers(t, func(id string) func() (int, []byte) {
		body := statusOf(playersOf(len(id), 10000), 10000, "12")
		return func() (int, []byte) { return 200, body }
	}, "survival", "lobby", "creative")
	statusGateway(ms, "require_key network off", "protected_fields network players", "cache status 1h").Start(t)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rs := manyAtOnce(t, 200, "/api/v1/network")
	runtime.ReadMemStats(&after)
	wantAllLeftOut(t, rs, 3)
	first := withoutTimes(rs[0]).Body
	for _, r := range rs {
		if !bytes.Equal(withoutTimes(r).Body, first) || bytes.Contains(r.Body, []byte(`"players":`)) {
			t.Fatalf("the answers differ, or show players: %s and %s", Clip(first), Clip(r.Body))
		}
	}
	for _, m := range ms {
		if n := m.trips(); n != 1 {
			t.Errorf("%s: %d trips, want 1", m.id, n)
		}
	}
	// 200 copies of the three answers alone would be 234 MB.
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > 64<<20 {
		t.Errorf("200 callers allocated %d MiB, want well under one copy of the members per caller", alloc>>20)
	}
	t.Logf("200 callers allocated %.1f MiB", float64(alloc)/(1<<20))
}

// TestNetworkMemberTripsShared: each member's trip is named by nothing of
// the caller's: a live stream's polls, plain GETs of both classes with
// twenty different Hosts (the site catches them all), and another site of
// the gateway with the same network share each member's one trip.
func TestNetworkMemberTripsShared(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{"key " + KeyA, "require_key network off", "cache status 1h", "max_per_client off"}
	g := NetworkGateway(ms, nil, lines...)
	// The other site: the same handler, on a port of its own.
	g.Sites = append(g.Sites, fmt.Sprintf(":%d {\n\tstatusgate %s {\n\t\t%s\n\t\t%s\n\t}\n}",
		port, ms[0].Addr(), "enable network\n\t\t"+NetworkBlock(ms, nil, ms[0].ID), strings.Join(lines, "\n\t\t")))
	g.Start(t)
	for _, m := range ms {
		m.Status(t) // provisioned, counters reset
	}

	// A stream: the frozen members' snapshots are long overdue, so its
	// topic polls every 100 ms.
	s := OpenLive(t, nil, "/api/v1/network", WithKey(KeyA))
	s.WantStream(t, "network stream")
	if ev := s.NextEvent(t); !strings.Contains(ev.Data, `"serverCount":3`) {
		t.Fatalf("first event: %+v", ev)
	}
	defer s.Close()
	for i := range 20 {
		host := fmt.Sprintf("Host: site%d.example", i)
		for _, h := range [][]string{{host}, {host, WithKey(KeyA)}} {
			if doc := ReadNetwork(t, Send(t, "GET", "/api/v1/network", h...)); doc.Data.ServerCount != 3 {
				t.Fatalf("%v: %+v", h, doc)
			}
		}
	}
	other := SendRawTo(t, fmt.Sprintf("127.0.0.1:%d", port), "GET", "GET /api/v1/network HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n")
	if doc := ReadNetwork(t, other); doc.Data.ServerCount != 3 {
		t.Fatalf("the other site: %+v", doc)
	}
	// What is asserted is that no more trips come: the stream polls ten
	// times a second, so half a second gives it several polls (a slower
	// machine only makes the test weaker, never wrong).
	time.Sleep(500 * time.Millisecond)
	for _, m := range ms {
		if n := m.Trips(); n != 1 {
			t.Errorf("%s: %d trips for a stream, 40 GETs of 20 Hosts and another site, want 1", m.ID, n)
		}
	}
}

// TestNetworkNumbers: counts at int64's edge sum without wrapping; a
// member with a negative count, or a time before any running server, is a
// bad answer, left out.
func TestNetworkNumbers(t *testing.T) {
	answers := map[string][]byte{
		"a": statusOf([]string{}, math.MaxInt64, "null"),
		"b": statusOf([]string{}, math.MaxInt64, "null"),
		"c": statusOf([]string{}, 2, "-5"),
		"d": []byte(`{"ok":true,"data":{"online":[],"minecraft":1,"discord":null},"meta":{"version":"v1","updatedAt":1,"cachedAt":1}}`),
	}
	ms := newStatusMembers(t, func(id string) func() (int, []byte) {
		return func() (int, []byte) { return 200, answers[id] }
	}, "a", "b", "c", "d")
	g := statusGateway(ms, "key "+KeyA)
	g.Global = []string{"log {\n\t\toutput discard\n\t}"}
	g.Start(t)
	r := Send(t, "GET", "/api/v1/network", WithKey(KeyA))
	doc := ReadNetwork(t, r)
	if !bytes.Contains(r.Body, []byte(`"totalOnline":9223372036854775807,`)) || doc.Data.ServerCount != 2 || !slices.Equal(doc.Meta.Unreachable, []string{"c", "d"}) {
		t.Errorf("%s", Clip(r.Body))
	}
}

// TestNetworkMemberFailureShared: a member that fails is not asked again
// by every class and stream for the time its failure is shared: a keyed and
// an anonymous caller, one after the other, cost the failing member one
// trip.
func TestNetworkMemberFailureShared(t *testing.T) {
	ms := newStatusMembers(t, func(id string) func() (int, []byte) {
		if id == "lobby" {
			return func() (int, []byte) { return 500, ErrorEnvelope(500, "boom", "/api/v1/status") }
		}
		return func() (int, []byte) { return 200, statusOf([]string{Alex}, 1, "null") }
	}, "survival", "lobby")
	g := statusGateway(ms, "key "+KeyA, "require_key network off", "cache status 1h")
	g.Global = []string{"log {\n\t\toutput discard\n\t}"}
	g.Start(t)
	for _, h := range [][]string{{WithKey(KeyA)}, nil} {
		if doc := ReadNetwork(t, Send(t, "GET", "/api/v1/network", h...)); !slices.Equal(doc.Meta.Unreachable, []string{"lobby"}) {
			t.Fatalf("%v: %+v", h, doc)
		}
	}
	if n := ms[1].trips(); n != 1 {
		t.Errorf("the failing member: %d trips, want 1", n)
	}
}

// TestNetworkMembersAreFixedServers: a member's upstream cannot be picked by
// the request, one server under two spellings is refused, and so is a
// member that is the gateway's own listener; each message names both
// sides truthfully.
func TestNetworkMembersAreFixedServers(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby")
	port := ms[1].Port
	for _, tc := range []struct {
		name  string
		addrs map[string]string
		want  []string
	}{
		{"a placeholder", map[string]string{"lobby": "{http.request.header.X-Lobby}"},
			[]string{"server lobby: {http.request.header.X-Lobby} picks the server for each request", "a member is a fixed server"}},
		{"localhost beside 127.0.0.1", map[string]string{"survival": fmt.Sprintf("localhost:%d", port)},
			[]string{fmt.Sprintf("server lobby: 127.0.0.1:%d is the server that server survival declares as localhost:%d", port, port), "count its players twice"}},
		{"an IPv4-mapped address", map[string]string{"survival": fmt.Sprintf("[::ffff:127.0.0.1]:%d", port)},
			[]string{fmt.Sprintf("server lobby: 127.0.0.1:%d is the server that server survival declares as [::ffff:127.0.0.1]:%d", port, port)}},
		{"the gateway's own listener", map[string]string{"lobby": GatewayAddr},
			[]string{fmt.Sprintf("network.servers[1] 'lobby'.proxy: %s: tcp/loopback:%d is this gateway's own listener", GatewayAddr, HTTPPort), "players count twice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NetworkGateway(ms, tc.addrs, "key "+KeyA)
			if tc.name != "the gateway's own listener" {
				// The self line names the first member, which these
				// change; no self keeps the message about the member.
				g.Statusgate[1] = strings.Replace(g.Statusgate[1], "\t\t\tself survival\n", "", 1)
			}
			msg := LoadRefused(t, g.Caddyfile())
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("refusal %q does not say %q", msg, w)
				}
			}
		})
	}
	// Reordered upstreams are one server too.
	g := NetworkGateway(ms, map[string]string{
		"survival": ms[0].Addr() + " " + ms[1].Addr(),
		"lobby":    fmt.Sprintf("localhost:%d 127.0.0.1:%d", port, ms[0].Port)}, "key "+KeyA)
	g.Statusgate[1] = strings.Replace(g.Statusgate[1], "\t\t\tself survival\n", "", 1)
	if msg := LoadRefused(t, g.Caddyfile()); !strings.Contains(msg, "is the server that server survival declares as") {
		t.Errorf("reordered upstreams: %q", msg)
	}
}

// TestNetworkLoopStopped: a member whose requests lead back to the
// gateway's own /network (through a proxy of its own, rewritten, with a
// Host of its own, so that no nested request waits for its own trip) is
// stopped at the first step: the network answers with it left out, and it
// gets one request, not a request for each nested network.
func TestNetworkLoopStopped(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby")
	loop := newDoor(t, GatewayAddr)
	g := NetworkGateway(ms, nil, "key "+KeyA, "require_key network off")
	g.Statusgate[1] = strings.Replace(g.Statusgate[1], "\t\t}", "\t\t\tserver loop "+loop.addr+" {\n\t\t\t\trewrite /api/v1/network\n\t\t\t\theader_up Host loop.example\n\t\t\t}\n\t\t}", 1)
	g.Global = []string{"log {\n\t\toutput discard\n\t}"}
	g.Start(t)
	doc := ReadNetwork(t, Send(t, "GET", "/api/v1/network", WithKey(KeyA)))
	if doc.Data.ServerCount != 2 || !slices.Equal(doc.Meta.Unreachable, []string{"loop"}) {
		t.Errorf("%+v", doc)
	}
	if n := loop.hits.Load(); n != 1 {
		t.Errorf("the looping member got %d requests, want 1", n)
	}
}

// TestNetworkLoopRefusalIsItsOwn: a client that opens the anonymous
// /network live stream with a Statusgate-Network header gets the loop
// refusal, 508, as its own answer, and the viewers who join next get the
// network's document as their first event (before, the 508 was the
// topic's first event, and every viewer who joined while the cache time
// of /status ran got it).
func TestNetworkLoopRefusalIsItsOwn(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby")
	NetworkGateway(ms, nil, "key "+KeyA, "require_key network off", "cache status 10s").Start(t)
	looped := OpenLive(t, nil, "/api/v1/network", "Statusgate-Network: main")
	if looped.Resp.StatusCode != http.StatusLoopDetected || looped.Resp.Header.Get("Content-Type") == "text/event-stream" {
		t.Errorf("a stream opened with the network's header: %d %s, want its own 508", looped.Resp.StatusCode, looped.Resp.Header.Get("Content-Type"))
	}
	for _, headers := range [][]string{nil, {WithKey(KeyA)}} {
		s := OpenLive(t, nil, "/api/v1/network", headers...)
		s.WantStream(t, "the next viewer")
		ev := s.NextEvent(t)
		var doc NetworkDoc
		if err := json.Unmarshal([]byte(ev.Data), &doc); err != nil || !doc.OK || doc.Data.ServerCount != 2 {
			t.Errorf("the next viewer's first event (%v): %s", headers, Clip([]byte(ev.Data)))
		}
		s.Close()
	}
}
