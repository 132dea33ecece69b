package sim

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// station is one mounted endpoint of the plugin.
type station struct {
	name string // path after /api/v1/, e.g. "status" or "custom/votes"
	desc string // the index description (en_US)
	// snapshot is the refresh interval of a snapshot station (the plugin's
	// cache.*-ticks): its data is built as of the last refresh and its meta
	// carries cachedAt. Zero for live stations.
	snapshot time.Duration
	build    func(w *world, c *call) (any, *apiError)
}

// customVotes is the one third-party station the sim serves, as a voting
// plugin would register it through ServerAPI's custom API, in cached mode.
const customVotes = "custom/votes"

func (w *world) buildStations() {
	w.stations = []*station{
		{name: "status", desc: "Aggregate status (online UUIDs / count / DiscordSRV members)", snapshot: 5 * time.Second, build: (*world).status},
		{name: "server", desc: "Server information (version / MOTD / max players / game mode)", build: (*world).server},
		{name: "performance", desc: "Performance (TPS / tick time / memory / JVM)", build: (*world).performance},
		{name: "worlds", desc: "Worlds (list, or one world by name: /worlds/{name})", snapshot: 10 * time.Minute, build: (*world).worldsStation},
		{name: "gamerules", desc: "Game rules per world", snapshot: 10 * time.Minute, build: (*world).gamerules},
		{name: "entities", desc: "Entity counts per world (players excluded)", snapshot: 20 * time.Second, build: (*world).entities},
		{name: "spawnlimits", desc: "Spawn limits and spawn intervals per world", snapshot: 10 * time.Minute, build: (*world).spawnLimits},
		{name: "plugins", desc: "Installed plugins", build: (*world).pluginsStation},
		{name: "whitelist", desc: "Whitelist (enabled / player UUIDs)", build: (*world).whitelist},
		{name: "player", desc: "Player data (/player/{uuid}; ?detailed=true for per-item statistics)", build: (*world).player},
		{name: "network", desc: "Cross-server aggregation (servers / online totals)", build: (*world).network},
		{name: "placeholders", desc: "PlaceholderAPI resolution (?uuid=&p=)", build: (*world).placeholders},
		{name: "punishments", desc: "Punishment records and statistics (/punishments/{uuid})", build: (*world).punishments},
		{name: "bans", desc: "Ban list (players / IPs)", build: (*world).bans},
		{name: "operators", desc: "Operator list", build: (*world).operators},
		{name: "constants", desc: "Enum constants (game modes / difficulties / environments / …)", build: (*world).constants},
		{name: customVotes, desc: "Monthly vote totals and top voters (VotingPlugin)", snapshot: time.Minute, build: (*world).votes},
	}
	w.stationByName = map[string]*station{}
	for _, st := range w.stations {
		w.stationByName[st.name] = st
	}
	w.index = &station{name: "", build: (*world).indexStation}
}

// --- index -----------------------------------------------------------------

func (w *world) indexStation(*call) (any, *apiError) {
	stations := make([]any, 0, len(w.stations))
	for _, st := range w.stations {
		// With auth off no station requires a key, and nothing is hidden.
		stations = append(stations, obj{{"path", basePath + "/v1/" + st.name}, {"description", st.desc}, {"requiresKey", false}})
	}
	return obj{
		{"name", "ServerAPI"},
		{"authEnabled", false},
		{"pluginVersion", "1.1.0"},
		{"versions", []any{obj{{"version", "v1"}, {"path", basePath + "/v1"}, {"current", true}}}},
		{"alias", basePath + " → " + basePath + "/v1"},
		{"stations", stations},
	}, nil
}

// --- status ----------------------------------------------------------------

// historySamples is 24 h of samples every 10 minutes, both ends included.
const (
	historySamples  = 145
	historyInterval = 10 * minute
)

func (w *world) status(c *call) (any, *apiError) {
	online := w.online(c.at)
	data := obj{
		{"online", nonNil(online)},
		{"minecraft", len(online)},
		{"discord", w.discordMembers(c.now, 5*second)}, // read live, not from the snapshot
	}
	if c.flag("history=true") {
		data = append(data, member{"history", w.history(c.now)})
	}
	return data, nil
}

// history is the raw fragment the plugin splices in: newest first, and only
// the newest sample's time is given.
func (w *world) history(now int64) raw {
	last := now - now%historyInterval
	counts := make([]int, historySamples)
	discord := make([]any, historySamples)
	for k := range historySamples {
		t := last - int64(k)*historyInterval
		counts[k] = w.onlineCount(t)
		discord[k] = w.discordMembers(t, historyInterval)
	}
	return appendJSON(nil, obj{{"last", last}, {"online", counts}, {"discord", discord}})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// --- server, performance, constants ----------------------------------------

func (w *world) server(*call) (any, *apiError) {
	return obj{
		{"brand", "Paper"},
		{"maxPlayers", 50},
		{"motd", "Welcome to Emerald SMP"},
		{"version", "26.1.2-72-3f1c2ab (MC: 26.1.2)"},
		{"bukkitVersion", "26.1.2-R0.1-SNAPSHOT"},
		{"minecraftVersion", "26.1.2"},
		{"port", 25565},
		{"ip", nil},
		{"onlineMode", true},
		{"hardcore", false},
		{"allowFlight", false},
		{"allowNether", true},
		{"allowEnd", true},
		{"defaultGameMode", "SURVIVAL"},
		{"viewDistance", 10},
		{"simulationDistance", 8},
		{"spawnRadius", 10},
		{"worldCount", len(w.worlds)},
		{"pluginCount", len(w.plugins)},
	}, nil
}

func (w *world) performance(c *call) (any, *apiError) {
	m1, m5, m15, tick := w.tps(c.now)
	const mib = 1 << 20
	total, maxMem := int64(4096*mib), int64(8192*mib)
	// A garbage-collector saw-tooth: the heap fills for two minutes, then drops.
	used := int64(1800*mib) + int64(float64(1600*mib)*float64(c.now%(2*minute))/float64(2*minute))
	return obj{
		{"tps", obj{{"1m", m1}, {"5m", m5}, {"15m", m15}}},
		{"averageTickTimeMs", tick},
		{"memory", obj{
			{"usedBytes", used}, {"freeBytes", total - used}, {"totalBytes", total}, {"maxBytes", maxMem},
			{"usedMB", used / mib}, {"maxMB", maxMem / mib},
		}},
		{"jvm", obj{
			{"javaVersion", "25.0.3"}, {"javaVendor", "Eclipse Adoptium"}, {"osName", "Linux"}, {"osArch", "amd64"},
			{"availableProcessors", 8},
			{"uptimeMs", c.now - w.anchor + 3*hour + 1234}, // the server was up for 3 h when the sim started
			{"threadCount", 70 + int(w.noise(c.now, 10*second, 3)*9)},
		}},
	}, nil
}

func (w *world) constants(*call) (any, *apiError) {
	return obj{
		{"gameModes", []string{"CREATIVE", "SURVIVAL", "ADVENTURE", "SPECTATOR"}},
		{"difficulties", []string{"PEACEFUL", "EASY", "NORMAL", "HARD"}},
		{"environments", []string{"NORMAL", "NETHER", "THE_END", "CUSTOM"}},
		{"weatherTypes", []string{"DOWNFALL", "CLEAR"}},
		{"spawnCategories", append(slices.Clone(spawnCategories), "MISC")},
		{"entityTypeCount", 151},
		{"materialCount", 2378},
	}, nil
}

// --- player ----------------------------------------------------------------

func (w *world) player(c *call) (any, *apiError) {
	if c.rest == "" {
		return nil, &apiError{http.StatusNotFound, "Provide a player UUID: /api/player/{uuid}"}
	}
	uuid, ok := parseJavaUUID(c.rest)
	if !ok {
		return nil, &apiError{http.StatusNotFound, "Invalid UUID: " + c.rest}
	}
	detailed := c.flag("detailed=true")
	p := w.byUUID[uuid]
	if p == nil {
		// Never seen on this server: not an error, just nothing known.
		stat := make(obj, len(untypedStats))
		for i, st := range untypedStats {
			stat[i] = member{st.name, 0}
		}
		return obj{
			{"uuid", uuid}, {"name", nil}, {"nickname", nil}, {"messagecolor", nil}, {"nicknamecolor", nil},
			{"rank", nil}, {"registry", nil}, {"offline", nil}, {"playtime", nil}, {"afk", nil}, {"balance", nil},
			{"addons", false}, {"pass", false}, {"discord", nil}, {"op", false}, {"banned", false},
			{"stat", stat}, {"detailed", obj{}},
		}, nil
	}
	online := w.isOnline(p, c.now)
	played := w.hoursPlayed(p, c.now)
	stat := make(obj, len(untypedStats))
	for i, st := range untypedStats {
		stat[i] = member{st.name, w.stat(p, i, c.now)}
	}
	var det any = obj{}
	if detailed {
		det = w.detailed(p, played)
	}
	return obj{
		{"uuid", p.uuid},
		{"name", p.name},
		{"nickname", p.nickname},
		{"messagecolor", p.messageColor},
		{"nicknamecolor", p.nickColor},
		{"rank", p.rank},
		{"registry", p.registry},
		{"offline", w.lastSeen(p, c.now)},
		{"playtime", p.statBase[playOneMinute]*50 + int64(played*float64(hour))}, // CMI counts ms
		{"afk", online && w.noise(c.now, 3*minute, int64(p.idx), 0xaf) < 0.2},
		{"balance", w.balance(p, c.now)},
		{"addons", false},
		{"pass", false},
		{"discord", p.discord},
		{"op", p.op},
		{"banned", p.banned},
		{"stat", stat},
		{"detailed", det},
	}, nil
}

// parseJavaUUID parses like java.util.UUID.fromString: five dash-separated
// hex groups of any length up to 36 characters in all, each read as a
// signed long (so a leading sign is taken) and masked to its field width;
// "1-2-3-4-5" is 00000001-0002-0003-0004-000000000005. It returns the
// canonical lower-case form.
func parseJavaUUID(s string) (string, bool) {
	if len(s) > 36 {
		return "", false
	}
	parts := strings.Split(s, "-")
	if len(parts) != 5 {
		return "", false
	}
	widths := [5]int{8, 4, 4, 4, 12}
	var out [16]byte
	pos := 0
	for i, part := range parts {
		v, err := strconv.ParseInt(part, 16, 64)
		if err != nil {
			return "", false
		}
		u := uint64(v)
		for j := widths[i]/2 - 1; j >= 0; j-- {
			out[pos+j] = byte(u)
			u >>= 8
		}
		pos += widths[i] / 2
	}
	return formatUUID(out), true
}

// --- worlds, gamerules, entities, spawnlimits --------------------------------

func (w *world) worldsStation(c *call) (any, *apiError) {
	if c.rest != "" {
		// The plugin URL-decodes the already decoded remainder a second
		// time: '+' becomes a space, and a stray '%' makes it throw (500).
		name, err := url.QueryUnescape(c.rest)
		if err != nil {
			return nil, &apiError{http.StatusInternalServerError, "Internal Server Error"}
		}
		for _, mw := range w.worlds {
			if mw.name == name {
				return w.worldObj(mw, c.at), nil
			}
		}
		return nil, &apiError{http.StatusNotFound, "World not found: " + name}
	}
	list := make([]any, len(w.worlds))
	for i, mw := range w.worlds {
		list[i] = w.worldObj(mw, c.at)
	}
	return obj{{"count", len(list)}, {"worlds", list}}, nil
}

func (w *world) gamerules(*call) (any, *apiError) {
	list := make([]any, len(w.worlds))
	for i, mw := range w.worlds {
		list[i] = obj{{"world", mw.name}, {"gameRules", mw.gameRules}}
	}
	return obj{{"count", len(list)}, {"worlds", list}}, nil
}

func (w *world) entities(c *call) (any, *apiError) {
	list := make([]any, len(w.worlds))
	total := 0
	for i, mw := range w.worlds {
		byType := make(obj, len(mw.entityTypes))
		sum := 0
		for j, et := range mw.entityTypes {
			n := et.base + int(float64(et.base)*0.4*(w.noise(c.at, 20*second, int64(i), int64(j))-0.5))
			byType[j] = member{et.name, n}
			sum += n
		}
		list[i] = obj{{"world", mw.name}, {"total", sum}, {"byType", byType}}
		total += sum
	}
	return obj{{"totalEntities", total}, {"worlds", list}}, nil
}

func (w *world) spawnLimits(*call) (any, *apiError) {
	list := make([]any, len(w.worlds))
	for i, mw := range w.worlds {
		list[i] = obj{{"world", mw.name}, {"spawnLimits", mw.spawnLimits}, {"ticksPerSpawns", mw.ticksPerSpawn}}
	}
	return obj{{"count", len(list)}, {"worlds", list}}, nil
}

// --- lists -----------------------------------------------------------------

func (w *world) pluginsStation(*call) (any, *apiError) {
	list := make([]any, len(w.plugins))
	for i, p := range w.plugins {
		list[i] = p
	}
	return obj{{"count", len(list)}, {"plugins", list}}, nil
}

func (w *world) whitelist(*call) (any, *apiError) {
	// The server is whitelist-only: everyone on the roster is on it.
	ids := make([]string, len(w.players))
	for i, p := range w.players {
		ids[i] = p.uuid
	}
	return obj{{"enabled", true}, {"count", len(ids)}, {"players", ids}}, nil
}

func (w *world) operators(*call) (any, *apiError) {
	var ids []string
	for _, p := range w.players {
		if p.op {
			ids = append(ids, p.uuid)
		}
	}
	return obj{{"count", len(ids)}, {"operators", nonNil(ids)}}, nil
}

// --- network ---------------------------------------------------------------

const heartbeatEvery = 10 * second

func (w *world) network(c *call) (any, *apiError) {
	here := w.online(c.now)
	var lobby []string
	for _, p := range w.players {
		// A few players who are not on this server wait in the lobby.
		if len(lobby) < 3 && !w.isOnline(p, c.now) && !p.banned && !p.neverOnline &&
			w.noise(c.now, p.slot, int64(p.idx), 0x10bb) < 0.15 {
			lobby = append(lobby, p.uuid)
		}
	}
	beat := c.now - c.now%heartbeatEvery
	discord := w.discordMembers(c.now, 5*second)
	// Each heartbeat is a raw Redis value, spliced in as it was stored.
	servers := []any{
		raw(appendJSON(nil, obj{{"server", w.serverID}, {"cluster", "main"}, {"online", len(here)},
			{"players", nonNil(here)}, {"discord", discord}, {"updatedAt", beat + 1000}})),
		raw(appendJSON(nil, obj{{"server", "lobby"}, {"cluster", "main"}, {"online", len(lobby)},
			{"players", nonNil(lobby)}, {"discord", discord}, {"updatedAt", beat + 3000}})),
	}
	return obj{
		{"cluster", "main"},
		{"thisServer", w.serverID},
		{"serverCount", len(servers)},
		{"totalOnline", len(here) + len(lobby)},
		{"servers", servers},
	}, nil
}

// --- placeholders ----------------------------------------------------------

// placeholders follows the plugin's order of checks (5.14). PlaceholderAPI
// is "installed", so the 503 never happens.
func (w *world) placeholders(c *call) (any, *apiError) {
	params := map[string]string{}
	for _, pair := range strings.Split(c.rawQuery, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, _ = url.QueryUnescape(k)
		v, _ = url.QueryUnescape(v)
		params[k] = v // the last one wins
	}
	if strings.EqualFold(params["list"], "true") {
		return nil, notFound(c.path) // web.placeholders is off
	}
	rawUUID := params["uuid"]
	if strings.TrimSpace(rawUUID) == "" {
		return nil, &apiError{http.StatusBadRequest, "Missing parameter: uuid"}
	}
	uuid, ok := parseJavaUUID(rawUUID)
	if !ok {
		return nil, &apiError{http.StatusBadRequest, "Invalid UUID: " + rawUUID}
	}
	if strings.TrimSpace(params["p"]) == "" {
		return nil, &apiError{http.StatusBadRequest, "Missing parameter: p"}
	}
	var tokens []string
	for _, tok := range strings.Split(params["p"], ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		if !strings.HasPrefix(tok, "%") {
			tok = "%" + tok + "%"
		}
		if !slices.Contains(tokens, tok) {
			tokens = append(tokens, tok)
		}
	}
	if len(tokens) == 0 {
		return nil, &apiError{http.StatusBadRequest, "No placeholders given in p"}
	}
	p := w.byUUID[uuid]
	online := p != nil && w.isOnline(p, c.now)
	values := make(obj, len(tokens))
	for i, tok := range tokens {
		values[i] = member{tok, w.resolve(p, uuid, tok, c.now)}
	}
	return obj{{"uuid", uuid}, {"online", online}, {"values", values}}, nil
}

// resolve stands in for PlaceholderAPI.setPlaceholders: a few expansions are
// "installed"; a token no expansion claims comes back unchanged, as in PAPI.
func (w *world) resolve(p *player, uuid, tok string, now int64) any {
	switch tok {
	case "%player_uuid%":
		return uuid
	case "%server_online%":
		return itoa(w.onlineCount(now))
	case "%server_max_players%":
		return "50"
	}
	if p == nil {
		if strings.HasPrefix(tok, "%player_") || strings.HasPrefix(tok, "%vault_") || strings.HasPrefix(tok, "%luckperms_") {
			return nil // the expansions fail for a player the server never saw
		}
		return tok
	}
	switch tok {
	case "%player_name%":
		return p.name
	case "%player_online%":
		if w.isOnline(p, now) {
			return "yes"
		}
		return "no"
	case "%vault_eco_balance%":
		return string(appendJavaDouble(nil, w.balance(p, now)))
	case "%luckperms_primary_group_name%":
		return p.rank
	case "%cmi_user_nickname%":
		if s, ok := p.nickname.(string); ok {
			return stripColor(s) // strip-color is on by default
		}
		return p.name
	case "%statistic_deaths%":
		return itoa64(w.stat(p, deaths, now))
	}
	return tok
}

// --- custom station --------------------------------------------------------

// votes is what a voting plugin might publish: this month's totals and the
// top voters. Its data is an object; a custom station could return any
// JSON value.
func (w *world) votes(c *call) (any, *apiError) {
	t := time.UnixMilli(c.at).UTC()
	monthStart := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	days := float64(c.at-monthStart) / float64(day)
	type voter struct {
		p *player
		n int
	}
	var voters []voter
	total := 0
	for _, p := range w.players {
		n := int(p.votesPerDay * days)
		total += n
		if n > 0 {
			voters = append(voters, voter{p, n})
		}
	}
	slices.SortStableFunc(voters, func(a, b voter) int { return b.n - a.n })
	top := make([]any, 0, 5)
	for _, v := range voters[:min(5, len(voters))] {
		top = append(top, obj{{"uuid", v.p.uuid}, {"name", v.p.name}, {"votes", v.n}})
	}
	return obj{
		{"month", t.Format("2006-01")},
		{"totalVotes", total},
		{"voters", len(voters)},
		{"sites", []string{"minecraft-mp.example", "planetminecraft.example", "topg.example"}},
		{"top", top},
	}, nil
}
