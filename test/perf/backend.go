package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// The fake backend stands in for the ServerAPI plugin with its own auth off:
// every body comes from memory (or, for the bulk body, from a generator), so
// that the backend costs as little as possible and both gateways get the same.

const (
	playerUUID = "40094f2f-ca8f-4826-8b31-11e0f4c449df"
	statusPath = "/api/v1/status"
	playerPath = "/api/v1/player/" + playerUUID + "?detailed=true"
	// bulkPrefix starts the UUID of a player whose body is generated, of as
	// many bytes as the UUID's last group says in decimal (bulkPath): in the
	// path, since the gateway sends the backend only the query parameters an
	// endpoint reads.
	bulkPrefix = "b0000000-0000-0000-0000-"
	// updatedAt and cachedAt are fixed, so that every response is the same bytes.
	fakeMeta = `"meta":{"version":"v1","server":"global","updatedAt":1784300000000,"authenticated":true}`
)

// protectedNames are the player endpoint's default protected fields that the
// ServerAPI plugin actually sends (the interface calls the chat-platform field chatplatform, the plugin discord).
var protectedNames = []string{"op", "banned", "discord"}

// statusBody is a /api/v1/status envelope: a few online players, meta.authenticated true.
func statusBody() []byte {
	var b strings.Builder
	b.WriteString(`{"ok":true,"data":{"online":[`)
	for i := range 8 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%08x-ca8f-4826-8b31-11e0f4c449df"`, 0x40094f2f+i)
	}
	b.WriteString(`],"minecraft":8,"discord":3412},`)
	b.WriteString(`"meta":{"version":"v1","server":"global","updatedAt":1784300000000,"cachedAt":1784299995000,"authenticated":true}}`)
	return []byte(b.String())
}

// playerHead is the start of a player envelope up to the opening brace of
// "detailed": the plugin's key order, with op, banned and discord near the top.
const playerHead = `{"ok":true,"data":{"uuid":"` + playerUUID + `","name":"Alex_MC","nickname":"\u00a7bAlexie",` +
	`"messagecolor":"#55FF55","nicknamecolor":"#55FFFF","rank":"vip","registry":1700001234567,"offline":null,` +
	`"playtime":5123400,"afk":false,"balance":1520.75,"addons":false,"pass":false,` +
	`"discord":"298765432109876543","op":false,"banned":false,` +
	`"stat":{"deaths":12,"jump":8841,"play_one_minute":1024668,"walk_one_cm":5432100,"damage_dealt":90210,"mob_kills":1337},` +
	`"detailed":{`

// playerTail closes "detailed", "data" and adds meta.
const playerTail = `}},` + fakeMeta + `}`

var (
	materialPrefixes = []string{"", "oak_", "spruce_", "birch_", "jungle_", "acacia_", "dark_oak_", "mangrove_", "cherry_", "bamboo_",
		"crimson_", "warped_", "stone_", "cobblestone_", "mossy_", "deepslate_", "polished_", "cut_", "smooth_", "waxed_", "exposed_",
		"weathered_", "oxidized_", "red_", "white_", "black_", "light_blue_", "chiseled_", "cracked_", "infested_"}
	materialBases = []string{"stone", "log", "planks", "slab", "stairs", "fence", "door", "trapdoor", "button", "pressure_plate",
		"sign", "wall", "bricks", "tiles", "ore", "wool", "carpet", "glass", "glass_pane", "concrete", "terracotta", "leaves",
		"sapling", "boat", "copper", "pickaxe", "shovel", "sword", "axe", "hoe", "helmet", "boots", "torch", "lantern", "bed",
		"block", "dust", "ingot", "nugget", "seeds", "dye", "banner", "candle", "chest", "furnace", "hopper", "rail", "powder",
		"shulker_box", "flower_pot"}
)

// material is the i-th made-up material name, e.g. "mossy_stairs".
func material(i int) string {
	return materialPrefixes[i/len(materialBases)%len(materialPrefixes)] + materialBases[i%len(materialBases)]
}

// counter is a deterministic pseudo-random stat value for entry i.
func counter(i int) int { return int(uint32(i)*2654435761>>8) % 200000 }

// bulkBlockMembers are the protected members planted in every block of the bulk
// body, so that a leak anywhere in 64 MB would be seen.
const bulkBlockMembers = `"op":true,"banned":false,"discord":"298765432109876543"`

// bulkPath is the path of a player whose body is size bytes (writeBulk).
func bulkPath(size int64) string {
	return fmt.Sprintf("/api/v1/player/%s%012d?detailed=true", bulkPrefix, size)
}

// writeBulk streams a player envelope of exactly size bytes to w, generated as
// it goes: "detailed" holds numbered blocks of material counters, each with the
// protected members inside, and a final padding string makes the size exact.
// It holds one block in memory, never the body.
func writeBulk(w io.Writer, size int64) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	// The smallest possible padding member, `"pad":""`; a leading comma is added
	// when it follows a block.
	const padMin = len(`"pad":""`) + 1
	fixed := int64(len(playerHead) + len(playerTail) + padMin)
	if size < fixed {
		return fmt.Errorf("bulk size %d is below the minimum %d", size, fixed)
	}
	written := int64(len(playerHead))
	bw.WriteString(playerHead)
	block := make([]byte, 0, 4096)
	for n := 0; ; n++ {
		block = block[:0]
		if n > 0 {
			block = append(block, ',')
		}
		block = fmt.Appendf(block, `"block_%07d":{`, n)
		for i := range 120 {
			block = append(block, '"')
			block = append(block, material(i+n)...)
			block = append(block, `":`...)
			block = strconv.AppendInt(block, int64(counter(i+n)), 10)
			block = append(block, ',')
			if i == 60 {
				block = append(block, `"nested":[{`...)
				block = append(block, bulkBlockMembers...)
				block = append(block, `}],`...)
			}
		}
		block = append(block, bulkBlockMembers...)
		block = append(block, '}')
		if written+int64(len(block))+int64(len(playerTail)+padMin) > size {
			break
		}
		bw.Write(block)
		written += int64(len(block))
	}
	// Padding: `,"pad":"xxx…"` fills the rest exactly (no comma if no block came first).
	pad := size - written - int64(len(playerTail))
	padHead := `,"pad":"`
	if written == int64(len(playerHead)) {
		padHead = `"pad":"`
	}
	bw.WriteString(padHead)
	for x := pad - int64(len(padHead)) - 1; x > 0; x-- {
		bw.WriteByte('x')
	}
	bw.WriteString(`"` + playerTail)
	return bw.Flush()
}

// backend serves the fake ServerAPI. Each gateway gets its own listener, so that
// what reaches the backend can be told apart per gateway.
type backend struct {
	status, player []byte
	keySeen        atomic.Int64 // requests that arrived carrying X-API-Key or ?key=
}

func newBackend(status, player []byte) *backend {
	return &backend{status: status, player: player}
}

// serve answers on l until it is closed.
func (b *backend) serve(l net.Listener) {
	srv := &http.Server{Handler: b}
	go srv.Serve(l)
}

func setBackendHeaders(h http.Header) {
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Access-Control-Allow-Origin", "*")
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Api-Key") != "" || r.URL.Query().Has("key") {
		b.keySeen.Add(1)
	}
	setBackendHeaders(w.Header())
	var body []byte
	switch {
	case r.URL.Path == statusPath:
		body = b.status
	case strings.HasPrefix(r.URL.Path, "/api/v1/player/"+bulkPrefix):
		size, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/api/v1/player/"+bulkPrefix), 10, 64)
		if err != nil || size <= 0 {
			http.Error(w, "bad bulk size", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		_ = writeBulk(w, size)
		return
	case r.URL.Path == "/api/v1/player/"+playerUUID:
		body = b.player
	default:
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}
