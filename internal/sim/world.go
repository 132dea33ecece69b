package sim

import (
	"math"
	"math/rand/v2"
)

// growthFrom is the instant the simulated counters start growing from
// (2026-01-01T00:00:00Z). Counters are a base drawn from the seed plus
// growth since then, so they rise with the clock and never go backwards.
const growthFrom int64 = 1767225600000

const (
	second = int64(1000)
	minute = 60 * second
	hour   = 60 * minute
	day    = 24 * hour
)

// world is the simulated Minecraft server: what is fixed is drawn from the
// seed once, in newWorld; what moves is computed from (seed, time) on
// request, so it costs little and needs no background goroutine.
type world struct {
	seed     int64
	anchor   int64 // epoch ms at provision; fixed events (bans, kicks, server start) are placed relative to it
	serverID string

	players []*player
	byUUID  map[string]*player
	worlds  []*mcWorld
	plugins []obj
	records []punishment
	modded  []string   // names of the modded blocks and items (ModdedItems)
	tails   *tailCache // the rendered detailed statistics, some players' (detailed)

	index         *station
	stations      []*station // registration order, as the index lists them
	stationByName map[string]*station
}

// player is one member of the roster.
type player struct {
	idx                               int
	uuid, name                        string
	nickname, messageColor, nickColor any // string or nil (no CMI data)
	rank                              any // string or nil
	discord                           any // linked Discord ID as a string, or nil
	op, banned                        bool
	alwaysOnline, neverOnline         bool
	share                             float64 // fraction of time online
	slot                              int64   // ms one online or offline stretch lasts
	registry                          int64   // first join
	lastSeenFixed                     int64   // last seen, for players who are never online
	balance                           float64 // Vault balance at growthFrom
	statBase                          []int64 // per untyped stat, in untypedStats order
	statRate                          []int64 // growth per hour online
	activity                          float64 // scales the detailed statistics
	detailedHead                      int64   // mine_block.stone at growthFrom; it grows, the rest is fixed (world.tails)
	votesPerDay                       float64
}

// The named players: a gateway's tests and walk-throughs can rely on their
// UUIDs, names and flags, which do not depend on the seed.
const (
	alexUUID     = "40094f2f-ca8f-4826-8b31-11e0f4c449df" // Alex_MC: op, always online, Discord linked
	grieferUUID  = "8b1e62a0-5c1d-4f0b-9a77-2f3c9d0e6b21" // Griefer42: banned, never online
	annaUUID     = "1c9e0a44-7b0d-4a9e-8f21-3e5d6c7b8a90" // ModAnna: op, the moderator
	benUUID      = "5e7c3b2a-9d41-4f6e-b8a0-6c2d1e9f7a35" // BuilderBen
	lunaUUID     = "c3a1f0d2-7e6b-4a59-9c8d-0b1a2e3f4d56" // LunaSky
	kidUUID      = "9f8e7d6c-5b4a-4392-8170-6a5b4c3d2e1f" // Creeper_Kid: muted
	pixelUUID    = "2b3c4d5e-6f70-4812-9a3b-4c5d6e7f8091" // PixelFox
	oldTimerUUID = "7a6b5c4d-3e2f-4109-8877-665544332211" // OldTimer: not seen for months
)

// namedPlayers returns fresh copies of the named players; addPlayer fills
// in what is drawn from the seed.
func namedPlayers(anchor int64) []*player {
	return []*player{
		{uuid: alexUUID, name: "Alex_MC", rank: "vip", discord: "298765432109876543", nickname: "§bAlexie",
			messageColor: "#55FF55", op: true, alwaysOnline: true, registry: 1700001234567,
			balance: 1520.75, activity: 1, votesPerDay: 1.2},
		{uuid: grieferUUID, name: "Griefer42", rank: "default", banned: true, neverOnline: true,
			lastSeenFixed: anchor - 100000000 - 5*minute, // kicked, then banned (see punishmentRecords)
			balance:       12.5, activity: 0.55},
		{uuid: annaUUID, name: "ModAnna", rank: "moderator", discord: "412345678901234567", nickname: "&dAnna",
			messageColor: "&d", op: true, share: 0.6, balance: 8800, activity: 0.8, votesPerDay: 0.9},
		{uuid: benUUID, name: "BuilderBen", rank: "builder", share: 0.5, balance: 20000, activity: 0.9, votesPerDay: 0.5},
		{uuid: lunaUUID, name: "LunaSky", rank: "vip", discord: "523456789012345678", nickname: "§dLuna§f✦",
			messageColor: "#FF55FF", share: 0.4, balance: 310.4, activity: 0.7, votesPerDay: 1},
		{uuid: kidUUID, name: "Creeper_Kid", rank: "default", share: 0.3, balance: 47, activity: 0.6, votesPerDay: 0.3},
		{uuid: pixelUUID, name: "PixelFox", rank: "default", discord: "634567890123456789", share: 0.35, balance: 95.25,
			activity: 0.65, votesPerDay: 0.6},
		{uuid: oldTimerUUID, name: "OldTimer", rank: "veteran", neverOnline: true, lastSeenFixed: 1741000000000,
			balance: 4321, activity: 0.75},
	}
}

// generatedPlayers is how many seed-drawn players join the named ones, so
// that the online count moves like a small community server's.
const generatedPlayers = 22

var nameParts = [2][]string{
	{"Swift", "Lazy", "Dark", "Happy", "Iron", "Frosty", "Sneaky", "Lucky", "Mossy", "Rusty", "Sunny", "Quiet", "Brave", "Tiny", "Wild", "Golden"},
	{"Fox", "Miner", "Golem", "Otter", "Wolf", "Farmer", "Knight", "Panda", "Axolotl", "Bee", "Villager", "Raven", "Slime", "Ocelot", "Turtle", "Smith"},
}

func newWorld(seed int64, anchor int64, serverID string) *world {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x57a7_05ea_7e00_0001))
	w := &world{seed: seed, anchor: anchor, serverID: serverID, byUUID: map[string]*player{}, tails: newTailCache(tailCacheBytes)}

	for _, p := range namedPlayers(anchor) {
		w.addPlayer(p, rng)
	}
	used := map[string]bool{}
	for range generatedPlayers {
		var name string
		for name == "" || used[name] {
			name = nameParts[0][rng.IntN(len(nameParts[0]))] + nameParts[1][rng.IntN(len(nameParts[1]))]
			if rng.IntN(3) == 0 {
				name += itoa(rng.IntN(99) + 1)
			}
		}
		used[name] = true
		p := &player{
			uuid: randomUUID(rng), name: name, rank: "default",
			share:   0.08 + 0.35*rng.Float64(),
			balance: math.Round(rng.Float64()*500000) / 100, activity: 0.3 + 0.5*rng.Float64(),
			votesPerDay: rng.Float64(),
		}
		if rng.IntN(4) == 0 {
			p.discord = itoa64(300000000000000000 + rng.Int64N(600000000000000000))
		}
		w.addPlayer(p, rng)
	}
	w.worlds = newWorlds(rng)
	w.plugins = pluginList()
	w.records = w.punishmentRecords(anchor)
	w.buildStations()
	return w
}

// addPlayer completes p with what is drawn from the seed and adds it to
// the roster.
func (w *world) addPlayer(p *player, rng *rand.Rand) {
	p.idx = len(w.players)
	p.messageColor = normaliseColor(p.messageColor)
	p.nickColor = firstColor(p.nickname)
	p.slot = (1 + rng.Int64N(5)) * minute
	if p.registry == 0 {
		p.registry = 1690000000000 + rng.Int64N(70*day*3)
	}
	p.statBase = make([]int64, len(untypedStats))
	p.statRate = make([]int64, len(untypedStats))
	for i, st := range untypedStats {
		p.statBase[i] = int64(float64(st.base) * p.activity * (0.5 + rng.Float64()))
		p.statRate[i] = int64(float64(st.perHour) * (0.6 + 0.8*rng.Float64()))
	}
	p.detailedHead = int64(2000 + 40000*p.activity*rng.Float64())
	w.players = append(w.players, p)
	w.byUUID[p.uuid] = p
}

// stat is the value of untyped statistic i for p at t.
func (w *world) stat(p *player, i int, t int64) int64 {
	return p.statBase[i] + int64(float64(p.statRate[i])*w.hoursPlayed(p, t))
}

// balance is p's Vault balance at t: it grows a little with play time.
func (w *world) balance(p *player, t int64) float64 {
	return round2(p.balance + w.hoursPlayed(p, t)*1.75)
}

// --- time ------------------------------------------------------------------

// splitmix64 finaliser: a cheap, well-mixed hash for the time-driven noise.
func mix(vals ...int64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, v := range vals {
		h ^= uint64(v)
		h += 0x9e3779b97f4a7c15
		h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
		h = (h ^ (h >> 27)) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// noise is a value in [0, 1) that changes every period ms and is the same
// for everyone at the same instant.
func (w *world) noise(t, period int64, salt ...int64) float64 {
	return unit(mix(append([]int64{w.seed, t / period}, salt...)...))
}

func (w *world) onlineInSlot(p *player, slot int64) bool {
	return unit(mix(w.seed, int64(p.idx), slot, 0x0411)) < p.share
}

func (w *world) isOnline(p *player, t int64) bool {
	switch {
	case p.alwaysOnline:
		return true
	case p.neverOnline || p.banned:
		return false
	}
	return w.onlineInSlot(p, t/p.slot)
}

// lastSeen is the plugin's "offline": nil while the player is online.
func (w *world) lastSeen(p *player, t int64) any {
	if w.isOnline(p, t) {
		return nil
	}
	if p.lastSeenFixed != 0 || p.neverOnline || p.banned {
		return p.lastSeenFixed
	}
	slot := t / p.slot
	for k := int64(1); k < 5000; k++ {
		if w.onlineInSlot(p, slot-k) {
			return (slot-k+1)*p.slot - int64(mix(w.seed, int64(p.idx), slot-k)%uint64(p.slot/2))
		}
	}
	return p.registry
}

func (w *world) online(t int64) []string {
	var out []string
	for _, p := range w.players {
		if w.isOnline(p, t) {
			out = append(out, p.uuid)
		}
	}
	return out
}

func (w *world) onlineCount(t int64) int {
	n := 0
	for _, p := range w.players {
		if w.isOnline(p, t) {
			n++
		}
	}
	return n
}

// discordMembers is the DiscordSRV guild size: slowly growing, with a
// little churn. Every 97th sample period DiscordSRV is "not ready" (nil),
// as happens after a reconnect.
func (w *world) discordMembers(t int64, period int64) any {
	if mix(w.seed, t/period, 0xd15c)%97 == 0 {
		return nil
	}
	return 3400 + (t-growthFrom)/day*3 + int64(w.noise(t, period, 0xd15c)*5)
}

// hoursPlayed is how long p has been online since growthFrom, on average:
// the smooth version keeps counters monotonic without walking the slots.
func (w *world) hoursPlayed(p *player, t int64) float64 {
	if t < growthFrom {
		return 0
	}
	share := p.share
	if p.alwaysOnline {
		share = 1
	}
	if p.neverOnline || p.banned {
		share = 0
	}
	return share * float64(t-growthFrom) / float64(hour)
}

// tps is a drifting tick rate: mostly 20.0, with lag dips that the 1m
// average shows fully and the 5m/15m averages damp.
func (w *world) tps(t int64) (m1, m5, m15, tickMs float64) {
	lag := w.noise(t, 15*second, 0x7475)
	dip := 0.0
	if lag > 0.7 {
		dip = (lag - 0.7) * 6 // up to 1.8 TPS lost
	}
	m1 = round2(20 - dip - 0.05*w.noise(t, 5*second, 1))
	m5 = round2(20 - dip/4)
	m15 = round2(20 - dip/12)
	tickMs = round2(9 + 6*w.noise(t, 5*second, 2) + dip*20)
	return
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// --- static parts ----------------------------------------------------------

func randomUUID(rng *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // IETF variant
	return formatUUID(b)
}

func formatUUID(b [16]byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&0xf])
	}
	return string(out)
}

// legacyColors maps Minecraft colour codes to #RRGGBB.
var legacyColors = map[byte]string{
	'0': "#000000", '1': "#0000AA", '2': "#00AA00", '3': "#00AAAA", '4': "#AA0000", '5': "#AA00AA",
	'6': "#FFAA00", '7': "#AAAAAA", '8': "#555555", '9': "#5555FF", 'a': "#55FF55", 'b': "#55FFFF",
	'c': "#FF5555", 'd': "#FF55FF", 'e': "#FFFF55", 'f': "#FFFFFF",
}

// normaliseColor turns a CMI colour ("&d") into #RRGGBB when it can and
// leaves anything else as it is, as the plugin does for messagecolor.
func normaliseColor(v any) any {
	s, ok := v.(string)
	if !ok || len(s) != 2 || (s[0] != '&' && s[0] != '\xa7') {
		return v
	}
	if c, ok := legacyColors[s[1]]; ok {
		return c
	}
	return v
}

// firstColor is the plugin's nicknamecolor: the first colour code in the
// nickname, as #RRGGBB.
func firstColor(v any) any {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	for i := 0; i+1 < len(s); i++ {
		code := s[i+1]
		switch {
		case s[i] == '&':
		case s[i] == 0xc2 && s[i+1] == 0xa7 && i+2 < len(s): // '§' in UTF-8
			code = s[i+2]
		default:
			continue
		}
		if c, ok := legacyColors[code]; ok {
			return c
		}
	}
	return nil
}

// stripColor removes §x colour codes, as the plugin's strip-color option
// (ChatColor.stripColor) does.
func stripColor(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == 0xc2 && i+2 < len(s) && s[i+1] == 0xa7 {
			i += 2
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}

func itoa(n int) string     { return itoa64(int64(n)) }
func itoa64(n int64) string { return string(appendJSON(nil, n)) }
