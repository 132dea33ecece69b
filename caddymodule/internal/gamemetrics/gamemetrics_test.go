package gamemetrics

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/internal/scrape"
)

// now is the tests' clock: the answers' times are near it.
var now = time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)

func ms(t time.Time) int64 { return t.UnixMilli() }

// answers are a server's five answers, as the plugin writes them.
func answers(online int) map[Endpoint]string {
	at := ms(now.Add(-2 * time.Second))
	return map[Endpoint]string{
		Status: fmt.Sprintf(`{"ok":true,"data":{"online":[],"minecraft":%d,"discord":null},"meta":{"version":"v1","updatedAt":%d,"cachedAt":%d}}`, online, ms(now), at),
		Performance: fmt.Sprintf(`{"ok":true,"data":{"tps":{"1m":19.98,"5m":20.0,"15m":20.0},"averageTickTimeMs":11.42,`+
			`"memory":{"usedBytes":3221225472,"freeBytes":1073741824,"totalBytes":4294967296,"maxBytes":8589934592,"usedMB":3072,"maxMB":8192},`+
			`"jvm":{"javaVersion":"25.0.3","javaVendor":"Eclipse Adoptium","osName":"Linux","osArch":"amd64","availableProcessors":8,"uptimeMs":86400000,"threadCount":74}},`+
			`"meta":{"version":"v1","updatedAt":%d}}`, ms(now)),
		Entities: fmt.Sprintf(`{"ok":true,"data":{"totalEntities":913,"worlds":[{"world":"world","total":801,"byType":{"ARMOR_STAND":4,"ZOMBIE":55}},`+
			`{"world":"world_nether","total":112,"byType":{"PIGLIN":40}}]},"meta":{"version":"v1","updatedAt":%d,"cachedAt":%d}}`, ms(now), at),
		Worlds: fmt.Sprintf(`{"ok":true,"data":{"count":2,"worlds":[{"name":"world","environment":"NORMAL","seed":-4172144997902289642,"loadedChunks":1452},`+
			`{"name":"world_nether","environment":"NETHER","seed":1,"loadedChunks":300}]},"meta":{"version":"v1","updatedAt":%d,"cachedAt":%d}}`, ms(now), at),
		ServerInfo: fmt.Sprintf(`{"ok":true,"data":{"brand":"Paper","maxPlayers":50,"motd":"hi","version":"26.1.2-72 (MC: 26.1.2)","minecraftVersion":"26.1.2","port":25565,"ip":"10.0.0.2"},`+
			`"meta":{"version":"v1","updatedAt":%d}}`, ms(now)),
	}
}

// fake is a game server: its answers, what it counts, and whether it is
// down.
type fake struct {
	mu    sync.Mutex
	body  map[Endpoint]string
	err   error
	busy  bool // the server's guard has no room: every trip is refused
	trips [numEndpoints]atomic.Int64
	hold  chan struct{} // non-nil: every trip waits for it (or its context)
}

func (f *fake) trip(ctx context.Context, ep Endpoint) Answer {
	f.trips[ep].Add(1)
	f.mu.Lock()
	body, err, hold, busy := f.body[ep], f.err, f.hold, f.busy
	f.mu.Unlock()
	if busy {
		return Answer{Busy: true}
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return Answer{Err: ctx.Err()}
		}
	}
	if err != nil {
		return Answer{Err: err}
	}
	if body == "" {
		return Answer{Err: errors.New("the server answered 404")}
	}
	return Answer{Body: []byte(body), TTL: time.Second}
}

// collector is a collector of the servers, on a clock the test moves,
// registered in a pedantic registry, as Caddy's is.
func collector(t *testing.T, o Options, servers map[string]*fake) (*Collector, *prometheus.Registry, *time.Time) {
	t.Helper()
	c := New(o)
	t.Cleanup(c.Close)
	clock := now
	c.now = func() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return clock }
	for name, f := range servers {
		if err := c.Add(Server{Name: name, Key: name, Where: name, Explicit: true, Trip: f.trip}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return c, reg, &clock
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got, err := scrape.Series(fams, "")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestFamilies: every family of a server, its values the answers' own.
func TestFamilies(t *testing.T) {
	lobby := &fake{body: answers(7)}
	_, reg, _ := collector(t, Options{EntityTypes: true}, map[string]*fake{"lobby": lobby})
	got := gather(t, reg)
	at := float64(ms(now.Add(-2*time.Second))) / 1000
	want := map[string]float64{
		`minecraft_up{server="lobby"}`:                                                                             1,
		`minecraft_players_online{server="lobby"}`:                                                                 7,
		`minecraft_players_max{server="lobby"}`:                                                                    50,
		`minecraft_tps{server="lobby"}`:                                                                            19.98,
		`minecraft_tick_duration_average_seconds{server="lobby"}`:                                                  0.01142,
		`minecraft_jvm_heap_used_bytes{server="lobby"}`:                                                            3221225472,
		`minecraft_jvm_heap_committed_bytes{server="lobby"}`:                                                       4294967296,
		`minecraft_jvm_heap_max_bytes{server="lobby"}`:                                                             8589934592,
		`minecraft_start_time_seconds{server="lobby"}`:                                                             float64(now.Unix() - 86400),
		`minecraft_world_entities{server="lobby",world="world"}`:                                                   801,
		`minecraft_world_entities{server="lobby",world="world_nether"}`:                                            112,
		`minecraft_world_entities_by_type{entity_type="zombie",server="lobby",world="world"}`:                      55,
		`minecraft_world_entities_by_type{entity_type="armor_stand",server="lobby",world="world"}`:                 4,
		`minecraft_world_entities_by_type{entity_type="piglin",server="lobby",world="world_nether"}`:               40,
		`minecraft_world_loaded_chunks{server="lobby",world="world"}`:                                              1452,
		`minecraft_world_loaded_chunks{server="lobby",world="world_nether"}`:                                       300,
		`minecraft_world_info{environment="normal",server="lobby",world="world"}`:                                  1,
		`minecraft_world_info{environment="nether",server="lobby",world="world_nether"}`:                           1,
		`minecraft_info{brand="Paper",minecraft_version="26.1.2",server="lobby",version="26.1.2-72 (MC: 26.1.2)"}`: 1,
		`minecraft_snapshot_timestamp_seconds{endpoint="status",server="lobby"}`:                                   at,
		`minecraft_snapshot_timestamp_seconds{endpoint="entities",server="lobby"}`:                                 at,
		`minecraft_snapshot_timestamp_seconds{endpoint="worlds",server="lobby"}`:                                   at,
		`minecraft_snapshot_timestamp_seconds{endpoint="performance",server="lobby"}`:                              float64(ms(now)) / 1000,
		`minecraft_snapshot_timestamp_seconds{endpoint="server",server="lobby"}`:                                   float64(ms(now)) / 1000,
	}
	for _, ep := range Endpoints {
		want[fmt.Sprintf(`caddy_http_statusgate_game_trips_total{endpoint=%q,server="lobby"}`, ep)] = 1
		want[fmt.Sprintf(`caddy_http_statusgate_game_trip_failures_total{endpoint=%q,server="lobby"}`, ep)] = 0
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s", k)
		}
	}
	for k := range got {
		for _, private := range []string{"10.0.0.2", "hi", "25565", "-4172144997902289642"} {
			if strings.Contains(k, private) {
				t.Errorf("series %s shows %s", k, private)
			}
		}
	}
}

// TestOneTripPerAnswer: scrapes at once, and scrapes while the answers are
// current, cost each endpoint one trip; one past their time, one more.
func TestOneTripPerAnswer(t *testing.T) {
	lobby := &fake{body: answers(3)}
	c, reg, clock := collector(t, Options{}, map[string]*fake{"lobby": lobby})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { gather(t, reg) })
	}
	wg.Wait()
	for _, ep := range Endpoints {
		if n := lobby.trips[ep].Load(); n != 1 {
			t.Errorf("%s: %d trips for 20 scrapes at once, want 1", ep, n)
		}
	}
	// Within the answers' time: nothing asked.
	gather(t, reg)
	// Past the status's time (its floor, a second), not the others'.
	c.mu.Lock()
	*clock = clock.Add(time.Second)
	c.mu.Unlock()
	gather(t, reg)
	gather(t, reg)
	if n := lobby.trips[Status].Load(); n != 2 {
		t.Errorf("status: %d trips, want 2", n)
	}
	if n := lobby.trips[ServerInfo].Load(); n != 1 {
		t.Errorf("server: %d trips within its minute, want 1", n)
	}
}

// TestDownMeansDown: a server that fails has minecraft_up 0, no data
// series, and its snapshot times as they were; back, its series are back.
// One endpoint that fails drops its own families only.
func TestDownMeansDown(t *testing.T) {
	lobby, hub := &fake{body: answers(4)}, &fake{body: answers(5)}
	c, reg, clock := collector(t, Options{}, map[string]*fake{"lobby": lobby, "hub": hub})
	first := gather(t, reg)
	lobby.mu.Lock()
	lobby.err = errors.New("connection refused")
	lobby.mu.Unlock()
	delete(hub.body, Performance) // a station switched off
	c.mu.Lock()
	*clock = clock.Add(time.Hour)
	c.mu.Unlock()
	got := gather(t, reg)
	if got[`minecraft_up{server="lobby"}`] != 0 || got[`minecraft_up{server="hub"}`] != 1 {
		t.Errorf("up: lobby %v, hub %v; want 0 and 1", got[`minecraft_up{server="lobby"}`], got[`minecraft_up{server="hub"}`])
	}
	for k := range got {
		data := strings.HasPrefix(k, "minecraft_") && !strings.HasPrefix(k, "minecraft_up") && !strings.HasPrefix(k, "minecraft_snapshot_timestamp")
		if data && strings.Contains(k, `server="lobby"`) {
			t.Errorf("lobby is down but has %s", k)
		}
		if strings.HasPrefix(k, "minecraft_tps{") || strings.HasPrefix(k, "minecraft_jvm_") {
			t.Errorf("hub's performance is off but there is %s", k)
		}
	}
	if got[`minecraft_players_online{server="hub"}`] != 5 {
		t.Errorf("hub's players: %v, want 5", got[`minecraft_players_online{server="hub"}`])
	}
	for _, ep := range Endpoints {
		k := fmt.Sprintf(`minecraft_snapshot_timestamp_seconds{endpoint=%q,server="lobby"}`, ep)
		if got[k] != first[k] || got[k] == 0 {
			t.Errorf("%s = %v through the outage, want its last good value %v", k, got[k], first[k])
		}
		if n := got[fmt.Sprintf(`caddy_http_statusgate_game_trip_failures_total{endpoint=%q,server="lobby"}`, ep)]; n != 1 {
			t.Errorf("lobby's %s failures: %v, want 1", ep, n)
		}
	}
	lobby.mu.Lock()
	lobby.err = nil
	lobby.mu.Unlock()
	c.mu.Lock()
	*clock = clock.Add(time.Hour)
	c.mu.Unlock()
	if got := gather(t, reg); got[`minecraft_up{server="lobby"}`] != 1 || got[`minecraft_players_online{server="lobby"}`] != 4 {
		t.Errorf("lobby back: up %v, players %v", got[`minecraft_up{server="lobby"}`], got[`minecraft_players_online{server="lobby"}`])
	}
}

// TestBusyIsNotDown: a trip the server's guard has no room for (clients
// load it) says nothing of the server: it stays up with its last reading,
// and no trip failure is counted.
func TestBusyIsNotDown(t *testing.T) {
	lobby := &fake{body: answers(4)}
	c, reg, clock := collector(t, Options{}, map[string]*fake{"lobby": lobby})
	if got := gather(t, reg); got[`minecraft_up{server="lobby"}`] != 1 {
		t.Fatalf("lobby not up at first: %v", got[`minecraft_up{server="lobby"}`])
	}
	lobby.mu.Lock()
	lobby.busy = true
	lobby.mu.Unlock()
	c.mu.Lock()
	*clock = clock.Add(time.Hour) // every reading due again
	c.mu.Unlock()
	got := gather(t, reg)
	if got[`minecraft_up{server="lobby"}`] != 1 || got[`minecraft_players_online{server="lobby"}`] != 4 {
		t.Errorf("a busy guard: up %v, players %v; want 1 and the last reading's 4",
			got[`minecraft_up{server="lobby"}`], got[`minecraft_players_online{server="lobby"}`])
	}
	if n := got[`caddy_http_statusgate_game_trip_failures_total{endpoint="status",server="lobby"}`]; n != 0 {
		t.Errorf("a busy guard counted %v trip failures, want 0", n)
	}
}

// TestStarting: the plugin's "initializing" answer is no status: down,
// with no zero counts.
func TestStarting(t *testing.T) {
	a := answers(0)
	init := fmt.Sprintf(`{"ok":true,"data":{"status":"initializing","message":"Data is not ready yet, please retry shortly"},"meta":{"version":"v1","updatedAt":%d,"cachedAt":null}}`, ms(now))
	a[Status], a[Entities], a[Worlds] = init, init, init
	_, reg, _ := collector(t, Options{}, map[string]*fake{"lobby": {body: a}})
	got := gather(t, reg)
	if got[`minecraft_up{server="lobby"}`] != 0 {
		t.Error("a starting server is up")
	}
	for k := range got {
		if strings.HasPrefix(k, "minecraft_players_online") || strings.HasPrefix(k, "minecraft_world_") {
			t.Errorf("a starting server has %s", k)
		}
	}
}

// TestSlowServerLeftOut: a server that does not answer is left out of the
// scrape, which ends at its bound without it, the others in; its trip is
// not asked again while under way.
func TestSlowServerLeftOut(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	slow, quick := &fake{body: answers(1), hold: hold}, &fake{body: answers(2)}
	c, reg, clock := collector(t, Options{}, map[string]*fake{"slow": slow, "quick": quick})
	c.bound = 20 * time.Millisecond // the scrape ends by itself
	// Only slow is asserted here: on a busy machine quick may miss so short
	// a bound too. The next scrape, whose bound is an hour, asserts quick.
	got := gather(t, reg)
	if got[`minecraft_up{server="slow"}`] != 0 {
		t.Errorf("slow up %v", got[`minecraft_up{server="slow"}`])
	}
	// The first scrape's trips end by their own bound, perhaps after the
	// scrape did: one still under way would be joined by the next scrape
	// (no second trip), or would end on the clock moved below (its failure
	// then current for the next scrape).
	fixture.WaitFor(t, "the first scrape's trips to end", func() bool { return !underWay(c) })
	// Its failure over, the next scrape asks again but does not wait: with
	// a bound of an hour, a scrape that waited would never end.
	c.mu.Lock()
	c.bound = time.Hour
	*clock = clock.Add(time.Minute)
	c.mu.Unlock()
	got = gather(t, reg)
	if got[`minecraft_up{server="slow"}`] != 0 || got[`minecraft_up{server="quick"}`] != 1 || got[`minecraft_players_online{server="quick"}`] != 2 {
		t.Errorf("hung: slow up %v, quick up %v players %v", got[`minecraft_up{server="slow"}`], got[`minecraft_up{server="quick"}`], got[`minecraft_players_online{server="quick"}`])
	}
	// The second trip starts in a goroutine of its own, perhaps after the
	// scrape that left slow out at once has ended.
	fixture.WaitFor(t, "slow's second status trip", func() bool { return slow.trips[Status].Load() >= 2 })
	if n := slow.trips[Status].Load(); n != 2 {
		t.Errorf("slow's status asked %d times, want 2 (the second trip goes on)", n)
	}
}

// TestBoundedLabels: 200 worlds, names of 10 KB with bad UTF-8, names that
// clean up to one, entity types to match: the exposition is valid, the
// worlds capped, the rest summed, every value at most MaxLabel bytes.
func TestBoundedLabels(t *testing.T) {
	at := ms(now)
	var ents, worlds []string
	total := 0
	for i := range 200 {
		name := fmt.Sprintf("w%03d\xff\xfe", i) + strings.Repeat("é", 5000)
		if i%50 == 0 {
			name = "_other"
		}
		ents = append(ents, fmt.Sprintf(`{"world":"%s","total":%d,"byType":{"%s":1}}`, name, i, "Z\xffOMBIE"+strings.Repeat("X", 300)))
		worlds = append(worlds, fmt.Sprintf(`{"name":"%s","environment":"%s","loadedChunks":1}`, name, "NORMAL\xff"))
		total += i
	}
	a := answers(1)
	a[Entities] = fmt.Sprintf(`{"ok":true,"data":{"totalEntities":1,"worlds":[%s]},"meta":{"updatedAt":%d,"cachedAt":%d}}`, strings.Join(ents, ","), at, at)
	a[Worlds] = fmt.Sprintf(`{"ok":true,"data":{"count":200,"worlds":[%s]},"meta":{"updatedAt":%d,"cachedAt":%d}}`, strings.Join(worlds, ","), at, at)
	c, reg, _ := collector(t, Options{MaxWorlds: 8, EntityTypes: true}, map[string]*fake{"big": {body: a}})
	c.bound = time.Hour // 4 MB to read, under the race detector on a busy machine
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	sum, n := 0.0, 0
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if len(l.GetValue()) > MaxLabel {
					t.Errorf("%s: label %s of %d bytes", f.GetName(), l.GetName(), len(l.GetValue()))
				}
			}
			if f.GetName() == "minecraft_world_entities" {
				sum += m.GetGauge().GetValue()
				n++
			}
		}
	}
	if n != 9 || sum != float64(total) {
		t.Errorf("world_entities: %d series summing to %v, want 9 (8 and _other) summing to %d", n, sum, total)
	}
}

// TestNames: one backend under two names, or one name for two, is
// refused; an upstream as written gives way to a name.
func TestNames(t *testing.T) {
	c := New(Options{})
	defer c.Close()
	trip := (&fake{}).trip
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Add(Server{Name: "10.0.0.2:8080", Key: 1, Where: "handler A", Trip: trip}))
	must(c.Add(Server{Name: "survival", Key: 1, Where: "member survival", Explicit: true, Trip: trip}))
	must(c.Add(Server{Name: "10.0.0.2:8080", Key: 1, Where: "handler B", Trip: trip}))
	if c.servers[0].Name != "survival" || len(c.servers) != 1 {
		t.Errorf("servers %+v, want survival alone", c.servers[0].Server)
	}
	err := c.Add(Server{Name: "main-survival", Key: 1, Where: "member main-survival", Explicit: true, Trip: trip})
	if err == nil || !strings.Contains(err.Error(), "member survival") || !strings.Contains(err.Error(), "member main-survival") {
		t.Errorf("two names for one: %v", err)
	}
	err = c.Add(Server{Name: "survival", Key: 2, Where: "member survival of network b", Explicit: true, Trip: trip})
	if err == nil || !strings.Contains(err.Error(), "member survival of network b") {
		t.Errorf("one name for two: %v", err)
	}
	must(c.Add(Server{Name: "10.0.0.3:8080", Key: 3, Where: "handler C", Trip: trip}))
	if err := c.Add(Server{Name: "10.0.0.3:8080", Key: 4, Where: "handler D", Trip: trip}); !errors.Is(err, ErrUnnamed) {
		t.Errorf("two unnamed backends of one address: %v, want ErrUnnamed", err)
	}
}

// TestDocumented: every family has its row in docs/observability.md's
// "The game's metrics", and the section names no other.
func TestDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## The game's metrics")
	if !ok {
		t.Fatal(`docs/observability.md has no "## The game's metrics"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	names := map[string]bool{}
	for _, d := range allDescs {
		name := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String())[1]
		names[name] = true
		if !strings.Contains(section, "| `"+name+"` |") {
			t.Errorf("%s has no row in docs/observability.md's game section", name)
		}
	}
	for _, m := range regexp.MustCompile("\\| `((?:minecraft|caddy_http_statusgate)_[a-z_]+)` \\|").FindAllStringSubmatch(section, -1) {
		if !names[m[1]] {
			t.Errorf("docs/observability.md's game section has a row for %s, which is not exported", m[1])
		}
	}
}

// underWay reports whether a trip of c is under way.
func underWay(c *Collector) bool {
	c.mu.Lock()
	servers := slices.Clone(c.servers)
	c.mu.Unlock()
	for _, s := range servers {
		for i := range s.entries {
			e := &s.entries[i]
			e.mu.Lock()
			f := e.flight
			e.mu.Unlock()
			if f != nil {
				return true
			}
		}
	}
	return false
}
