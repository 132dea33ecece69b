package jsonfilter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
)

// benchNames is the player station's protected list plus one more name, as
// the benchmarks in FILTER-NOTES.md used.
var benchNames = NewNames([]string{"op", "banned", "chatplatform", "discord"})

var (
	statNames = []string{"deaths", "jump", "play_one_minute", "walk_one_cm", "sprint_one_cm",
		"crouch_one_cm", "swim_one_cm", "fall_one_cm", "climb_one_cm", "fly_one_cm", "damage_dealt",
		"damage_taken", "mob_kills", "player_kills", "leave_game", "time_since_death",
		"time_since_rest", "sneak_time", "animals_bred", "fish_caught", "talked_to_villager",
		"traded_with_villager", "eat_cake_slice", "fill_cauldron", "use_cauldron", "clean_armor",
		"open_chest", "open_enderchest", "sleep_in_bed", "open_shulker_box", "bell_ring",
		"raid_trigger", "raid_win", "target_hit", "interact_with_crafting_table", "drop_count",
		"item_enchanted", "record_played", "furnace_interaction", "boat_one_cm"}
	categories = []string{"mine_block", "use_item", "break_item", "craft_item", "pickup", "drop",
		"kill_entity", "entity_killed_by"}
	woods = []string{"oak", "spruce", "birch", "jungle", "acacia", "dark_oak", "mangrove",
		"cherry", "bamboo", "crimson", "warped", "stone", "cobblestone", "mossy_cobblestone",
		"granite", "diorite", "andesite", "deepslate", "tuff", "brick", "mud_brick", "sandstone",
		"red_sandstone", "prismarine", "nether_brick", "blackstone", "end_stone", "purpur",
		"quartz", "copper"}
	shapes = []string{"planks", "log", "wood", "stairs", "slab", "fence", "fence_gate", "door",
		"trapdoor", "button", "pressure_plate", "sign", "hanging_sign", "wall", "leaves", "sapling"}
)

// playerEnvelope builds a deterministic /v1/player response shaped as in
// BACKEND-CONTRACT.md 5.2: the envelope, the player with its protected
// members (op, banned, discord), stat, and a detailed object with perCategory
// materials in each of the given number of typed-statistic categories.
func playerEnvelope(cats, perCategory int) []byte {
	rng := rand.New(rand.NewPCG(uint64(cats), uint64(perCategory)))
	var b bytes.Buffer
	b.WriteString(`{"ok":true,"data":{"uuid":"40094f2f-ca8f-4826-8b31-11e0f4c449df","name":"Alex_MC",` +
		`"nickname":"§bAlexie","messagecolor":"#55FF55","nicknamecolor":"#55FFFF","rank":"vip",` +
		`"registry":1700001234567,"offline":null,"playtime":5123400,"afk":false,"balance":1520.75,` +
		`"addons":false,"pass":false,"discord":"298765432109876543","op":false,"banned":false,"stat":{`)
	for k, s := range statNames {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%d", s, rng.IntN(5_000_000))
	}
	b.WriteString(`},"detailed":{`)
	for c := range cats {
		if c > 0 {
			b.WriteByte(',')
		}
		name := categories[c%len(categories)]
		if c >= len(categories) {
			name += "_" + strconv.Itoa(c/len(categories))
		}
		fmt.Fprintf(&b, "%q:{", name)
		for m := range perCategory {
			if m > 0 {
				b.WriteByte(',')
			}
			w := woods[m%len(woods)]
			s := shapes[(m/len(woods))%len(shapes)]
			if round := m / (len(woods) * len(shapes)); round > 0 {
				s += "_" + strconv.Itoa(round)
			}
			fmt.Fprintf(&b, `"%s_%s":%d`, w, s, 1+rng.IntN(100_000))
		}
		b.WriteByte('}')
	}
	b.WriteString(`}},"meta":{"version":"v1","server":"global","updatedAt":1700001299999,"authenticated":true}}`)
	return b.Bytes()
}

// playerRecord is the ~2 KB record without details, or the ~200 KB one with
// details=true.
func playerRecord(detailed bool) []byte {
	if !detailed {
		return playerEnvelope(1, 30)
	}
	return playerEnvelope(8, 1000)
}

var benchDocs = []struct {
	name string
	doc  []byte
}{
	{"2KB", playerRecord(false)},
	{"200KB", playerRecord(true)},
	{"2MB", playerEnvelope(80, 1000)},
}

func TestBenchDocs(t *testing.T) {
	for _, d := range benchDocs {
		if !gjson.ValidBytes(d.doc) {
			t.Fatalf("%s is not valid", d.name)
		}
		out, hidden, err := Apply(nil, d.doc, benchNames, Options{})
		if err != nil || len(hidden) != 3 || !gjson.ValidBytes(out) {
			t.Fatalf("%s: %v %q", d.name, err, hidden)
		}
		t.Logf("%s: %d bytes", d.name, len(d.doc))
	}
}

// BenchmarkFilter streams each record through a reused Filter in 32 KB
// chunks, as the gateway does, to io.Discard.
func BenchmarkFilter(b *testing.B) {
	for _, d := range benchDocs {
		b.Run(d.name, func(b *testing.B) {
			f := New(io.Discard, benchNames, Options{})
			b.SetBytes(int64(len(d.doc)))
			b.ReportAllocs()
			for b.Loop() {
				f.Reset(io.Discard, benchNames, Options{})
				for p := d.doc; len(p) > 0; {
					k := min(len(p), 32<<10)
					if _, err := f.Write(p[:k]); err != nil {
						b.Fatal(err)
					}
					p = p[k:]
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidate is the bar: gjson.ValidBytes on the same bytes.
func BenchmarkValidate(b *testing.B) {
	for _, d := range benchDocs {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(d.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if !gjson.ValidBytes(d.doc) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// BenchmarkRoundTrip is what the filter replaces: decode into Go values with
// encoding/json, delete the names at any depth, encode again. It is here for
// comparison only (it also changes numbers and key order, see FILTER-NOTES.md).
func BenchmarkRoundTrip(b *testing.B) {
	var strip func(v any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, n := range benchNames.list {
				delete(v, n)
			}
			for _, e := range v {
				strip(e)
			}
		case []any:
			for _, e := range v {
				strip(e)
			}
		}
	}
	for _, d := range benchDocs {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(d.doc)))
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(d.doc, &v); err != nil {
					b.Fatal(err)
				}
				strip(v)
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
