package network

// The game's metrics (docs/observability.md, "The game's metrics") of
// three simulated servers declared once, through a real Caddy: the
// minecraft_* families equal the servers' own answers, scrapes cost the
// servers at most a trip per snapshot, down means down, and a backend's
// labels cannot break /metrics.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/internal/sim"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// gameNetwork starts three simulated servers, survival, lobby and creative
// (frozen, or live), each as a site of the in-process Caddy, and returns
// them with the config that declares them once in the global option and
// exports their game metrics (gameConfig), for the test to load, changed
// or as it is.
func gameNetwork(t *testing.T, live bool) ([]SimMember, string) {
	t.Helper()
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	addrs, names := map[string]string{}, []string{}
	var sites []string
	for i, m := range ms {
		addrs[m.ID], names = m.Addr(), append(names, m.ID)
		sites = append(sites, simSite(m, i, live))
	}
	return ms, gameConfig(names, addrs, sites...)
}

// gameConfig is a gateway of the servers declared once (name → address),
// a handler in front of the first with a network of them all, and the
// sites given (the sims').
func gameConfig(names []string, addrs map[string]string, sites ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tskip_install_trust\n\tadmin localhost:%d\n\thttp_port %d\n\thttps_port %d\n\tdefault_bind 127.0.0.1\n\tauto_https off\n\tgrace_period 5s\n\tlog {\n\t\toutput discard\n\t}\n\tstatusgate {\n",
		AdminPort, HTTPPort, HTTPSPort)
	for _, n := range names {
		fmt.Fprintf(&b, "\t\tserver %s %s\n", n, addrs[n])
	}
	fmt.Fprintf(&b, "\t}\n}\n:%d {\n\tstatusgate {\n\t\tserver %s\n\t\tenable network\n\t\tnetwork main {\n", HTTPPort, names[0])
	for _, n := range names {
		fmt.Fprintf(&b, "\t\t\tserver %s\n", n)
	}
	fmt.Fprintf(&b, "\t\t\tself %s\n\t\t}\n\t}\n}\n", names[0])
	for _, s := range sites {
		b.WriteString(s + "\n")
	}
	return b.String()
}

// simSite is a statusgate_sim site for m, seed i+1: frozen, or live.
func simSite(m SimMember, i int, live bool) string {
	frozen := "on"
	if live {
		frozen = "off"
	}
	return m.Site(i, "frozen "+frozen)
}

// scrapeAll reads the game's and the gateway's series of Caddy's admin
// /metrics, which must
// answer 200 with a valid exposition.
func scrapeAll(t testing.TB) map[string]float64 {
	t.Helper()
	got, _ := ScrapeSeries(t, AdminURL+"/metrics", "minecraft_", "caddy_http_statusgate_")
	return got
}

// direct is a member's own answer of an endpoint, asked directly: its
// data, numbers as json.Number.
func direct(t *testing.T, m SimMember, endpoint string) map[string]any {
	t.Helper()
	res, err := http.Get("http://" + m.Addr() + "/api/v1/" + endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var env struct {
		Data map[string]any
		Meta map[string]any
	}
	d := json.NewDecoder(res.Body)
	d.UseNumber()
	if err := d.Decode(&env); err != nil {
		t.Fatal(err)
	}
	env.Data["_meta"] = env.Meta
	return env.Data
}

func num(t *testing.T, v any) float64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v is no number", v)
	}
	f, _ := n.Float64()
	return f
}

// TestGameMetrics: through a real Caddy with three frozen simulated
// servers declared once, /metrics has each family for each server with the
// values of the servers' own answers, the network's membership, and the
// gateway's guard series under each server's name.
func TestGameMetrics(t *testing.T) {
	ms, config := gameNetwork(t, false)
	LoadCaddyfile(t, config)
	Send(t, "GET", "/api/v1/status")
	got := scrapeAll(t)
	// The handler's request counters name the server it fronts.
	if n := got[`caddy_http_statusgate_requests_total{endpoint="status",outcome="filtered",server="survival"}`]; n != 1 {
		t.Errorf(`requests_total{endpoint="status",outcome="filtered",server="survival"} = %v, want 1`, n)
	}
	for _, m := range ms {
		s := fmt.Sprintf("server=%q", m.ID)
		want := map[string]float64{
			"minecraft_up{" + s + "}": 1,
			`caddy_http_statusgate_network_member_info{network="main",` + s + "}": 1,
		}
		status := direct(t, m, "status")
		want["minecraft_players_online{"+s+"}"] = num(t, status["minecraft"])
		want[`minecraft_snapshot_timestamp_seconds{endpoint="status",`+s+"}"] = num(t, status["_meta"].(map[string]any)["cachedAt"]) / 1000
		perf := direct(t, m, "performance")
		want["minecraft_tps{"+s+"}"] = num(t, perf["tps"].(map[string]any)["1m"])
		want["minecraft_tick_duration_average_seconds{"+s+"}"] = num(t, perf["averageTickTimeMs"]) / 1000
		mem := perf["memory"].(map[string]any)
		want["minecraft_jvm_heap_used_bytes{"+s+"}"] = num(t, mem["usedBytes"])
		want["minecraft_jvm_heap_committed_bytes{"+s+"}"] = num(t, mem["totalBytes"])
		want["minecraft_jvm_heap_max_bytes{"+s+"}"] = num(t, mem["maxBytes"])
		info := direct(t, m, "server")
		want["minecraft_players_max{"+s+"}"] = num(t, info["maxPlayers"])
		want[fmt.Sprintf(`minecraft_info{brand=%q,minecraft_version=%q,%s,version=%q}`, info["brand"], info["minecraftVersion"], s, info["version"])] = 1
		for _, w := range direct(t, m, "entities")["worlds"].([]any) {
			w := w.(map[string]any)
			want[fmt.Sprintf(`minecraft_world_entities{%s,world=%q}`, s, w["world"])] = num(t, w["total"])
		}
		for _, w := range direct(t, m, "worlds")["worlds"].([]any) {
			w := w.(map[string]any)
			want[fmt.Sprintf(`minecraft_world_loaded_chunks{%s,world=%q}`, s, w["name"])] = num(t, w["loadedChunks"])
			want[fmt.Sprintf(`minecraft_world_info{environment=%q,%s,world=%q}`, strings.ToLower(w["environment"].(string)), s, w["name"])] = 1
		}
		// The gateway's own series name the server.
		if _, ok := got[fmt.Sprintf(`caddy_http_statusgate_held_bytes{guard=%q}`, m.ID)]; !ok {
			t.Errorf("no caddy_http_statusgate_held_bytes{guard=%q}: the guard series do not name the server", m.ID)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %v (present %v), want %v: the server's own answer", k, g, ok, v)
			}
		}
		if _, ok := got["minecraft_start_time_seconds{"+s+"}"]; !ok {
			t.Errorf("no minecraft_start_time_seconds of %s", m.ID)
		}
	}
	for k := range got {
		if strings.Contains(k, "-4") && strings.HasPrefix(k, "minecraft_") || strings.Contains(k, "Emerald") {
			t.Errorf("a private value in %s", k)
		}
	}
}

// TestGameMetricsOneTripPerSnapshot: with live simulated servers, nothing
// is asked until someone scrapes; then 20 scrapers at once for 15 s cost
// each server at most one status trip per its snapshot (5 s), counted by
// the servers themselves, and the gateway's own counter shows the trips.
func TestGameMetricsOneTripPerSnapshot(t *testing.T) {
	ms, config := gameNetwork(t, true)
	LoadCaddyfile(t, config)
	for _, m := range ms {
		if n := sim.Lookup(m.Name).Snapshot().Requests; n != 0 {
			t.Errorf("%s: %d requests with nobody scraping, want none", m.ID, n)
		}
	}
	const scrapers, period = 20, 15 * time.Second
	start := time.Now()
	stop := start.Add(period)
	var wg sync.WaitGroup
	var scrapes sync.Map
	for i := range scrapers {
		wg.Go(func() {
			n := 0
			for time.Now().Before(stop) {
				scrapeAll(t)
				n++
				time.Sleep(100 * time.Millisecond) // a scraper's pace, not a wait for anything
			}
			scrapes.Store(i, n)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := 0
	scrapes.Range(func(_, v any) bool { total += v.(int); return true })
	got := scrapeAll(t)
	// At most one per snapshot: the snapshots the run saw begin, and the one
	// it started in (and the last scrape's).
	most := int64(elapsed/(5*time.Second)) + 2
	for _, m := range ms {
		st := sim.Lookup(m.Name).Snapshot()
		trips := st.Stations["status"].Requests
		t.Logf("%s: %d status trips, %d performance, %d entities, %d worlds, %d server for %d scrapes in %v (gateway's count: %v)",
			m.ID, trips, st.Stations["performance"].Requests, st.Stations["entities"].Requests, st.Stations["worlds"].Requests, st.Stations["server"].Requests,
			total, elapsed.Round(time.Millisecond), got[fmt.Sprintf(`caddy_http_statusgate_game_trips_total{endpoint="status",server=%q}`, m.ID)])
		if trips > most || trips == 0 {
			t.Errorf("%s: %d status trips in %v of scrapes, want 1 to %d (one per 5 s snapshot)", m.ID, trips, elapsed, most)
		}
		if n := got[fmt.Sprintf(`caddy_http_statusgate_game_trips_total{endpoint="status",server=%q}`, m.ID)]; n < float64(trips) {
			t.Errorf("%s: the gateway counts %v status trips for the game metrics, the server got %d", m.ID, n, trips)
		}
	}
}

// TestGameMetricsDown: a server stopped mid-run has minecraft_up 0 and
// no data series, its snapshot time kept, while the others go on; back,
// its series are back.
func TestGameMetricsDown(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	lobby := newDoor(t, ms[1].Addr())
	addrs := map[string]string{"survival": ms[0].Addr(), "lobby": lobby.addr, "creative": ms[2].Addr()}
	var sites []string
	for i, m := range ms {
		sites = append(sites, simSite(m, i, false))
	}
	LoadCaddyfile(t, gameConfig([]string{"survival", "lobby", "creative"}, addrs, sites...))
	first := scrapeAll(t)
	const up, ts = `minecraft_up{server="lobby"}`, `minecraft_snapshot_timestamp_seconds{endpoint="status",server="lobby"}`
	if first[up] != 1 || first[ts] == 0 {
		t.Fatalf("lobby before: up %v, snapshot time %v", first[up], first[ts])
	}
	lobby.shut()
	var got map[string]float64
	fixture.WaitEvery(t, "lobby down", 50*time.Millisecond, func() bool {
		got = scrapeAll(t)
		return got[up] == 0
	})
	for k := range got {
		if strings.HasPrefix(k, "minecraft_") && strings.Contains(k, `server="lobby"`) &&
			!strings.HasPrefix(k, "minecraft_up{") && !strings.HasPrefix(k, "minecraft_snapshot_timestamp_seconds{") {
			t.Errorf("lobby is down but has %s", k)
		}
	}
	if got[ts] != first[ts] {
		t.Errorf("lobby's snapshot time through the outage: %v, want its last good %v", got[ts], first[ts])
	}
	for _, other := range []string{"survival", "creative"} {
		if got[fmt.Sprintf("minecraft_up{server=%q}", other)] != 1 || got[fmt.Sprintf("minecraft_players_online{server=%q}", other)] == 0 && first[fmt.Sprintf("minecraft_players_online{server=%q}", other)] != 0 {
			t.Errorf("%s went with lobby", other)
		}
	}
	lobby.open()
	fixture.WaitEvery(t, "lobby back", 50*time.Millisecond, func() bool {
		got = scrapeAll(t)
		return got[up] == 1
	})
	if k := `minecraft_players_online{server="lobby"}`; got[k] != first[k] {
		t.Errorf("lobby back: %s = %v, want %v", k, got[k], first[k])
	}
}

// TestGameMetricsBoundedLabels: a server whose answers list 200 worlds
// with invalid UTF-8 and 10 KB names gives a bounded, valid exposition,
// and Caddy's /metrics answers 200.
func TestGameMetricsBoundedLabels(t *testing.T) {
	now := time.Now().UnixMilli()
	var ents, worlds []string
	for i := range 200 {
		name := fmt.Sprintf("w%03d\xff\xc3", i) + strings.Repeat("é", 5000)
		ents = append(ents, fmt.Sprintf(`{"world":"%s","total":%d,"byType":{"ZOMBIE":1}}`, name, i))
		worlds = append(worlds, fmt.Sprintf(`{"name":"%s","environment":"NORMAL","loadedChunks":%d}`, name, i))
	}
	bodies := map[string]string{
		"/api/v1/status":      fmt.Sprintf(`{"ok":true,"data":{"online":[],"minecraft":3,"discord":null},"meta":{"version":"v1","updatedAt":%d,"cachedAt":%d}}`, now, now),
		"/api/v1/entities":    fmt.Sprintf(`{"ok":true,"data":{"totalEntities":1,"worlds":[%s]},"meta":{"version":"v1","updatedAt":%d,"cachedAt":%d}}`, strings.Join(ents, ","), now, now),
		"/api/v1/worlds":      fmt.Sprintf(`{"ok":true,"data":{"count":200,"worlds":[%s]},"meta":{"version":"v1","updatedAt":%d,"cachedAt":%d}}`, strings.Join(worlds, ","), now, now),
		"/api/v1/performance": fmt.Sprintf(`{"ok":true,"data":{"tps":{"1m":20.0}},"meta":{"version":"v1","updatedAt":%d}}`, now),
		"/api/v1/server":      fmt.Sprintf(`{"ok":true,"data":{"brand":"P\xffaper%s","version":"x","minecraftVersion":"y","maxPlayers":5},"meta":{"version":"v1","updatedAt":%d}}`, strings.Repeat("a", 10000), now),
	}
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, bodies[r.URL.Path])
	}))
	defer be.Close()
	ms := NewSimMembers(t, "survival")
	LoadCaddyfile(t, gameConfig([]string{"survival", "big"}, map[string]string{"survival": ms[0].Addr(), "big": strings.TrimPrefix(be.URL, "http://")}, simSite(ms[0], 0, false)))
	var got map[string]float64
	fixture.WaitEvery(t, "big's worlds", 50*time.Millisecond, func() bool {
		got = scrapeAll(t) // 200 and a valid exposition, every time
		_, ok := got[`minecraft_world_entities{server="big",world="_other"}`]
		return ok
	})
	per := map[string]int{}
	for k := range got {
		if !strings.Contains(k, `server="big"`) {
			continue
		}
		name, _, _ := strings.Cut(k, "{")
		per[name]++
		if !utf8.ValidString(k) || len(k) > 600 {
			t.Errorf("series of %d bytes, valid UTF-8 %v: %.200s", len(k), utf8.ValidString(k), k)
		}
	}
	if per["minecraft_world_entities"] != 33 || per["minecraft_world_loaded_chunks"] != 33 || per["minecraft_world_info"] != 32 {
		t.Errorf("series per family: %v, want 32 worlds and _other", per)
	}
	if got[`minecraft_players_online{server="big"}`] != 3 {
		t.Errorf("big's players: %v", got[`minecraft_players_online{server="big"}`])
	}
}

// TestGameMetricsOneNameOneServer: a config that would export one server's
// series twice, or two servers' under one name, is refused at load with
// both places named: two networks naming one server lobby and hub, and
// two networks each with a lobby of its own.
func TestGameMetricsOneNameOneServer(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	var sites []string
	for i, m := range ms {
		sites = append(sites, simSite(m, i, false))
	}
	config := func(second string) string {
		return fmt.Sprintf("{\n\tadmin localhost:%d\n\thttp_port %d\n\thttps_port %d\n\tdefault_bind 127.0.0.1\n\tauto_https off\n}\n"+
			":%d {\n\thandle_path /a/* {\n\t\tstatusgate %s {\n\t\t\tenable network\n\t\t\tnetwork a {\n\t\t\t\tserver survival %s\n\t\t\t\tserver lobby %s\n\t\t\t\tself survival\n\t\t\t}\n\t\t}\n\t}\n"+
			"\thandle {\n\t\tstatusgate %s {\n\t\t\tenable network\n\t\t\tnetwork b {\n\t\t\t\tserver survival %s\n\t\t\t\tserver %s\n\t\t\t\tself survival\n\t\t\t}\n\t\t}\n\t}\n}\n%s\n",
			AdminPort, HTTPPort, HTTPSPort, HTTPPort, ms[0].Addr(), ms[0].Addr(), ms[1].Addr(), ms[0].Addr(), ms[0].Addr(), second, strings.Join(sites, "\n"))
	}
	msg := LoadRefused(t, config("hub "+ms[1].Addr()))
	for _, want := range []string{"one backend under two names", "server lobby", "network a", "server hub", "network b"} {
		if !strings.Contains(msg, want) {
			t.Errorf("lobby as hub: %q lacks %q", msg, want)
		}
	}
	msg = LoadRefused(t, config("lobby "+ms[2].Addr()))
	for _, want := range []string{"two backends under one name", `server="lobby"`, "network a", "network b"} {
		if !strings.Contains(msg, want) {
			t.Errorf("two lobbies: %q lacks %q", msg, want)
		}
	}
	LoadCaddyfile(t, config("lobby "+ms[1].Addr())) // the same lobby in both: one server
	if got := scrapeAll(t); got[`minecraft_up{server="lobby"}`] != 1 || got[`caddy_http_statusgate_network_member_info{network="b",server="lobby"}`] != 1 {
		t.Errorf("lobby in two networks: up %v, in b %v", got[`minecraft_up{server="lobby"}`], got[`caddy_http_statusgate_network_member_info{network="b",server="lobby"}`])
	}
	// A guard's name is the pool the backend's counts are kept in, not the
	// server's name: the network's name for it stands, as it does over its
	// upstreams as written (a config that loaded before the game metrics).
	LoadCaddyfile(t, strings.Replace(config("lobby "+ms[1].Addr()), "\t\t\tenable network\n\t\t\tnetwork a", "\t\t\tguard main\n\t\t\tenable network\n\t\t\tnetwork a", 1))
	if got := scrapeAll(t); got[`minecraft_up{server="survival"}`] != 1 || got[`minecraft_up{server="main"}`] != 0 {
		t.Errorf("survival behind guard main: up %v, as main %v", got[`minecraft_up{server="survival"}`], got[`minecraft_up{server="main"}`])
	}
}

// TestGameMetricsWithinLimits: the game metrics' trips go through the
// server's guard, within its limits: with lobby's one place (max_in_flight
// 1, no queue) held by a client's request, a scrape leaves lobby out
// (minecraft_up 0) instead of sending it a second request; once the place
// is free, lobby is back, never more than one request at it.
func TestGameMetricsWithinLimits(t *testing.T) {
	be := NewGatedBackend(t)
	LoadCaddyfile(t, fmt.Sprintf("{\n\tadmin localhost:%d\n\thttp_port %d\n\thttps_port %d\n\tdefault_bind 127.0.0.1\n\tauto_https off\n\tlog {\n\t\toutput discard\n\t}\n"+
		"\tstatusgate {\n\t\tserver lobby %s {\n\t\t\tmax_in_flight 1\n\t\t\tqueue off\n\t\t}\n\t\ttimeout 30s\n\t}\n}\n:%d {\n\tstatusgate {\n\t\tserver lobby\n\t}\n}\n",
		AdminPort, HTTPPort, HTTPSPort, be.Addr(), HTTPPort))
	held := make(chan Response, 1)
	go func() { held <- Send(t, "GET", "/api/v1/player/"+Alex) }()
	be.Await(t, 1)
	got := scrapeAll(t)
	if got[`minecraft_up{server="lobby"}`] != 0 || be.Peak.Load() != 1 {
		t.Errorf("lobby's one place held: up %v, peak %d at lobby; want 0 and 1", got[`minecraft_up{server="lobby"}`], be.Peak.Load())
	}
	be.Open()
	fixture.Recv(t, held, "the client's request")
	fixture.WaitEvery(t, "lobby up", 50*time.Millisecond, func() bool { return scrapeAll(t)[`minecraft_up{server="lobby"}`] == 1 })
	if p := be.Peak.Load(); p > 1 {
		t.Errorf("lobby held %d requests at once, above its max_in_flight 1", p)
	}
}
