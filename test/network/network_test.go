package network

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// keysInOrder lists the members of the JSON object raw, in order.
func keysInOrder(t testing.TB, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", Clip(raw))
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestNetworkAnswer: the gateway's /api/v1/network has the plugin's
// envelope, data shape and key order; each server is its member's /status
// (online count, players, chat-platform members, snapshot time);
// totalOnline is the sum; meta has no server, the earliest snapshot time,
// an empty unreachable and a truthful authenticated.
func TestNetworkAnswer(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	NetworkGateway(ms, nil, "key "+KeyA).Start(t)
	var statuses [][]byte
	for _, m := range ms {
		statuses = append(statuses, m.Status(t))
	}

	r := Send(t, "GET", "/api/v1/network", WithKey(KeyA))
	doc := ReadNetwork(t, r)
	if got := keysInOrder(t, r.Body); !slices.Equal(got, []string{"ok", "data", "meta"}) {
		t.Errorf("envelope members %v", got)
	}
	var env struct {
		Data struct {
			Servers []json.RawMessage `json:"servers"`
		} `json:"data"`
		Meta json.RawMessage `json:"meta"`
	}
	_ = json.Unmarshal(r.Body, &env)
	if got := keysInOrder(t, bytes.TrimPrefix(r.Body, []byte(`{"ok":true,"data":`))); !slices.Equal(got, []string{"cluster", "thisServer", "serverCount", "totalOnline", "servers"}) {
		t.Errorf("data members %v", got)
	}
	for _, s := range env.Data.Servers {
		if got := keysInOrder(t, s); !slices.Equal(got, []string{"server", "cluster", "online", "players", "discord", "updatedAt"}) {
			t.Errorf("server members %v", got)
		}
	}
	if got := keysInOrder(t, env.Meta); !slices.Equal(got, []string{"version", "updatedAt", "cachedAt", "unreachable", "authenticated"}) {
		t.Errorf("meta members %v", got)
	}

	d := doc.Data
	if !doc.OK || d.Cluster != "main" || d.ThisServer != "survival" || d.ServerCount != 3 || len(d.Servers) != 3 {
		t.Fatalf("document %s", Clip(r.Body))
	}
	sum := 0
	var earliest int64
	for i, m := range ms {
		var st struct {
			Data struct {
				Online    []string `json:"online"`
				Minecraft int      `json:"minecraft"`
				Discord   *int     `json:"discord"`
			} `json:"data"`
			Meta struct {
				CachedAt int64 `json:"cachedAt"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(statuses[i], &st); err != nil || st.Meta.CachedAt == 0 {
			t.Fatalf("%s's status %s: %v", m.ID, statuses[i], err)
		}
		want := Heartbeat{Server: m.ID, Cluster: "main", Online: st.Data.Minecraft, Players: st.Data.Online, Discord: st.Data.Discord, UpdatedAt: st.Meta.CachedAt}
		if got := d.Servers[i]; !reflect.DeepEqual(got, want) {
			t.Errorf("server %d: %+v, want %+v", i, got, want)
		}
		sum += st.Data.Minecraft
		if earliest == 0 || st.Meta.CachedAt < earliest {
			earliest = st.Meta.CachedAt
		}
	}
	if d.TotalOnline != sum || sum == 0 {
		t.Errorf("totalOnline %d, the members' counts sum to %d", d.TotalOnline, sum)
	}
	if slices.Equal(d.Servers[0].Players, d.Servers[1].Players) && slices.Equal(d.Servers[1].Players, d.Servers[2].Players) {
		t.Error("the three members have the same players: the seeds do not tell them apart")
	}
	mt := doc.Meta
	if mt.Version != "v1" || mt.Server != nil || mt.CachedAt == nil || *mt.CachedAt != earliest || mt.Unreachable == nil || len(mt.Unreachable) != 0 ||
		!mt.Authenticated || mt.HiddenFields != nil {
		t.Errorf("meta %s", env.Meta)
	}

	// HEAD: the same head, no body.
	h := Send(t, "HEAD", "/api/v1/network", WithKey(KeyA))
	if h.Status != 200 || len(h.Body) != 0 || h.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Errorf("HEAD: %d %v %q", h.Status, h.Header, h.Body)
	}
	// The index lists network for the key.
	idx := Send(t, "GET", "/api/v1", WithKey(KeyA))
	if !bytes.Contains(idx.Body, []byte(`{"name":"network","path":"/api/v1/network","description":"Cross-server aggregation","requiresKey":true}`)) {
		t.Errorf("the index does not list network: %s", idx.Body)
	}
}

// TestNetworkOneTripPerMember: 200 callers at once, plain GETs with and
// without a key and live streams, cost each member one /status trip for
// the cache time (an hour here, so that no entry expires during the test).
func TestNetworkOneTripPerMember(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	NetworkGateway(ms, nil, "key "+KeyA, "require_key network off", "cache status 1h", "max_streams_per_client off").Start(t)
	for _, m := range ms {
		m.Status(t) // provisioned, counters reset
	}
	const callers, streams = 200, 10
	start := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := range callers {
		wg.Go(func() {
			<-start
			var r Response
			if i%2 == 0 {
				r = Send(t, "GET", "/api/v1/network")
			} else {
				r = Send(t, "GET", "/api/v1/network", WithKey(KeyA))
			}
			var doc NetworkDoc
			if r.Status != 200 || json.Unmarshal(r.Body, &doc) != nil || doc.Data.ServerCount != 3 {
				if bad.Add(1) == 1 {
					t.Errorf("caller %d: %d %s", i, r.Status, Clip(r.Body))
				}
			}
		})
	}
	close(start)
	var opened []*LiveStream
	for i := range streams {
		s := OpenLive(t, nil, "/api/v1/network", WithKey(KeyA))
		if i%2 == 0 {
			s = OpenLive(t, nil, "/api/v1/network")
		}
		s.WantStream(t, "network stream")
		if ev := s.NextEvent(t); ev.End || !strings.Contains(ev.Data, `"serverCount":3`) {
			t.Errorf("stream %d: %+v", i, ev)
		}
		opened = append(opened, s)
	}
	wg.Wait()
	for _, m := range ms {
		if n := m.Trips(); n != 1 {
			t.Errorf("%s: %d /status trips for %d callers and %d streams, want 1", m.ID, n, callers, streams)
		}
	}
	for _, s := range opened {
		s.Close()
	}
}

// door stands in front of a member, on an address of its own. Open, it
// passes each request to the member; shut, it resets every connection, as
// a server that has stopped (it keeps its address, which another process
// could take if it let go of it); stuck, it takes requests and answers
// none until the test ends, as a server that hangs.
type door struct {
	addr    string
	proxy   http.Handler
	stuck   atomic.Bool
	hits    atomic.Int64 // requests that came through the door, stuck or not
	release chan struct{}
	srv     *http.Server

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool // those the server has open
}

func newDoor(t *testing.T, to string) *door {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse("http://" + to)
	d := &door{addr: ln.Addr().String(), proxy: httputil.NewSingleHostReverseProxy(target), release: make(chan struct{}), conns: map[net.Conn]bool{}}
	d.srv = &http.Server{Handler: d, ConnState: d.track}
	go d.srv.Serve(doorListener{ln, d})
	t.Cleanup(func() {
		close(d.release)
		_ = d.srv.Close()
	})
	return d
}

func (d *door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.hits.Add(1)
	if d.stuck.Load() {
		select {
		case <-d.release:
		case <-r.Context().Done():
		}
		return
	}
	d.proxy.ServeHTTP(w, r)
}

// track keeps the set of the server's open connections, for shut.
func (d *door) track(c net.Conn, state http.ConnState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch state {
	case http.StateNew:
		d.conns[c] = true
	case http.StateClosed, http.StateHijacked:
		delete(d.conns, c)
	}
}

// doorListener is the door's listener: while the door is shut, it resets
// each connection as it comes.
type doorListener struct {
	net.Listener
	d *door
}

func (l doorListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.d.mu.Lock()
		down := l.d.down
		l.d.mu.Unlock()
		if !down {
			return c, nil
		}
		reset(c)
	}
}

// reset closes c with a TCP reset, as a stopped server's host answers.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// open lets connections through again.
func (d *door) open() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = false
}

// shut resets every connection through the door, open or new, until open.
func (d *door) shut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = true
	for c := range d.conns {
		reset(c)
	}
}

// TestNetworkMemberDown: a member that stops is left out of the document
// and listed in meta.unreachable, and counts no more in serverCount and
// totalOnline; it is back when it answers again. A member that hangs is
// left out within the request's budget: the answer comes while the
// member's request is still held.
func TestNetworkMemberDown(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	lobby, creative := newDoor(t, ms[1].Addr()), newDoor(t, ms[2].Addr())
	g := NetworkGateway(ms, map[string]string{"lobby": lobby.addr, "creative": creative.addr},
		"key "+KeyA, "cache status 100ms", "snapshot status off")
	g.Global = []string{"log {\n\t\toutput discard\n\t}"} // a line per request that finds a member down
	g.Start(t)
	all := ReadNetwork(t, Send(t, "GET", "/api/v1/network", WithKey(KeyA)))
	if all.Data.ServerCount != 3 || len(all.Meta.Unreachable) != 0 {
		t.Fatalf("every member up: %+v", all)
	}
	online := map[string]int{}
	for _, s := range all.Data.Servers {
		online[s.Server] = s.Online
	}
	// until polls the network until cond holds of its document.
	until := func(what string, cond func(NetworkDoc) bool) NetworkDoc {
		t.Helper()
		var doc NetworkDoc
		fixture.WaitEvery(t, what, 20*time.Millisecond, func() bool { // not a flood of requests
			doc = ReadNetwork(t, Send(t, "GET", "/api/v1/network", WithKey(KeyA)))
			return cond(doc)
		})
		return doc
	}
	without := func(doc NetworkDoc, ids ...string) {
		t.Helper()
		var listed []string
		total := 0
		for _, s := range doc.Data.Servers {
			listed = append(listed, s.Server)
			total += s.Online
		}
		var want []string
		wantTotal := 0
		for _, m := range ms {
			if !slices.Contains(ids, m.ID) {
				want = append(want, m.ID)
				wantTotal += online[m.ID]
			}
		}
		if !slices.Equal(listed, want) || doc.Data.ServerCount != len(want) || doc.Data.TotalOnline != wantTotal || total != wantTotal {
			t.Errorf("with %v left out: servers %v, serverCount %d, totalOnline %d; want %v, %d, %d",
				ids, listed, doc.Data.ServerCount, doc.Data.TotalOnline, want, len(want), wantTotal)
		}
	}

	// Stopped: every connection reset. Its last answer is served for up to its
	// cache time and the stale grace, then it is left out.
	lobby.shut()
	doc := until("lobby listed as unreachable", func(d NetworkDoc) bool { return slices.Equal(d.Meta.Unreachable, []string{"lobby"}) })
	without(doc, "lobby")
	// Back.
	lobby.open()
	doc = until("lobby back", func(d NetworkDoc) bool { return len(d.Meta.Unreachable) == 0 })
	without(doc)

	// Stuck: each request held until the test ends; the answers come all
	// the same, within the budget (the default timeout, 5s), without
	// creative. Without the budget none would come: readNetwork fails on
	// an answer that does not come within patience.
	creative.stuck.Store(true)
	doc = until("creative listed as unreachable", func(d NetworkDoc) bool { return slices.Equal(d.Meta.Unreachable, []string{"creative"}) })
	without(doc, "creative")
	creative.stuck.Store(false)
	until("creative back", func(d NetworkDoc) bool { return len(d.Meta.Unreachable) == 0 })
}

// uuidRE finds a UUID anywhere in a body.
var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// TestNetworkProtectedPlayers: with protected_fields network players, a
// caller without a key (or with a key whose scope leaves network out) gets
// the counts and no UUID anywhere, players in meta.hiddenFields and
// meta.authenticated false; a key that opens network gets every player.
func TestNetworkProtectedPlayers(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	NetworkGateway(ms, nil, "key "+KeyA, "key bot "+KeyB+" {\n\t\t\tendpoints status\n\t\t}",
		"require_key network off", "protected_fields network players").Start(t)
	keyed := Send(t, "GET", "/api/v1/network", WithKey(KeyA))
	kd := ReadNetwork(t, keyed)
	if !kd.Meta.Authenticated || kd.Meta.HiddenFields != nil || len(uuidRE.FindAll(keyed.Body, -1)) == 0 {
		t.Errorf("with the key: %s", Clip(keyed.Body))
	}
	for _, who := range []struct {
		name    string
		headers []string
	}{{"anonymous", nil}, {"a key whose scope leaves network out", []string{WithKey(KeyB)}}} {
		r := Send(t, "GET", "/api/v1/network", who.headers...)
		doc := ReadNetwork(t, r)
		if uuids := uuidRE.FindAll(r.Body, -1); len(uuids) > 0 {
			t.Errorf("%s: %d UUIDs in the answer, the first %s", who.name, len(uuids), uuids[0])
		}
		if bytes.Contains(r.Body, []byte(`"players":`)) {
			t.Errorf("%s: players in the answer: %s", who.name, Clip(r.Body))
		}
		if doc.Meta.Authenticated || !slices.Equal(doc.Meta.HiddenFields, []string{"players"}) {
			t.Errorf("%s: meta %+v", who.name, doc.Meta)
		}
		if doc.Data.TotalOnline != kd.Data.TotalOnline || doc.Data.ServerCount != 3 {
			t.Errorf("%s: the counts differ from the keyed answer's: %s", who.name, Clip(r.Body))
		}
		for i, s := range doc.Data.Servers {
			if s.Players != nil || s.Online != kd.Data.Servers[i].Online {
				t.Errorf("%s: server %+v", who.name, s)
			}
		}
		// The field layer as the reference writes it, from the keyed answer.
		WantFilteredFrom(t, withoutTimes(r), who.name, withoutTimes(keyed).Body, "players")
	}
	// The index lists network, as public, for everyone.
	if idx := Send(t, "GET", "/api/v1"); !bytes.Contains(idx.Body, []byte(`"name":"network","path":"/api/v1/network","description":"Cross-server aggregation","requiresKey":false`)) {
		t.Errorf("the anonymous index: %s", idx.Body)
	}
}

// withoutTimes is r with meta.updatedAt zeroed, so that two answers made a
// moment apart compare.
func withoutTimes(r Response) Response {
	r.Body = regexp.MustCompile(`"updatedAt":\d+,"cachedAt"`).ReplaceAll(r.Body, []byte(`"updatedAt":0,"cachedAt"`))
	return r
}

// TestNetworkHidden: a network that needs a key (the default) is the plain
// disguised 404 for a caller without one, absent from its index, and the
// 401 with hide_protected off; no member is asked.
func TestNetworkHidden(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	NetworkGateway(ms, nil, "key "+KeyA).Start(t)
	for _, m := range ms {
		m.Status(t)
	}
	WantNotFound(t, Send(t, "GET", "/api/v1/network"), "/api/v1/network")
	WantNotFound(t, Send(t, "GET", "/api/network", "Accept: text/event-stream"), "/api/network")
	WantNotFound(t, Send(t, "GET", "/api/v1/network", WithKey(BadKey)), "/api/v1/network")
	if idx := Send(t, "GET", "/api/v1"); bytes.Contains(idx.Body, []byte(`"network"`)) {
		t.Errorf("the anonymous index lists network: %s", idx.Body)
	}
	asked := func() {
		t.Helper()
		for _, m := range ms {
			if n := m.Trips(); n != 0 {
				t.Errorf("%s was asked %d times for refused callers", m.ID, n)
			}
		}
	}
	asked()
	NetworkGateway(ms, nil, "key "+KeyA, "hide_protected off").Start(t)
	WantError(t, Send(t, "GET", "/api/v1/network"), http.StatusUnauthorized, "/api/v1/network")
	asked()
}

// TestNetworkLive: a stream of /api/v1/network sends an event when one
// member's status changes, with the new count in it, and none while
// nothing changes.
func TestNetworkLive(t *testing.T) {
	type member struct {
		be     *Backend
		online atomic.Int32
	}
	members := make([]*member, 3)
	var block strings.Builder
	block.WriteString("network main {\n")
	for i := range members {
		m := &member{be: NewBackend(t)}
		m.online.Store(int32(i + 1))
		m.be.Respond = func(u *url.URL) (int, []byte) {
			if u.Path == "/api/v1/status" {
				return 200, Envelope(fmt.Sprintf(`{"online":[%q],"minecraft":%d,"discord":null}`, Alex, m.online.Load()))
			}
			return BackendResponse(u)
		}
		members[i] = m
		fmt.Fprintf(&block, "\t\t\tserver s%d %s\n", i, m.be.Addr())
	}
	block.WriteString("\t\t}")
	Gateway{Upstream: members[0].be.Addr(), Shared: true,
		Statusgate: []string{"key " + KeyA, "enable network", block.String(), "cache status 100ms", "snapshot status off"}}.Start(t)

	s := OpenLive(t, nil, "/api/v1/network", WithKey(KeyA))
	s.WantStream(t, "network stream")
	first := s.NextEvent(t)
	if !strings.Contains(first.Data, `"totalOnline":6,`) {
		t.Fatalf("first event: %s", first.Data)
	}
	members[1].online.Store(5)
	next := s.NextEvent(t)
	if next.End || next.ID == first.ID || !strings.Contains(next.Data, `"totalOnline":9,`) ||
		!strings.Contains(next.Data, `{"server":"s1","cluster":"main","online":5,`) {
		t.Errorf("after s1's change: %+v", next)
	}
}

// TestNetworkMemberLimitsAgree: a member's guard is the one a handler that
// declares the same backend gets, so the two must give it the same limits
// in one config; the load is refused naming both.
func TestNetworkMemberLimitsAgree(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby")
	g := NetworkGateway(ms, nil, "key "+KeyA)
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	g.Sites = append(g.Sites, fmt.Sprintf(":%d {\n\tstatusgate %s {\n\t\tmax_in_flight 3\n\t}\n}", port, ms[1].Addr()))
	msg := LoadRefused(t, g.Caddyfile())
	for _, w := range []string{"share a guard (they declare the same backend) but not its limits", "max_in_flight 3", "max_in_flight 8"} {
		if !strings.Contains(msg, w) {
			t.Errorf("refusal %q does not say %q", msg, w)
		}
	}
	// The same limits: one guard, and the config loads.
	g.Sites[len(g.Sites)-1] = fmt.Sprintf(":%d {\n\tstatusgate %s\n}", port, ms[1].Addr())
	g.Start(t)
	ReadNetwork(t, Send(t, "GET", "/api/v1/network", WithKey(KeyA)))
}

// TestNetworkLegacyForm: in the form of 1.0 (statusgate without upstreams,
// then reverse_proxy), self is fetched the way the handler reaches its
// backend, through that reverse_proxy, and every other member through its
// own proxy, never the handler's: each member gets its one /status trip.
func TestNetworkLegacyForm(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	g := NetworkGateway(ms, nil, "key "+KeyA)
	g.Legacy = true
	g.Start(t)
	for _, m := range ms {
		m.Status(t)
	}
	doc := ReadNetwork(t, Send(t, "GET", "/api/v1/network", WithKey(KeyA)))
	if doc.Data.ServerCount != 3 || len(doc.Meta.Unreachable) != 0 || doc.Data.ThisServer != "survival" {
		t.Errorf("the form of 1.0: %+v", doc)
	}
	for _, m := range ms {
		if n := m.Trips(); n != 1 {
			t.Errorf("%s: %d /status trips, want 1", m.ID, n)
		}
	}
}
