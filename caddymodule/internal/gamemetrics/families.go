package gamemetrics

import "github.com/prometheus/client_golang/prometheus"

// The families. Every minecraft_* series has the server label; HELP says
// which ServerAPI field a figure comes from and where it differs from what
// other exporters show.
func desc(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, labels, nil)
	allDescs = append(allDescs, d)
	return d
}

var allDescs []*prometheus.Desc

var (
	descUp = desc("minecraft_up",
		"Whether the game server's latest status trip through statusgate gave a status (1) or not (0: it failed, took over 5 s, answered something that is no status, or the plugin is still starting). While 0, the server has no other minecraft_* data series.",
		"server")
	descSnapshotTime = desc("minecraft_snapshot_timestamp_seconds",
		"Unix time of the data of the server's latest good answer of the endpoint, by the server's clock: the plugin's snapshot (meta.cachedAt), or its answer (meta.updatedAt) for the live endpoints. Kept through an outage, so that time() minus it grows.",
		"server", "endpoint")
	descPlayersOnline = desc("minecraft_players_online",
		"Players online, as of the plugin's snapshot (ServerAPI /status data.minecraft). Summed over a network, a player on two servers counts twice.",
		"server")
	descPlayersMax = desc("minecraft_players_max",
		"The server's player limit (ServerAPI /server maxPlayers).",
		"server")
	descTPS = desc("minecraft_tps",
		"Ticks per second, the server's own 1-minute average, not capped here (ServerAPI /performance tps.1m).",
		"server")
	descTick = desc("minecraft_tick_duration_average_seconds",
		"Mean duration of the server's ticks over the last 5 seconds (ServerAPI /performance averageTickTimeMs / 1000); a tick has 0.05 s at 20 TPS.",
		"server")
	descHeapUsed = desc("minecraft_jvm_heap_used_bytes",
		"JVM heap in use (ServerAPI /performance memory.usedBytes).",
		"server")
	descHeapCommitted = desc("minecraft_jvm_heap_committed_bytes",
		"JVM heap the JVM has reserved (ServerAPI /performance memory.totalBytes).",
		"server")
	descHeapMax = desc("minecraft_jvm_heap_max_bytes",
		"The most heap the JVM may use (ServerAPI /performance memory.maxBytes).",
		"server")
	descStartTime = desc("minecraft_start_time_seconds",
		"Unix time the server's JVM started, to the second (ServerAPI /performance meta.updatedAt - jvm.uptimeMs).",
		"server")
	descWorldEntities = desc("minecraft_world_entities",
		"Entities loaded in the world, players not counted (other exporters count them), as of the plugin's snapshot, every 20 s by default (ServerAPI /entities worlds[].total). Worlds past the cap are summed under world=\"_other\".",
		"server", "world")
	descEntitiesByType = desc("minecraft_world_entities_by_type",
		"Entities loaded in the world by type, lower-cased, players not counted, as of the plugin's snapshot (ServerAPI /entities worlds[].byType). Only with game_metrics { entity_types }.",
		"server", "world", "entity_type")
	descWorldChunks = desc("minecraft_world_loaded_chunks",
		"Chunks loaded in the world as of the plugin's worlds snapshot, which it takes every 10 minutes by default (ServerAPI /worlds loadedChunks): too slow to catch a chunk loader. Worlds past the cap are summed under world=\"_other\".",
		"server", "world")
	descWorldInfo = desc("minecraft_world_info",
		"1 for each world the server lists, with its environment (ServerAPI /worlds name, environment); worlds past the cap are left out.",
		"server", "world", "environment")
	descInfo = desc("minecraft_info",
		"1, labelled with the server's software (ServerAPI /server brand, version, minecraftVersion).",
		"server", "brand", "version", "minecraft_version")
	descNetworkMember = desc("caddy_http_statusgate_network_member_info",
		"1 for each server of each network block the gateway answers /network for: a network's total is sum by (network) (minecraft_players_online * on (server) group_left (network) caddy_http_statusgate_network_member_info).",
		"network", "server")
	descTrips = desc("caddy_http_statusgate_game_trips_total",
		"Requests for a game server's endpoint made for the game metrics, through the server's guard (answered from its micro-cache or by the server): at most one per the answer's time, whatever the number of scrapes.",
		"server", "endpoint")
	descTripFailures = desc("caddy_http_statusgate_game_trip_failures_total",
		"Of caddy_http_statusgate_game_trips_total, those that gave no figures: failed, over 5 s, refused by the guard, malformed, or the plugin still starting.",
		"server", "endpoint")
)
