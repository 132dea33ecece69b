package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/statusgate/statusgate/internal/apijson"
)

type untypedStat struct {
	name          string
	base, perHour int64
}

// untypedStats are Bukkit's UNTYPED statistics in enum order, with a base
// for a very active player and a growth per hour online.
var untypedStats = []untypedStat{
	{"damage_dealt", 480000, 900}, {"damage_taken", 210000, 400}, {"deaths", 140, 1},
	{"mob_kills", 9000, 25}, {"player_kills", 12, 0}, {"fish_caught", 300, 1},
	{"animals_bred", 900, 2}, {"leave_game", 2100, 1}, {"jump", 260000, 500},
	{"drop_count", 7000, 15}, {"play_one_minute", 20000000, 72000}, {"total_world_time", 21000000, 72000},
	{"walk_one_cm", 90000000, 150000}, {"walk_on_water_one_cm", 1500000, 2000}, {"fall_one_cm", 4000000, 7000},
	{"sneak_time", 900000, 1500}, {"climb_one_cm", 600000, 900}, {"fly_one_cm", 30000000, 40000},
	{"walk_under_water_one_cm", 2500000, 3000}, {"minecart_one_cm", 400000, 300}, {"boat_one_cm", 3000000, 2000},
	{"pig_one_cm", 2000, 0}, {"horse_one_cm", 900000, 500}, {"sprint_one_cm", 70000000, 120000},
	{"crouch_one_cm", 800000, 1200}, {"aviate_one_cm", 150000000, 200000}, {"time_since_death", 600000, 72000},
	{"talked_to_villager", 4000, 6}, {"traded_with_villager", 2500, 4}, {"cake_slices_eaten", 20, 0},
	{"cauldron_filled", 30, 0}, {"cauldron_used", 60, 0}, {"armor_cleaned", 10, 0},
	{"banner_cleaned", 2, 0}, {"brewingstand_interaction", 700, 1}, {"beacon_interaction", 40, 0},
	{"noteblock_played", 90, 0}, {"noteblock_tuned", 200, 0}, {"flower_potted", 50, 0},
	{"trapped_chest_triggered", 120, 0}, {"enderchest_opened", 3000, 5}, {"item_enchanted", 600, 1},
	{"record_played", 15, 0}, {"furnace_interaction", 5000, 7}, {"crafting_table_interaction", 9000, 14},
	{"chest_opened", 40000, 60}, {"sleep_in_bed", 900, 1}, {"shulker_box_opened", 8000, 12},
	{"time_since_rest", 30000, 72000}, {"swim_one_cm", 3000000, 4000}, {"damage_dealt_absorbed", 2000, 3},
	{"damage_dealt_resisted", 1500, 2}, {"damage_blocked_by_shield", 30000, 40}, {"damage_absorbed", 9000, 10},
	{"damage_resisted", 7000, 9}, {"clean_shulker_box", 5, 0}, {"open_barrel", 6000, 8},
	{"interact_with_blast_furnace", 800, 1}, {"interact_with_smoker", 500, 1}, {"interact_with_lectern", 70, 0},
	{"interact_with_campfire", 30, 0}, {"interact_with_cartography_table", 40, 0}, {"interact_with_loom", 60, 0},
	{"interact_with_stonecutter", 900, 1}, {"bell_ring", 25, 0}, {"raid_trigger", 8, 0},
	{"raid_win", 6, 0}, {"interact_with_anvil", 800, 1}, {"interact_with_grindstone", 300, 0},
	{"target_hit", 50, 0}, {"interact_with_smithing_table", 150, 0}, {"strider_one_cm", 40000, 0},
}

// Indexes into untypedStats that other values are derived from.
var (
	deaths        = statIndex("deaths")
	playOneMinute = statIndex("play_one_minute")
)

func statIndex(name string) int {
	return slices.IndexFunc(untypedStats, func(s untypedStat) bool { return s.name == name })
}

// --- materials and entities for the detailed statistics --------------------

var (
	colours = strings.Fields("white orange magenta light_blue yellow lime pink gray light_gray cyan purple blue brown green red black")
	woods   = strings.Fields("oak spruce birch jungle acacia dark_oak mangrove cherry pale_oak bamboo crimson warped")
	stones  = strings.Fields("stone cobblestone mossy_cobblestone stone_brick mossy_stone_brick granite polished_granite diorite " +
		"polished_diorite andesite polished_andesite cobbled_deepslate polished_deepslate deepslate_brick deepslate_tile " +
		"tuff polished_tuff tuff_brick blackstone polished_blackstone polished_blackstone_brick sandstone smooth_sandstone " +
		"red_sandstone smooth_red_sandstone brick mud_brick nether_brick red_nether_brick end_stone_brick prismarine " +
		"prismarine_brick dark_prismarine purpur quartz smooth_quartz cut_copper exposed_cut_copper weathered_cut_copper " +
		"oxidized_cut_copper waxed_cut_copper resin_brick")
	ores    = strings.Fields("coal iron copper gold redstone lapis diamond emerald")
	tiers   = strings.Fields("wooden stone iron golden diamond netherite")
	tools   = strings.Fields("sword pickaxe axe shovel hoe")
	armours = strings.Fields("leather chainmail iron golden diamond netherite")
	pieces  = strings.Fields("helmet chestplate leggings boots")
	misc    = strings.Fields("deepslate dirt grass_block coarse_dirt rooted_dirt mud podzol mycelium sand red_sand gravel clay " +
		"netherrack soul_sand soul_soil basalt smooth_basalt calcite dripstone_block pointed_dripstone obsidian crying_obsidian " +
		"glowstone sea_lantern magma_block ice packed_ice blue_ice snow_block snow moss_block moss_carpet azalea " +
		"flowering_azalea sculk sculk_vein sculk_sensor sculk_catalyst sculk_shrieker amethyst_block amethyst_cluster " +
		"budding_amethyst end_stone chorus_plant chorus_flower glass glass_pane tinted_glass torch soul_torch lantern " +
		"soul_lantern chain ladder scaffolding rail powered_rail detector_rail activator_rail redstone_torch repeater " +
		"comparator observer piston sticky_piston hopper dropper dispenser lever target daylight_detector tnt note_block " +
		"jukebox crafting_table furnace blast_furnace smoker campfire soul_campfire anvil grindstone smithing_table " +
		"stonecutter loom cartography_table fletching_table lectern composter barrel chest trapped_chest ender_chest " +
		"shulker_box beacon conduit enchanting_table bookshelf chiseled_bookshelf brewing_stand cauldron bell " +
		"respawn_anchor lodestone crafter trial_spawner vault heavy_core hay_block dried_kelp_block honey_block " +
		"honeycomb_block slime_block bone_block melon pumpkin carved_pumpkin jack_o_lantern cactus sugar_cane kelp " +
		"seagrass bamboo vine glow_lichen lily_pad short_grass tall_grass fern large_fern dead_bush dandelion poppy " +
		"blue_orchid allium azure_bluet red_tulip orange_tulip white_tulip pink_tulip oxeye_daisy cornflower " +
		"lily_of_the_valley torchflower sunflower lilac rose_bush peony pitcher_plant wheat carrots potatoes beetroots " +
		"sweet_berry_bush cocoa nether_wart brown_mushroom red_mushroom crimson_fungus warped_fungus shroomlight " +
		"nether_wart_block warped_wart_block ancient_debris netherite_block diamond_block emerald_block gold_block " +
		"iron_block copper_block lapis_block redstone_block coal_block quartz_block raw_iron_block raw_gold_block " +
		"raw_copper_block spawner")
	items = strings.Fields("stick coal charcoal raw_iron raw_gold raw_copper iron_ingot gold_ingot copper_ingot netherite_ingot " +
		"netherite_scrap diamond emerald lapis_lazuli redstone quartz amethyst_shard flint string feather gunpowder leather " +
		"bone bone_meal arrow spectral_arrow tipped_arrow bow crossbow trident mace shield elytra totem_of_undying " +
		"ender_pearl ender_eye blaze_rod blaze_powder breeze_rod wind_charge ghast_tear magma_cream slime_ball " +
		"phantom_membrane shulker_shell nautilus_shell heart_of_the_sea prismarine_shard prismarine_crystals " +
		"experience_bottle enchanted_book book writable_book written_book paper map filled_map compass recovery_compass " +
		"clock spyglass brush fishing_rod shears flint_and_steel bucket water_bucket lava_bucket milk_bucket powder_snow_bucket " +
		"cod_bucket salmon_bucket axolotl_bucket firework_rocket firework_star name_tag lead saddle minecart chest_minecart " +
		"hopper_minecart tnt_minecart bread apple golden_apple enchanted_golden_apple golden_carrot carrot potato baked_potato " +
		"poisonous_potato beetroot beetroot_soup mushroom_stew rabbit_stew suspicious_stew cooked_beef beef cooked_porkchop " +
		"porkchop cooked_chicken chicken cooked_mutton mutton cooked_rabbit rabbit cooked_cod cod cooked_salmon salmon " +
		"tropical_fish pufferfish cookie cake pumpkin_pie melon_slice glistering_melon_slice sweet_berries glow_berries " +
		"honey_bottle dried_kelp chorus_fruit rotten_flesh spider_eye fermented_spider_eye potion splash_potion lingering_potion " +
		"glass_bottle sugar egg wheat_seeds pumpkin_seeds melon_seeds beetroot_seeds torchflower_seeds pitcher_pod " +
		"ink_sac glow_ink_sac cocoa_beans turtle_scute armadillo_scute wolf_armor goat_horn echo_shard disc_fragment_5 " +
		"music_disc_13 music_disc_cat music_disc_pigstep music_disc_otherside trial_key ominous_trial_key ominous_bottle " +
		"netherite_upgrade_smithing_template sentry_armor_trim_smithing_template dune_armor_trim_smithing_template " +
		"bundle item_frame glow_item_frame painting armor_stand end_crystal")
	mobs = strings.Fields("allay armadillo axolotl bat bee blaze bogged breeze camel cat cave_spider chicken cod cow creaking " +
		"creeper dolphin donkey drowned elder_guardian enderman endermite evoker fox frog ghast glow_squid goat guardian " +
		"hoglin horse husk iron_golem llama magma_cube mooshroom mule ocelot panda parrot phantom pig piglin piglin_brute " +
		"pillager polar_bear pufferfish rabbit ravager salmon sheep shulker silverfish skeleton skeleton_horse slime " +
		"sniffer snow_golem spider squid stray strider tadpole trader_llama tropical_fish turtle vex villager vindicator " +
		"wandering_trader warden witch wither wither_skeleton wolf zoglin zombie zombie_horse zombie_villager zombified_piglin")
	hostile = strings.Fields("blaze bogged breeze cave_spider creaking creeper drowned elder_guardian enderman evoker ghast " +
		"guardian hoglin husk magma_cube phantom piglin_brute pillager ravager shulker silverfish skeleton slime spider stray " +
		"vex vindicator warden witch wither wither_skeleton zoglin zombie zombie_villager")
)

// Material groups the typed statistics draw from, built once.
var blocks, allItems, gear = buildMaterials()

func buildMaterials() (blocks, all, gear []string) {
	for _, c := range colours {
		for _, s := range strings.Fields("wool carpet concrete concrete_powder terracotta glazed_terracotta stained_glass stained_glass_pane bed banner candle shulker_box") {
			blocks = append(blocks, c+"_"+s)
		}
	}
	for _, wd := range woods {
		for _, s := range strings.Fields("log wood planks stairs slab fence fence_gate door trapdoor pressure_plate button sign hanging_sign leaves sapling") {
			blocks = append(blocks, wd+"_"+s)
		}
	}
	for _, st := range stones {
		base := st
		if strings.HasSuffix(st, "brick") || strings.HasSuffix(st, "tile") {
			base = st + "s"
		}
		blocks = append(blocks, base, st+"_stairs", st+"_slab", st+"_wall")
	}
	for _, o := range ores {
		blocks = append(blocks, o+"_ore", "deepslate_"+o+"_ore")
	}
	blocks = append(blocks, misc...)
	for _, ox := range []string{"", "exposed_", "weathered_", "oxidized_"} {
		for _, wax := range []string{"", "waxed_"} {
			for _, s := range strings.Fields("copper cut_copper cut_copper_stairs cut_copper_slab copper_door copper_trapdoor copper_grate copper_bulb chiseled_copper") {
				blocks = append(blocks, wax+ox+s)
			}
		}
	}
	for _, c := range strings.Fields("tube brain bubble fire horn") {
		for _, s := range []string{c + "_coral", c + "_coral_block", c + "_coral_fan", "dead_" + c + "_coral", "dead_" + c + "_coral_block", "dead_" + c + "_coral_fan"} {
			blocks = append(blocks, s)
		}
	}
	for _, wd := range woods {
		blocks = append(blocks, wd+"_wall_sign", wd+"_wall_hanging_sign", "potted_"+wd+"_sapling")
	}
	for _, c := range colours {
		blocks = append(blocks, c+"_candle_cake", c+"_wall_banner")
	}
	for _, h := range strings.Fields("skeleton wither_skeleton zombie creeper dragon piglin player") {
		blocks = append(blocks, h+"_head", h+"_wall_head")
	}
	for _, st := range strings.Fields("stone cobblestone stone_bricks mossy_stone_bricks cracked_stone_bricks chiseled_stone_bricks deepslate") {
		blocks = append(blocks, "infested_"+st)
	}
	for _, t := range tiers {
		for _, tl := range tools {
			gear = append(gear, t+"_"+tl)
		}
	}
	for _, a := range armours {
		for _, pc := range pieces {
			gear = append(gear, a+"_"+pc)
		}
	}
	gear = append(gear, "bow", "crossbow", "trident", "mace", "shield", "elytra", "fishing_rod", "shears", "flint_and_steel", "brush")
	all = append(all, blocks...)
	all = append(all, items...)
	all = append(all, gear...)
	for _, m := range mobs {
		all = append(all, m+"_spawn_egg")
	}
	for _, c := range colours {
		all = append(all, c+"_dye")
	}
	for _, wd := range woods {
		all = append(all, wd+"_boat", wd+"_chest_boat")
	}
	for _, c := range colours {
		all = append(all, c+"_harness", c+"_bundle")
	}
	for _, s := range strings.Fields("angler archer arms_up blade brewer burn danger explorer flow friend guster heart heartbreak " +
		"howl miner mourner plenty prize scrape sheaf shelter skull snort") {
		all = append(all, s+"_pottery_sherd")
	}
	for _, s := range strings.Fields("coast dune eye host raiser rib sentry shaper silence snout spire tide vex ward wayfinder wild bolt flow") {
		all = append(all, s+"_armor_trim_smithing_template")
	}
	for _, s := range strings.Fields("11 13 5 blocks cat chirp creator creator_music_box far lava_chicken mall mellohi otherside " +
		"pigstep precipice relic stal strad tears wait ward") {
		all = append(all, "music_disc_"+s)
	}
	for _, s := range strings.Fields("awkward mundane thick night_vision invisibility leaping fire_resistance swiftness slowness " +
		"water_breathing healing harming poison regeneration strength weakness luck turtle_master slow_falling wind_charged " +
		"weaving oozing infested") {
		all = append(all, s+"_potion", s+"_splash_potion", s+"_lingering_potion", s+"_tipped_arrow")
	}
	return dedupe(blocks), dedupe(all), gear
}

// dedupe keeps the first occurrence of each name: a JSON object must not
// repeat a member.
func dedupe(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// detailedCategories are the typed statistics in the order they are
// written, with the names each draws from and how many of those a very
// active player has touched.
var detailedCategories = []struct {
	name     string
	from     *[]string
	coverage float64
	scale    float64 // e^scale is the typical top count
}{
	{"mine_block", &blocks, 0.85, 10},
	{"use_item", &allItems, 0.95, 10},
	{"break_item", &gear, 0.7, 5},
	{"craft_item", &allItems, 0.8, 8},
	{"pickup", &allItems, 0.95, 10},
	{"drop", &allItems, 0.8, 7},
	{"kill_entity", &mobs, 0.95, 7},
	{"entity_killed_by", &hostile, 0.7, 3},
}

// detailed returns the player's per-material statistics. Most of the
// document (100-250 KB, megabytes with modded_items) is rendered on use and
// kept in w.tails, which bounds what all players' take together; only the
// first counter, mine_block.stone, grows with play time and is written per
// request.
func (w *world) detailed(p *player, played float64) raw {
	tail := w.tails.get(p.idx, func() []byte { return w.renderDetailedTail(p) })
	b := make([]byte, 0, len(tail)+40)
	b = append(b, `{"mine_block":{"stone":`...)
	b = appendJSON(b, p.detailedHead+int64(played*180))
	return append(b, tail...)
}

// renderDetailedTail renders everything after mine_block.stone: non-zero
// entries only, as the plugin writes them. The same player gives the same
// bytes every time: they are drawn from the seed.
func (w *world) renderDetailedTail(p *player) []byte {
	rng := rand.New(rand.NewPCG(uint64(w.seed), uint64(p.idx)+0xde7a11ed))
	b := make([]byte, 0, 256<<10)
	for i, cat := range detailedCategories {
		if i > 0 {
			b = append(b, ',')
			b = apijson.AppendString(b, cat.name)
			b = append(b, ":{"...)
		}
		first := i > 0
		names := *cat.from
		if cat.from == &blocks || cat.from == &allItems {
			names = slices.Concat(names, w.modded)
		}
		for _, name := range names {
			if i == 0 && name == "stone" {
				continue // the live head
			}
			if rng.Float64() > cat.coverage*(0.75+0.25*p.activity) {
				continue
			}
			n := int64(math.Exp(rng.Float64()*cat.scale*(0.5+0.5*p.activity))) + int64(rng.IntN(3))
			if n <= 0 {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = apijson.AppendString(b, name)
			b = append(b, ':')
			b = appendJSON(b, n)
		}
		b = append(b, '}')
	}
	// Kept at its length, not at the capacity appending grew it to.
	return slices.Clone(append(b, '}'))
}

// moddedMods are the namespaces of the modded items, as a hybrid server's
// Bukkit material names carry them (CREATE_COGWHEEL becomes create_cogwheel).
var moddedMods = strings.Fields("create mekanism thermal ae2 botania tconstruct immersiveengineering ars_nouveau " +
	"mysticalagriculture ironchest sophisticatedbackpacks refinedstorage")

// moddedNames returns n distinct modded material names: each mod's variant
// of a vanilla block or item, with a number once every pairing is used.
func moddedNames(n int) []string {
	if n == 0 {
		return nil
	}
	base := slices.Concat(blocks, allItems)
	out := make([]string, 0, n)
	seen := make(map[string]bool, n)
	for k := 0; len(out) < n; k++ {
		name := moddedMods[k%len(moddedMods)] + "_" + base[k/len(moddedMods)%len(base)]
		if r := k / (len(moddedMods) * len(base)); r > 0 {
			name += "_" + strconv.Itoa(r+1)
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// --- worlds ----------------------------------------------------------------

// worldSeed is shared by all three dimensions, as on a vanilla server; it
// lies beyond 2^53, so a gateway that goes through float64 changes it.
const worldSeed int64 = -4172144997902289642

var spawnCategories = []string{"MONSTER", "ANIMAL", "WATER_ANIMAL", "WATER_AMBIENT", "WATER_UNDERGROUND_CREATURE", "AMBIENT", "AXOLOTL"}

type mcWorld struct {
	idx                                   int
	name, uid, environment, difficulty    string
	minHeight, maxHeight, seaLevel        int
	spawn                                 obj
	fullTimeAt0                           int64 // fullTime at growthFrom
	chunksBase                            int
	weather                               bool // has weather at all (the overworld)
	gameRules, spawnLimits, ticksPerSpawn obj
	entityTypes                           []entityCount
}

type entityCount struct {
	name string
	base int
}

func newWorlds(rng *rand.Rand) []*mcWorld {
	defs := []struct {
		name, uid, env  string
		minH, maxH, sea int
		spawn           obj
		weather         bool
		types           string
	}{
		{"world", "5b2f7a1e-0c3d-4e55-9a61-7d2b9c1e8f40", "NORMAL", -64, 320, 63, obj{{"x", 112}, {"y", 71}, {"z", -48}}, true,
			"ARMOR_STAND BAT CAT CHICKEN COW CREEPER DROWNED ENDERMAN EXPERIENCE_ORB GLOW_ITEM_FRAME HORSE ITEM ITEM_FRAME " +
				"MINECART PAINTING PIG SHEEP SKELETON SPIDER SQUID VILLAGER WOLF ZOMBIE ZOMBIE_VILLAGER"},
		{"world_nether", "0e4d9c2b-6a71-4f38-8b05-3c9e1d7a2f64", "NETHER", 0, 256, 32, obj{{"x", 14}, {"y", 70}, {"z", -6}}, false,
			"BLAZE GHAST HOGLIN ITEM MAGMA_CUBE PIGLIN SKELETON STRIDER WITHER_SKELETON ZOMBIFIED_PIGLIN"},
		{"world_the_end", "9a3c5e7f-1b2d-4c6e-8f0a-2b4d6f8a0c1e", "THE_END", 0, 256, 63, obj{{"x", 100}, {"y", 49}, {"z", 0}}, false,
			"END_CRYSTAL ENDERMAN ITEM SHULKER"},
	}
	var out []*mcWorld
	for i, d := range defs {
		mw := &mcWorld{
			idx: i, name: d.name, uid: d.uid, environment: d.env, difficulty: "HARD",
			minHeight: d.minH, maxHeight: d.maxH, seaLevel: d.sea, spawn: d.spawn, weather: d.weather,
			fullTimeAt0: 2000000 + rng.Int64N(1000000),
			chunksBase:  []int{1400, 350, 180}[i],
		}
		types := strings.Fields(d.types)
		slices.Sort(types) // byType is alphabetical
		for _, t := range types {
			mw.entityTypes = append(mw.entityTypes, entityCount{t, 2 + rng.IntN(60)})
		}
		mw.gameRules = obj{
			{"announce_advancements", true}, {"block_explosion_drop_decay", true}, {"command_block_output", false},
			{"do_daylight_cycle", true}, {"do_fire_tick", false}, {"do_insomnia", true}, {"do_mob_spawning", true},
			{"do_weather_cycle", true}, {"drowning_damage", true}, {"fall_damage", true}, {"keep_inventory", rng.IntN(2) == 0},
			{"immediate_respawn", false}, {"lava_source_conversion", false}, {"max_entity_cramming", 24},
			{"mob_griefing", false}, {"players_sleeping_percentage", 50}, {"random_tick_speed", 3},
			{"spawn_radius", 10}, {"spectators_generate_chunks", true}, {"water_source_conversion", true},
		}
		limits := []int{70, 10, 5, 20, 5, 15, 5}
		ticks := []int{1, 400, 1, 1, 1, 1, 1}
		for j, cat := range spawnCategories {
			mw.spawnLimits = append(mw.spawnLimits, member{cat, limits[j]})
			mw.ticksPerSpawn = append(mw.ticksPerSpawn, member{cat, ticks[j]})
		}
		out = append(out, mw)
	}
	return out
}

func (w *world) worldObj(mw *mcWorld, t int64) obj {
	fullTime := mw.fullTimeAt0 + max(0, t-growthFrom)/50 // 20 ticks a second
	storm, thunder := false, false
	if mw.weather {
		storm = w.noise(t, 20*minute, int64(mw.idx), 0x5702) < 0.25
		thunder = storm && w.noise(t, 20*minute, int64(mw.idx), 0x7d) < 0.3
	}
	return obj{
		{"name", mw.name},
		{"uid", mw.uid},
		{"environment", mw.environment},
		{"seed", worldSeed},
		{"difficulty", mw.difficulty},
		{"time", fullTime % 24000},
		{"fullTime", fullTime},
		{"dayCount", fullTime / 24000},
		{"weather", obj{
			{"hasStorm", storm}, {"thundering", thunder},
			{"weatherDuration", 1000 + int(w.noise(t, 20*minute, int64(mw.idx), 1)*80000)},
			{"thunderDuration", 1000 + int(w.noise(t, 20*minute, int64(mw.idx), 2)*150000)},
			{"clear", !storm},
		}},
		{"pvp", true},
		{"allowAnimals", true},
		{"allowMonsters", true},
		{"minHeight", mw.minHeight},
		{"maxHeight", mw.maxHeight},
		{"seaLevel", mw.seaLevel},
		{"viewDistance", 10},
		{"loadedChunks", mw.chunksBase + int(w.noise(t, 10*minute, int64(mw.idx), 3)*float64(mw.chunksBase)/4)},
		{"spawnLocation", mw.spawn},
		{"worldBorder", obj{
			{"size", 20000.0}, {"centerX", 0.0}, {"centerZ", 0.0}, {"damageAmount", 0.2}, {"damageBuffer", 5.0},
			{"warningDistance", 5}, {"warningTimeTicks", 15},
		}},
	}
}

// --- plugins ---------------------------------------------------------------

func pluginList() []obj {
	p := func(name, version, desc, website, api string, authors, depend, soft []string) obj {
		var d, web any
		if desc != "" {
			d = desc
		}
		if website != "" {
			web = website
		}
		return obj{
			{"name", name}, {"version", version}, {"enabled", true}, {"description", d}, {"website", web},
			{"apiVersion", api}, {"authors", nonNil(authors)}, {"depend", nonNil(depend)}, {"softDepend", nonNil(soft)},
		}
	}
	return []obj{
		p("ServerAPI", "1.1.0", "Read-only HTTP API for server, world and player data", "", "26.1",
			[]string{"Kevi_28576"}, nil, []string{"DiscordSRV", "LuckPerms", "PlaceholderAPI", "Vault", "CMI"}),
		p("LuckPerms", "5.5.9", "A permissions plugin", "https://luckperms.net", "1.21", []string{"Luck"}, nil, nil),
		p("Vault", "1.7.3-b131", "Vault is a Permissions & Economy API to allow plugins to more easily hook into these systems without needing to hook each individual system themselves.", "https://www.spigotmc.org/resources/vault.34315/", "1.13", []string{"cereal", "Sleaker", "mung3r"}, nil, nil),
		p("PlaceholderAPI", "2.11.6", "An awesome placeholder provider!", "https://placeholderapi.com", "1.13", []string{"HelpChat"}, nil, nil),
		p("CMILib", "1.5.4.4", "", "", "1.13", []string{"Zrips"}, nil, nil),
		p("CMI", "9.7.14.3", "Content Management Interface", "https://www.zrips.net/cmi/", "1.13", []string{"Zrips"}, []string{"CMILib"}, []string{"Vault", "PlaceholderAPI", "LuckPerms"}),
		p("DiscordSRV", "1.30.0", "Bridges chat and other things between Minecraft and Discord", "https://discordsrv.com", "1.13", []string{"Scarsz", "Androkai"}, nil, []string{"Vault", "PlaceholderAPI", "LuckPerms"}),
		p("VotingPlugin", "6.18.2", "Vote rewards and vote statistics", "", "1.13", []string{"BenCodez"}, nil, []string{"PlaceholderAPI", "Vault", "ServerAPI"}),
		p("WorldEdit", "7.3.15", "In-game map editor", "https://enginehub.org/worldedit/", "1.21", []string{"Forge Essentials", "sk89q", "wizjany", "TomyLobo"}, nil, nil),
		p("CoreProtect", "23.1", "Block logging and rollback", "https://coreprotect.net", "1.21", []string{"Intelli"}, nil, nil),
	}
}
