package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// unknownUUID is a valid UUID the simulated server has never seen.
const unknownUUID = "00000000-0000-4000-8000-000000000001"

// newSim provisions s. Unless the test sets latencies, every station is
// instant: the data tests must not wait for the capacity model.
func newSim(t testing.TB, s *Sim) *Sim {
	t.Helper()
	if s.Latency == nil {
		s.Latency = map[string]Span{latencyAll: {}}
	}
	provision(t, s)
	return s
}

func seeded(t testing.TB, seed int64) *Sim {
	return newSim(t, &Sim{Seed: &seed})
}

func do(s *Sim, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, target, nil)
	if err := s.ServeHTTP(rec, req, nil); err != nil {
		panic(err)
	}
	return rec
}

// envelope is a decoded response, numbers kept as json.Number.
type envelope struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data"`
	Error map[string]any  `json:"error"`
	Meta  json.RawMessage `json:"meta"`
}

func decode(t *testing.T, body []byte) envelope {
	t.Helper()
	var e envelope
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("body is not JSON: %v\n%.300s", err, body)
	}
	return e
}

func asObject(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("not a JSON object: %v\n%.300s", err, raw)
	}
	return m
}

// keys returns the member names of a JSON object in document order.
func keys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %.200s", raw)
	}
	var out []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// shape maps a member name to its expected kind: string, int, double,
// bool, object, array, with a trailing ? when null is allowed too.
type shape map[string]string

func checkShape(t *testing.T, where string, m map[string]any, want shape) {
	t.Helper()
	for k, kind := range want {
		v, ok := m[k]
		if !ok {
			t.Errorf("%s: missing %q", where, k)
			continue
		}
		nullable := strings.HasSuffix(kind, "?")
		kind = strings.TrimSuffix(kind, "?")
		if v == nil {
			if !nullable {
				t.Errorf("%s.%s is null, want %s", where, k, kind)
			}
			continue
		}
		var got string
		switch v := v.(type) {
		case string:
			got = "string"
		case bool:
			got = "bool"
		case json.Number:
			got = "double"
			if !strings.ContainsAny(string(v), ".eE") {
				got = "int"
			}
			if kind == "double" && got == "int" {
				got = "double" // BigDecimal.toPlainString may drop the point (1.3E8)
			}
		case map[string]any:
			got = "object"
		case []any:
			got = "array"
		}
		if got != kind {
			t.Errorf("%s.%s = %v: %s, want %s", where, k, v, got, kind)
		}
	}
	if len(m) != len(want) {
		var extra []string
		for k := range m {
			if _, ok := want[k]; !ok {
				extra = append(extra, k)
			}
		}
		t.Errorf("%s: unexpected members %v", where, extra)
	}
}

func sub(t *testing.T, m map[string]any, k string) map[string]any {
	t.Helper()
	o, ok := m[k].(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, want an object", k, m[k])
	}
	return o
}

func elems(t *testing.T, m map[string]any, k string) []map[string]any {
	t.Helper()
	arr, ok := m[k].([]any)
	if !ok {
		t.Fatalf("%s is %T, want an array", k, m[k])
	}
	out := make([]map[string]any, len(arr))
	for i, v := range arr {
		if out[i], ok = v.(map[string]any); !ok {
			t.Fatalf("%s[%d] is %T, want an object", k, i, v)
		}
	}
	return out
}

// get fetches a path that must succeed and returns its data object after
// checking the envelope and the meta members and their order.
func get(t *testing.T, s *Sim, target string, snapshot bool) (map[string]any, []byte) {
	t.Helper()
	rec := do(s, "GET", target)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
	}
	body := rec.Body.Bytes()
	if got := keys(t, body); !slices.Equal(got, []string{"ok", "data", "meta"}) {
		t.Errorf("GET %s: envelope keys %v", target, got)
	}
	e := decode(t, body)
	if !e.OK {
		t.Errorf("GET %s: ok is false", target)
	}
	wantMeta := []string{"version", "server", "updatedAt", "authenticated"}
	if snapshot {
		wantMeta = []string{"version", "server", "updatedAt", "cachedAt", "authenticated"}
	}
	if got := keys(t, e.Meta); !slices.Equal(got, wantMeta) {
		t.Errorf("GET %s: meta keys %v, want %v", target, got, wantMeta)
	}
	meta := asObject(t, e.Meta)
	checkShape(t, target+" meta", meta, map[bool]shape{
		false: {"version": "string", "server": "string", "updatedAt": "int", "authenticated": "bool"},
		true:  {"version": "string", "server": "string", "updatedAt": "int", "cachedAt": "int", "authenticated": "bool"},
	}[snapshot])
	if meta["version"] != "v1" || meta["server"] != "global" || meta["authenticated"] != true {
		t.Errorf("GET %s: meta %v", target, meta)
	}
	if snapshot {
		cached, _ := meta["cachedAt"].(json.Number).Int64()
		updated, _ := meta["updatedAt"].(json.Number).Int64()
		if cached > updated || cached <= 0 {
			t.Errorf("GET %s: cachedAt %d, updatedAt %d", target, cached, updated)
		}
	}
	checkHeaders(t, rec.Header())
	return asObject(t, e.Data), e.Data
}

// getOrdered is get plus a check of the data members and their order.
func getOrdered(t *testing.T, s *Sim, target string, snapshot bool, order ...string) map[string]any {
	t.Helper()
	data, raw := get(t, s, target, snapshot)
	if got := keys(t, raw); !slices.Equal(got, order) {
		t.Errorf("GET %s: data keys %v, want %v", target, got, order)
	}
	return data
}

func checkHeaders(t *testing.T, h http.Header) {
	t.Helper()
	for k, v := range map[string]string{
		"Content-Type":                "application/json; charset=utf-8",
		"X-Content-Type-Options":      "nosniff",
		"Cache-Control":               "no-store",
		"Access-Control-Allow-Origin": "*",
	} {
		if got := h.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

// --- endpoints -------------------------------------------------------------

var stationOrder = []string{"status", "server", "performance", "worlds", "gamerules", "entities", "spawnlimits",
	"plugins", "whitelist", "player", "network", "placeholders", "punishments", "bans", "operators", "constants", "custom/votes"}

func TestIndex(t *testing.T) {
	s := seeded(t, 1)
	for _, p := range []string{"/api/v1", "/api", "/api/v1/", "/api/", "/api//"} {
		data := getOrdered(t, s, p, false, "name", "authEnabled", "pluginVersion", "versions", "alias", "stations")
		checkShape(t, "index", data, shape{"name": "string", "authEnabled": "bool", "pluginVersion": "string",
			"versions": "array", "alias": "string", "stations": "array"})
		if data["alias"] != "/api → /api/v1" || data["authEnabled"] != false || data["name"] != "ServerAPI" {
			t.Errorf("index %v", data)
		}
		v := elems(t, data, "versions")
		checkShape(t, "versions[0]", v[0], shape{"version": "string", "path": "string", "current": "bool"})
		var paths []string
		for _, st := range elems(t, data, "stations") {
			checkShape(t, "station", st, shape{"path": "string", "description": "string", "requiresKey": "bool"})
			if st["requiresKey"] != false {
				t.Errorf("auth is off, yet %v requires a key", st["path"])
			}
			paths = append(paths, strings.TrimPrefix(st["path"].(string), "/api/v1/"))
		}
		if !slices.Equal(paths, stationOrder) {
			t.Errorf("stations %v", paths)
		}
	}
	if !strings.Contains(do(s, "GET", "/api/v1").Body.String(), `"alias":"/api → /api/v1"`) {
		t.Error("the arrow must be written raw, not \\u-escaped")
	}
}

func TestStatus(t *testing.T) {
	s := seeded(t, 1)
	data := getOrdered(t, s, "/api/v1/status", true, "online", "minecraft", "discord")
	checkShape(t, "status", data, shape{"online": "array", "minecraft": "int", "discord": "int?"})
	online := data["online"].([]any)
	if n, _ := data["minecraft"].(json.Number).Int64(); int(n) != len(online) {
		t.Errorf("minecraft %d, online %d", n, len(online))
	}
	if !slices.Contains(online, any(alexUUID)) {
		t.Error("Alex_MC is always online")
	}
	if slices.Contains(online, any(grieferUUID)) {
		t.Error("a banned player is online")
	}
	for _, flag := range []string{"history=TRUE", "history=1", "history", "x=history=true"} {
		if d, _ := get(t, s, "/api/v1/status?"+flag, true); d["history"] != nil {
			t.Errorf("?%s turned history on", flag)
		}
	}
	for _, q := range []string{"history=true", "history=false&history=true", "history%3Dtrue", "a=1%26history=true"} {
		if d, _ := get(t, s, "/api/status?"+q, true); d["history"] == nil {
			t.Errorf("?%s did not turn history on", q)
		}
	}
}

func TestStatusHistoryNewestFirst(t *testing.T) {
	s := seeded(t, 1)
	data := getOrdered(t, s, "/api/v1/status?history=true", true, "online", "minecraft", "discord", "history")
	h := sub(t, data, "history")
	checkShape(t, "history", h, shape{"last": "int", "online": "array", "discord": "array"})
	last, _ := h["last"].(json.Number).Int64()
	if last > frozenAt || last%historyInterval != 0 || frozenAt-last >= historyInterval {
		t.Errorf("last %d is not the newest 10-minute sample before %d", last, frozenAt)
	}
	online := h["online"].([]any)
	discord := h["discord"].([]any)
	if len(online) != historySamples || len(discord) != historySamples {
		t.Fatalf("%d/%d points, want %d", len(online), len(discord), historySamples)
	}
	// Newest first: point k is the sample taken k intervals before last.
	for k, v := range online {
		n, _ := v.(json.Number).Int64()
		if want := s.w.onlineCount(last - int64(k)*historyInterval); int(n) != want {
			t.Fatalf("online[%d] = %d, want %d (the count at last-%d×10min)", k, n, want, k)
		}
	}
	nulls := 0
	for _, v := range discord {
		if v == nil {
			nulls++
		} else if _, ok := v.(json.Number); !ok {
			t.Fatalf("discord point %v", v)
		}
	}
	if nulls == historySamples {
		t.Error("discord history is all null")
	}
}

func TestPlayer(t *testing.T) {
	s := seeded(t, 1)
	playerShape := shape{
		"uuid": "string", "name": "string?", "nickname": "string?", "messagecolor": "string?", "nicknamecolor": "string?",
		"rank": "string?", "registry": "int?", "offline": "int?", "playtime": "int?", "afk": "bool?", "balance": "double?",
		"addons": "bool", "pass": "bool", "discord": "string?", "op": "bool", "banned": "bool", "stat": "object", "detailed": "object",
	}
	order := []string{"uuid", "name", "nickname", "messagecolor", "nicknamecolor", "rank", "registry", "offline",
		"playtime", "afk", "balance", "addons", "pass", "discord", "op", "banned", "stat", "detailed"}

	alex := getOrdered(t, s, "/api/v1/player/"+alexUUID, false, order...)
	checkShape(t, "player", alex, playerShape)
	if alex["name"] != "Alex_MC" || alex["op"] != true || alex["banned"] != false || alex["discord"] != "298765432109876543" ||
		alex["offline"] != nil || alex["nickname"] != "§bAlexie" || alex["nicknamecolor"] != "#55FFFF" {
		t.Errorf("Alex_MC: %v", alex)
	}
	if len(sub(t, alex, "detailed")) != 0 {
		t.Error("detailed is filled without detailed=true")
	}
	stat := sub(t, alex, "stat")
	for _, k := range []string{"deaths", "jump", "play_one_minute", "walk_one_cm"} {
		if _, ok := stat[k].(json.Number); !ok {
			t.Errorf("stat.%s = %v", k, stat[k])
		}
	}

	griefer, _ := get(t, s, "/api/player/"+grieferUUID, false)
	if griefer["banned"] != true || griefer["op"] != false || griefer["discord"] != nil || griefer["offline"] == nil {
		t.Errorf("Griefer42: %v", griefer)
	}
	anna, _ := get(t, s, "/api/v1/player/"+strings.ToUpper(annaUUID), false)
	if anna["name"] != "ModAnna" || anna["op"] != true || anna["uuid"] != annaUUID || anna["messagecolor"] != "#FF55FF" {
		t.Errorf("ModAnna (upper-case UUID): %v", anna)
	}

	unknown := getOrdered(t, s, "/api/v1/player/"+unknownUUID+"?detailed=true", false, order...)
	checkShape(t, "unknown player", unknown, playerShape)
	for _, k := range []string{"name", "registry", "offline", "playtime", "rank", "balance", "discord"} {
		if unknown[k] != nil {
			t.Errorf("unknown player: %s = %v, want null", k, unknown[k])
		}
	}
	if len(sub(t, unknown, "detailed")) != 0 {
		t.Error("an unknown player has detailed statistics")
	}

	short, _ := get(t, s, "/api/v1/player/1-2-3-4-5", false)
	if short["uuid"] != "00000001-0002-0003-0004-000000000005" {
		t.Errorf("lenient UUID parsed to %v", short["uuid"])
	}
}

func TestPlayerDetailed(t *testing.T) {
	s := seeded(t, 1)
	for _, p := range s.w.players {
		rec := do(s, "GET", "/api/v1/player/"+p.uuid+"?detailed=true")
		if n := rec.Body.Len(); n < 100<<10 || n > 250<<10 {
			t.Errorf("%s: detailed body is %d bytes, want 100-250 KB", p.name, n)
		}
	}
	data, _ := get(t, s, "/api/v1/player/"+alexUUID+"?detailed=true", false)
	det := sub(t, data, "detailed")
	var cats []string
	for _, c := range detailedCategories {
		cats = append(cats, c.name)
	}
	body := do(s, "GET", "/api/v1/player/"+alexUUID+"?detailed=true").Body.Bytes()
	detRaw := decodeData(t, body)["detailed"]
	if got := keys(t, detRaw); !slices.Equal(got, cats) {
		t.Errorf("categories %v, want %v", got, cats)
	}
	total := 0
	for _, c := range cats {
		entries := sub(t, det, c)
		if len(entries) < 10 {
			t.Errorf("%s has only %d entries", c, len(entries))
		}
		for k, v := range entries {
			n, err := v.(json.Number).Int64()
			if err != nil || n <= 0 {
				t.Errorf("%s.%s = %v: want a positive integer", c, k, v)
			}
		}
		total += len(entries)
	}
	if total < 1000 {
		t.Errorf("%d counters in all, want thousands", total)
	}
	if _, ok := sub(t, det, "mine_block")["stone"]; !ok {
		t.Error("mine_block.stone (the live counter) is missing")
	}
}

// modded_items makes ?detailed=true of an active player megabytes: the
// modded names are counted like vanilla ones, in the block and item
// categories only, each once per category, and the vanilla default is
// unchanged.
func TestModdedItems(t *testing.T) {
	seed := int64(1)
	s := newSim(t, &Sim{Seed: &seed, ModdedItems: 20000})
	vanilla := seeded(t, 1)
	largest := 0
	for _, p := range s.w.players {
		n := do(s, "GET", "/api/v1/player/"+p.uuid+"?detailed=true").Body.Len()
		if p.uuid == alexUUID && (n < 2<<20 || n > 4<<20) {
			t.Errorf("Alex_MC's detailed answer is %d bytes with 20000 modded items, want 2-4 MiB", n)
		}
		largest = max(largest, n)
		if v := do(vanilla, "GET", "/api/v1/player/"+p.uuid+"?detailed=true").Body.Len(); v > 250<<10 {
			t.Errorf("%s: vanilla detailed answer %d bytes", p.name, v)
		}
	}
	if n := do(s, "GET", "/api/v1/player/"+alexUUID+"?detailed=true").Body.Len(); n != largest {
		t.Errorf("Alex_MC's detailed answer (%d bytes) is not the largest (%d)", n, largest)
	}
	data, _ := get(t, s, "/api/v1/player/"+alexUUID+"?detailed=true", false)
	det := sub(t, data, "detailed")
	for _, c := range detailedCategories {
		modded := 0
		for k := range sub(t, det, c.name) {
			if strings.HasPrefix(k, "create_") || strings.HasPrefix(k, "mekanism_") {
				modded++
			}
		}
		wantSome := c.from == &blocks || c.from == &allItems
		if (modded > 0) != wantSome {
			t.Errorf("%s: %d modded entries", c.name, modded)
		}
	}
	names := moddedNames(5000)
	if len(names) != 5000 || len(slices.Compact(slices.Sorted(slices.Values(names)))) != 5000 {
		t.Errorf("moddedNames(5000): %d names, not all distinct", len(names))
	}
	if moddedNames(0) != nil {
		t.Error("moddedNames(0) is not empty")
	}
}

// decodeData returns the members of data as raw JSON.
func decodeData(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(decode(t, body).Data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestServerPerformanceConstants(t *testing.T) {
	s := seeded(t, 1)
	server := getOrdered(t, s, "/api/v1/server", false, "brand", "maxPlayers", "motd", "version", "bukkitVersion",
		"minecraftVersion", "port", "ip", "onlineMode", "hardcore", "allowFlight", "allowNether", "allowEnd",
		"defaultGameMode", "viewDistance", "simulationDistance", "spawnRadius", "worldCount", "pluginCount")
	checkShape(t, "server", server, shape{"brand": "string", "maxPlayers": "int", "motd": "string", "version": "string",
		"bukkitVersion": "string", "minecraftVersion": "string", "port": "int", "ip": "string?", "onlineMode": "bool",
		"hardcore": "bool", "allowFlight": "bool", "allowNether": "bool", "allowEnd": "bool", "defaultGameMode": "string",
		"viewDistance": "int", "simulationDistance": "int", "spawnRadius": "int", "worldCount": "int", "pluginCount": "int"})

	perf := getOrdered(t, s, "/api/v1/performance", false, "tps", "averageTickTimeMs", "memory", "jvm")
	checkShape(t, "performance", perf, shape{"tps": "object", "averageTickTimeMs": "double", "memory": "object", "jvm": "object"})
	checkShape(t, "tps", sub(t, perf, "tps"), shape{"1m": "double", "5m": "double", "15m": "double"})
	checkShape(t, "memory", sub(t, perf, "memory"), shape{"usedBytes": "int", "freeBytes": "int", "totalBytes": "int",
		"maxBytes": "int", "usedMB": "int", "maxMB": "int"})
	checkShape(t, "jvm", sub(t, perf, "jvm"), shape{"javaVersion": "string", "javaVendor": "string", "osName": "string",
		"osArch": "string", "availableProcessors": "int", "uptimeMs": "int", "threadCount": "int"})

	c := getOrdered(t, s, "/api/v1/constants", false, "gameModes", "difficulties", "environments", "weatherTypes",
		"spawnCategories", "entityTypeCount", "materialCount")
	checkShape(t, "constants", c, shape{"gameModes": "array", "difficulties": "array", "environments": "array",
		"weatherTypes": "array", "spawnCategories": "array", "entityTypeCount": "int", "materialCount": "int"})
}

// A frozen clock can still pick a lag spike; every TPS below 20 must still
// be written with its decimal point, and 20 as 20.0.
func TestDoublesLikeJava(t *testing.T) {
	s := seeded(t, 1)
	for ts := frozenAt; ts < frozenAt+10*minute; ts += 5 * second {
		s.clock = func() int64 { return ts }
		body := do(s, "GET", "/api/v1/performance").Body.String()
		tps := body[strings.Index(body, `"tps":`):strings.Index(body, `,"averageTickTimeMs"`)]
		for _, part := range strings.Split(strings.Trim(tps[len(`"tps":`):], "{}"), ",") {
			_, v, _ := strings.Cut(part, ":")
			if !strings.Contains(v, ".") {
				t.Fatalf("tps value %s has no decimal point: %s", v, tps)
			}
		}
	}
	s.clock = func() int64 { return frozenAt }
	world := do(s, "GET", "/api/v1/worlds/world").Body.String()
	for _, lit := range []string{`"size":20000.0`, `"centerX":0.0`, `"damageAmount":0.2`, `"damageBuffer":5.0`} {
		if !strings.Contains(world, lit) {
			t.Errorf("world body lacks %s", lit)
		}
	}
	if !strings.Contains(do(s, "GET", "/api/v1/performance").Body.String(), "20.0") {
		t.Error("performance never says 20.0")
	}
}

var worldShape = shape{
	"name": "string", "uid": "string", "environment": "string", "seed": "int", "difficulty": "string",
	"time": "int", "fullTime": "int", "dayCount": "int", "weather": "object", "pvp": "bool", "allowAnimals": "bool",
	"allowMonsters": "bool", "minHeight": "int", "maxHeight": "int", "seaLevel": "int", "viewDistance": "int",
	"loadedChunks": "int", "spawnLocation": "object", "worldBorder": "object",
}

func TestWorlds(t *testing.T) {
	s := seeded(t, 1)
	list := getOrdered(t, s, "/api/v1/worlds", true, "count", "worlds")
	var names []string
	for _, w := range elems(t, list, "worlds") {
		checkShape(t, "world", w, worldShape)
		names = append(names, w["name"].(string))
	}
	if !slices.Equal(names, []string{"world", "world_nether", "world_the_end"}) {
		t.Errorf("worlds %v", names)
	}

	one := getOrdered(t, s, "/api/v1/worlds/world", true, "name", "uid", "environment", "seed", "difficulty", "time",
		"fullTime", "dayCount", "weather", "pvp", "allowAnimals", "allowMonsters", "minHeight", "maxHeight", "seaLevel",
		"viewDistance", "loadedChunks", "spawnLocation", "worldBorder")
	checkShape(t, "world", one, worldShape)
	// The seed survives exactly: json.Number keeps the digits, and the body
	// has them verbatim.
	if int64(float64(worldSeed)) == worldSeed {
		t.Error("the seed must lie beyond float64's exact range, or it tests nothing")
	}
	if one["seed"] != json.Number("-4172144997902289642") {
		t.Errorf("seed %v", one["seed"])
	}
	if !strings.Contains(do(s, "GET", "/api/v1/worlds/world").Body.String(), `"seed":-4172144997902289642`) {
		t.Error("seed digits not in the body")
	}
	checkShape(t, "weather", sub(t, one, "weather"), shape{"hasStorm": "bool", "thundering": "bool",
		"weatherDuration": "int", "thunderDuration": "int", "clear": "bool"})
	checkShape(t, "spawnLocation", sub(t, one, "spawnLocation"), shape{"x": "int", "y": "int", "z": "int"})
	checkShape(t, "worldBorder", sub(t, one, "worldBorder"), shape{"size": "double", "centerX": "double",
		"centerZ": "double", "damageAmount": "double", "damageBuffer": "double", "warningDistance": "int", "warningTimeTicks": "int"})

	for _, p := range []string{"/api/v1/worlds/world_nether/", "/api/worlds//world_the_end", "/api/v1/worlds/%2577orld_nether"} {
		get(t, s, p, true)
	}
	rec := do(s, "GET", "/api/v1/worlds/World")
	e := decode(t, rec.Body.Bytes())
	if rec.Code != 404 || e.Error["message"] != "World not found: World" {
		t.Errorf("unknown world: %d %s", rec.Code, rec.Body)
	}
	// A second decoding that fails is a 500, as in the plugin.
	if rec := do(s, "GET", "/api/v1/worlds/50%25"); rec.Code != 500 {
		t.Errorf("world 50%%: %d", rec.Code)
	}
}

func TestSnapshotLists(t *testing.T) {
	s := seeded(t, 1)
	g := getOrdered(t, s, "/api/v1/gamerules", true, "count", "worlds")
	for _, w := range elems(t, g, "worlds") {
		checkShape(t, "gamerules world", w, shape{"world": "string", "gameRules": "object"})
		rules := sub(t, w, "gameRules")
		if rules["random_tick_speed"] != json.Number("3") || rules["keep_inventory"] == nil {
			t.Errorf("rules %v", rules)
		}
	}

	e := getOrdered(t, s, "/api/v1/entities", true, "totalEntities", "worlds")
	sum := int64(0)
	for _, w := range elems(t, e, "worlds") {
		checkShape(t, "entities world", w, shape{"world": "string", "total": "int", "byType": "object"})
		by := sub(t, w, "byType")
		if _, ok := by["PLAYER"]; ok {
			t.Error("entities lists players")
		}
		n, _ := w["total"].(json.Number).Int64()
		sum += n
	}
	if total, _ := e["totalEntities"].(json.Number).Int64(); total != sum {
		t.Errorf("totalEntities %d, sum %d", total, sum)
	}
	worldsRaw := decodeData(t, do(s, "GET", "/api/v1/entities").Body.Bytes())["worlds"]
	var ws []map[string]json.RawMessage
	if err := json.Unmarshal(worldsRaw, &ws); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if k := keys(t, w["byType"]); !slices.IsSorted(k) {
			t.Errorf("byType not alphabetical: %v", k)
		}
	}

	sl, _ := get(t, s, "/api/v1/spawnlimits", true)
	for _, w := range elems(t, sl, "worlds") {
		checkShape(t, "spawnlimits world", w, shape{"world": "string", "spawnLimits": "object", "ticksPerSpawns": "object"})
		if _, ok := sub(t, w, "spawnLimits")["MISC"]; ok {
			t.Error("MISC is listed")
		}
	}
}

func TestPunishmentsAndBans(t *testing.T) {
	s := seeded(t, 1)
	list := getOrdered(t, s, "/api/v1/punishments", false, "summary", "cmiAvailable", "returned", "limit", "records")
	checkShape(t, "summary", sub(t, list, "summary"), shape{"total": "int", "bans": "int", "ipBans": "int", "mutes": "int",
		"jails": "int", "kicks": "int", "warnings": "int", "punishedPlayers": "int", "activeNow": "int"})
	recShape := shape{"type": "string", "uuid": "string?", "name": "string?", "ip": "string?", "reason": "string?",
		"by": "string?", "at": "int?", "expires": "int?", "liftedAt": "int?", "permanent": "bool?", "active": "bool?", "extra": "string?"}
	var last int64 = 1 << 62
	types := map[string]bool{}
	for _, r := range elems(t, list, "records") {
		checkShape(t, "record", r, recShape)
		at, _ := r["at"].(json.Number).Int64()
		if at > last {
			t.Error("records are not newest first")
		}
		last = at
		types[r["type"].(string)] = true
		if r["type"] == "kick" && (r["active"] != nil || r["permanent"] != nil) {
			t.Errorf("kick in the list view: %v", r)
		}
		if strings.Contains(r["reason"].(string), "§") {
			t.Errorf("colour codes not stripped: %v", r["reason"])
		}
	}
	for _, ty := range []string{"ban", "ipban", "kick", "mute", "jail", "warning"} {
		if !types[ty] {
			t.Errorf("no %s record", ty)
		}
	}

	one := getOrdered(t, s, "/api/v1/punishments/"+grieferUUID, false, "uuid", "name", "banned", "ban", "warnings", "warningCount",
		"warningPoints", "mute", "jail", "history", "historyCount", "activeCount")
	checkShape(t, "punishments/uuid", one, shape{"uuid": "string", "name": "string?", "banned": "bool", "ban": "object?",
		"warnings": "array", "warningCount": "int", "warningPoints": "int?", "mute": "object?", "jail": "object?",
		"history": "array", "historyCount": "int", "activeCount": "int"})
	checkShape(t, "ban", sub(t, one, "ban"), shape{"reason": "string?", "by": "string?", "at": "int?", "expires": "int?", "permanent": "bool"})
	for _, h := range elems(t, one, "history") {
		checkShape(t, "history", h, shape{"type": "string", "reason": "string?", "by": "string?", "cause": "string?",
			"at": "int", "expires": "int?", "liftedAt": "int?", "active": "bool"})
		if h["type"] == "kick" && h["active"] != true {
			t.Error("kicks are active in the per-player view (the plugin's bug)")
		}
	}
	if one["activeCount"] != json.Number("2") || one["banned"] != true {
		t.Errorf("Griefer42: %v", one)
	}
	nobody, _ := get(t, s, "/api/v1/punishments/"+unknownUUID, false)
	if nobody["name"] != nil || nobody["historyCount"] != json.Number("0") {
		t.Errorf("unknown: %v", nobody)
	}
	for target, msg := range map[string]string{
		"/api/v1/punishments/nope":                       "Invalid UUID: nope",
		"/api/v1/punishments?view=html":                  "No such endpoint: /api/v1/punishments",
		"/api/v1/punishments/" + alexUUID + "?view=html": "No such endpoint: /api/v1/punishments/" + alexUUID,
	} {
		expectError(t, s, "GET", target, 404, msg)
	}

	bans := getOrdered(t, s, "/api/v1/bans", false, "players", "ips")
	players := sub(t, bans, "players")
	for _, e := range elems(t, players, "entries") {
		checkShape(t, "ban entry", e, shape{"reason": "string?", "source": "string?", "created": "int?", "expires": "int?",
			"permanent": "bool", "uuid": "string?", "name": "string?"})
	}
	for _, e := range elems(t, sub(t, bans, "ips"), "entries") {
		checkShape(t, "ip ban entry", e, shape{"reason": "string?", "source": "string?", "created": "int?", "expires": "int?",
			"permanent": "bool", "ip": "string"})
		if e["ip"] != "203.0.113.77" {
			t.Errorf("ip %v", e["ip"])
		}
	}
}

func TestSimpleLists(t *testing.T) {
	s := seeded(t, 1)
	ops := getOrdered(t, s, "/api/v1/operators", false, "count", "operators")
	if !slices.Equal(ops["operators"].([]any), []any{alexUUID, annaUUID}) || ops["count"] != json.Number("2") {
		t.Errorf("operators %v", ops)
	}
	wl := getOrdered(t, s, "/api/v1/whitelist", false, "enabled", "count", "players")
	checkShape(t, "whitelist", wl, shape{"enabled": "bool", "count": "int", "players": "array"})

	pl := getOrdered(t, s, "/api/v1/plugins", false, "count", "plugins")
	for _, p := range elems(t, pl, "plugins") {
		checkShape(t, "plugin", p, shape{"name": "string", "version": "string", "enabled": "bool", "description": "string?",
			"website": "string?", "apiVersion": "string?", "authors": "array", "depend": "array", "softDepend": "array"})
	}
	if n, _ := pl["count"].(json.Number).Int64(); int(n) != len(pl["plugins"].([]any)) {
		t.Error("count does not match")
	}
}

func TestNetwork(t *testing.T) {
	s := seeded(t, 1)
	n := getOrdered(t, s, "/api/v1/network", false, "cluster", "thisServer", "serverCount", "totalOnline", "servers")
	checkShape(t, "network", n, shape{"cluster": "string", "thisServer": "string", "serverCount": "int", "totalOnline": "int", "servers": "array"})
	total := int64(0)
	for _, hb := range elems(t, n, "servers") {
		checkShape(t, "heartbeat", hb, shape{"server": "string", "cluster": "string", "online": "int", "players": "array",
			"discord": "int?", "updatedAt": "int"})
		c, _ := hb["online"].(json.Number).Int64()
		total += c
	}
	if got, _ := n["totalOnline"].(json.Number).Int64(); got != total {
		t.Errorf("totalOnline %d, sum %d", got, total)
	}
}

func TestPlaceholders(t *testing.T) {
	s := seeded(t, 1)
	d := getOrdered(t, s, "/api/v1/placeholders?uuid="+alexUUID+"&p=player_name,%25vault_eco_balance%25,+player_name+,,cmi_user_nickname,%25unknown_thing%25", false, "uuid", "online", "values")
	checkShape(t, "placeholders", d, shape{"uuid": "string", "online": "bool", "values": "object"})
	vraw := decodeData(t, do(s, "GET", "/api/v1/placeholders?uuid="+alexUUID+"&p=player_name,%25vault_eco_balance%25,+player_name+,,cmi_user_nickname,%25unknown_thing%25").Body.Bytes())["values"]
	if got := keys(t, vraw); !slices.Equal(got, []string{"%player_name%", "%vault_eco_balance%", "%cmi_user_nickname%", "%unknown_thing%"}) {
		t.Errorf("tokens %v (first-seen order, duplicates collapsed)", got)
	}
	v := sub(t, d, "values")
	if v["%player_name%"] != "Alex_MC" || v["%cmi_user_nickname%"] != "Alexie" || v["%unknown_thing%"] != "%unknown_thing%" {
		t.Errorf("values %v", v)
	}
	if bal, ok := v["%vault_eco_balance%"].(string); !ok || !strings.Contains(bal, ".") {
		t.Errorf("balance %v", v["%vault_eco_balance%"])
	}
	// The last p wins; UUID is not uuid.
	d, _ = get(t, s, "/api/placeholders?uuid="+alexUUID+"&p=player_name&p=player_uuid", false)
	if v := sub(t, d, "values"); len(v) != 1 || v["%player_uuid%"] != alexUUID {
		t.Errorf("last p should win: %v", v)
	}
	for target, want := range map[string]struct {
		status int
		msg    string
	}{
		"/api/v1/placeholders":                             {400, "Missing parameter: uuid"},
		"/api/v1/placeholders?UUID=" + alexUUID + "&p=x":   {400, "Missing parameter: uuid"},
		"/api/v1/placeholders?uuid=nope&p=x":               {400, "Invalid UUID: nope"},
		"/api/v1/placeholders?uuid=" + alexUUID:            {400, "Missing parameter: p"},
		"/api/v1/placeholders?uuid=" + alexUUID + "&p=,+,": {400, "No placeholders given in p"},
		"/api/v1/placeholders?list=TRUE&uuid=" + alexUUID:  {404, "No such endpoint: /api/v1/placeholders"},
	} {
		expectError(t, s, "GET", target, want.status, want.msg)
	}
}

func TestCustomVotes(t *testing.T) {
	s := seeded(t, 1)
	for _, p := range []string{"/api/v1/custom/votes", "/api/custom/votes", "/api/v1/custom/votes/anything"} {
		d := getOrdered(t, s, p, true, "month", "totalVotes", "voters", "sites", "top")
		checkShape(t, "votes", d, shape{"month": "string", "totalVotes": "int", "voters": "int", "sites": "array", "top": "array"})
		for _, e := range elems(t, d, "top") {
			checkShape(t, "top", e, shape{"uuid": "string", "name": "string", "votes": "int"})
		}
	}
	for _, p := range []string{"/api/v1/custom", "/api/v1/custom/", "/api/v1/custom/vote", "/api/v1/custom/votesx"} {
		expectError(t, s, "GET", p, 404, "No such endpoint: "+p)
	}
}

// --- errors, methods, paths -------------------------------------------------

func expectError(t *testing.T, s *Sim, method, target string, status int, msg string) {
	t.Helper()
	rec := do(s, method, target)
	if rec.Code != status {
		t.Errorf("%s %s: %d, want %d (%s)", method, target, rec.Code, status, rec.Body)
		return
	}
	body := rec.Body.Bytes()
	if got := keys(t, body); !slices.Equal(got, []string{"ok", "error", "meta"}) {
		t.Errorf("%s %s: envelope keys %v", method, target, got)
	}
	e := decode(t, body)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(body, &m)
	if got := keys(t, m["error"]); !slices.Equal(got, []string{"status", "message", "path"}) {
		t.Errorf("error keys %v", got)
	}
	if got := keys(t, e.Meta); !slices.Equal(got, []string{"version", "server", "updatedAt"}) {
		t.Errorf("error meta keys %v", got)
	}
	if e.OK || e.Error["status"] != json.Number(itoa(status)) || e.Error["message"] != msg {
		t.Errorf("%s %s: error %v, want %d %q", method, target, e.Error, status, msg)
	}
	checkHeaders(t, rec.Header())
}

func TestNotFound(t *testing.T) {
	s := seeded(t, 1)
	for _, p := range []string{"/api/v1/unknown", "/api/unknown", "/api/v1x", "/api/v1//status", "/api//status",
		"/api/v1/statusx", "/api/v1/v1/status", "/api/v1/docs", "/api/v1/Status"} {
		expectError(t, s, "GET", p, 404, "No such endpoint: "+p)
	}
	// error.path is the decoded path.
	rec := do(s, "GET", "/api/v1/%75nknown")
	if e := decode(t, rec.Body.Bytes()); e.Error["path"] != "/api/v1/unknown" {
		t.Errorf("path %v", e.Error["path"])
	}
	expectError(t, s, "GET", "/api/v1/player", 404, "Provide a player UUID: /api/player/{uuid}")
	expectError(t, s, "GET", "/api/v1/player/", 404, "Provide a player UUID: /api/player/{uuid}")
	expectError(t, s, "GET", "/api/v1/player/not-a-uuid", 404, "Invalid UUID: not-a-uuid")
	expectError(t, s, "GET", "/api/v1/player/40094f2fca8f48268b3111e0f4c449df", 404, "Invalid UUID: 40094f2fca8f48268b3111e0f4c449df")
	expectError(t, s, "GET", "/api/v1/player/"+alexUUID+"/x", 404, "Invalid UUID: "+alexUUID+"/x")
	expectError(t, s, "GET", "/api/v1/worlds/nowhere", 404, "World not found: nowhere")

	// Stations that ignore their remainder serve any suffix, as the plugin does.
	for _, p := range []string{"/api/v1/status/", "/api/v1/status/extra", "/api/server/x/y"} {
		if rec := do(s, "GET", p); rec.Code != 200 {
			t.Errorf("%s: %d", p, rec.Code)
		}
	}

	// Outside the base path there is no context: the JDK's page.
	for _, p := range []string{"/", "/foo", "/API/v1", "/apix"} {
		rec := do(s, "GET", p)
		if rec.Code != 404 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") ||
			rec.Header().Get("Access-Control-Allow-Origin") != "" || !strings.Contains(rec.Body.String(), "No context found") {
			t.Errorf("%s: %d %v %s", p, rec.Code, rec.Header(), rec.Body)
		}
	}
	rec = do(s, "GET", "/api/v1/placeholders?uuid=%zz")
	if rec.Code != 400 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Errorf("malformed query: %d %s", rec.Code, rec.Body)
	}
}

func TestMethods(t *testing.T) {
	s := seeded(t, 1)
	for _, m := range []string{"POST", "PUT", "DELETE", "OPTIONS", "PATCH", "BREW"} {
		for _, p := range []string{"/api/v1/status", "/api/v1/unknown", "/api"} {
			expectError(t, s, m, p, 405, "Method Not Allowed")
			if rec := do(s, m, p); rec.Header().Get("Allow") != "" {
				t.Errorf("%s %s: Allow header %q", m, p, rec.Header().Get("Allow"))
			}
		}
	}
	rec := do(s, "HEAD", "/api/v1/status")
	if rec.Code != 405 || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != "" {
		t.Errorf("HEAD: %d, %d body bytes, Content-Length %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
	}
	if rec.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Error("HEAD 405 lacks ACAO")
	}
	// The method is compared case-insensitively.
	if rec := do(s, "get", "/api/v1/status"); rec.Code != 200 {
		t.Errorf("lower-case get: %d", rec.Code)
	}
}

func TestAliasServesTheSame(t *testing.T) {
	s := seeded(t, 1)
	for _, st := range stationOrder {
		suffix := st
		switch st {
		case "player", "punishments":
			suffix += "/" + alexUUID
		case "placeholders":
			suffix += "?uuid=" + alexUUID + "&p=player_name"
		}
		a := do(s, "GET", "/api/v1/"+suffix)
		b := do(s, "GET", "/api/"+suffix)
		if a.Code != 200 || a.Body.String() != b.Body.String() {
			t.Errorf("%s: %d, alias differs: %s / %s", st, a.Code, a.Body, b.Body)
		}
	}
}

// --- determinism and liveness ----------------------------------------------

func allTargets(s *Sim) []string {
	targets := []string{"/api/v1", "/api/v1/status?history=true", "/api/v1/worlds", "/api/v1/worlds/world"}
	for _, st := range stationOrder {
		targets = append(targets, "/api/v1/"+st)
	}
	for _, p := range s.w.players[:10] {
		targets = append(targets, "/api/v1/player/"+p.uuid+"?detailed=true", "/api/v1/punishments/"+p.uuid,
			"/api/v1/placeholders?uuid="+p.uuid+"&p=player_name,vault_eco_balance,player_online,statistic_deaths")
	}
	return targets
}

func TestSameSeedSameBytes(t *testing.T) {
	a, b, c := seeded(t, 42), seeded(t, 42), seeded(t, 43)
	differs := 0
	for _, target := range allTargets(a) {
		ra, rb, rc := do(a, "GET", target), do(b, "GET", target), do(c, "GET", target)
		if ra.Body.String() != rb.Body.String() {
			t.Errorf("%s differs between two sims with seed 42", target)
		}
		if ra.Body.String() != rc.Body.String() {
			differs++
		}
	}
	if differs < 10 {
		t.Errorf("seed 43 gives the same bytes as seed 42 on all but %d endpoints", differs)
	}
	if a.w.players[0].uuid != c.w.players[0].uuid {
		t.Error("the named players must not depend on the seed")
	}
}

func TestLiveDataMoves(t *testing.T) {
	seed, off := int64(7), false
	s := newSim(t, &Sim{Seed: &seed, Frozen: &off})
	now := frozenAt
	s.clock = func() int64 { return now }

	deathsAt := func() int64 {
		d, _ := get(t, s, "/api/v1/player/"+alexUUID, false)
		n, _ := sub(t, d, "stat")["walk_one_cm"].(json.Number).Int64()
		return n
	}
	before := deathsAt()
	statuses := map[string]bool{}
	tps := map[string]bool{}
	for i := range 60 {
		now = frozenAt + int64(i)*minute
		statuses[do(s, "GET", "/api/v1/status").Body.String()[:200]] = true
		d, _ := get(t, s, "/api/v1/performance", false)
		tps[string(sub(t, d, "tps")["1m"].(json.Number))] = true
	}
	if after := deathsAt(); after <= before {
		t.Errorf("walk_one_cm did not grow in an hour: %d -> %d", before, after)
	}
	if len(statuses) < 5 {
		t.Errorf("only %d different online lists in an hour", len(statuses))
	}
	if len(tps) < 3 {
		t.Errorf("TPS took only %d values in an hour", len(tps))
	}
	// Counters never go backwards.
	prev := int64(0)
	for i := range 100 {
		now = frozenAt + int64(i)*7*minute
		if n := deathsAt(); n < prev {
			t.Fatalf("counter went back at step %d", i)
		} else {
			prev = n
		}
	}
}

func TestFrozenDefaults(t *testing.T) {
	seed := int64(3)
	frozen := seeded(t, seed)
	if frozen.clock() != frozenAt {
		t.Error("a seed freezes the clock by default")
	}
	live := newSim(t, &Sim{})
	if live.clock() == frozenAt {
		t.Error("without a seed the clock runs")
	}
	on := true
	if newSim(t, &Sim{Frozen: &on}).clock() != frozenAt {
		t.Error("frozen on without a seed")
	}
	custom := newSim(t, &Sim{Seed: &seed, ServerID: "  Survival "})
	meta := asObject(t, decode(t, do(custom, "GET", "/api/v1/server").Body.Bytes()).Meta)
	if meta["server"] != "Survival" {
		t.Errorf("server id %v", meta["server"])
	}
	if newSim(t, &Sim{ServerID: "GLOBAL"}).ServerID != "global" {
		t.Error("GLOBAL should become global")
	}
	bad := &Sim{ServerID: "a\nb"}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	_ = bad.Provision(ctx)
	if bad.Validate() == nil {
		t.Error("a control character in server_id passed Validate")
	}
}

// The detailed statistics are built lazily; concurrent first requests must
// agree (run with -race).
func TestConcurrentRequests(t *testing.T) {
	s := seeded(t, 9)
	var wg sync.WaitGroup
	bodies := make([]string, 8)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies[i] = do(s, "GET", "/api/v1/player/"+alexUUID+"?detailed=true").Body.String()
			do(s, "GET", "/api/v1/status?history=true")
		}()
	}
	wg.Wait()
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Fatal("concurrent detailed bodies differ")
		}
	}
}

func BenchmarkPlayerDetailed(b *testing.B) {
	s := seeded(b, 1)
	do(s, "GET", "/api/v1/player/"+alexUUID+"?detailed=true")
	b.ReportAllocs()
	for b.Loop() {
		do(s, "GET", "/api/v1/player/"+alexUUID+"?detailed=true")
	}
}

func BenchmarkStatusHistory(b *testing.B) {
	s := seeded(b, 1)
	b.ReportAllocs()
	for b.Loop() {
		do(s, "GET", "/api/v1/status?history=true")
	}
}
