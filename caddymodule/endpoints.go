package caddymodule

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/jsonfilter"
	"github.com/statusgate/statusgate/internal/ident"
	"github.com/statusgate/statusgate/internal/nearest"
)

// paramRule says whether an endpoint takes a path parameter after its name.
type paramRule uint8

const (
	paramNone     paramRule = iota // /api/v1/<name> only
	paramRequired                  // /api/v1/<name>/<param> only
	paramOptional                  // both
)

// paramKind says which characters a path parameter may hold.
type paramKind uint8

const (
	paramName paramKind = iota // a world name: any text but separators, dots-only and control characters
	paramUUID                  // a player UUID: hex digits and dashes
)

// queryRule is what the backend reads of an endpoint's query, and so all of
// it that reaches the backend. The endpoint table gives it for each built-in
// endpoint; a custom station keeps its query (all).
type queryRule struct {
	// flags are what the backend looks for among the elements of the query,
	// decoded and then split on '&' (history=true): one counts wherever it
	// is and however it is spelled (history%3Dtrue, x=%26history=true), and
	// the backend gets each one that counts, spelled as here.
	flags []string
	// params are the names of the pairs the backend reads, each pair split
	// on '&' first and its name decoded as a form's ('+' a space, names
	// compared exactly); of several pairs of one name the last one counts.
	// The backend gets that one, as the client wrote it.
	params []string
	// all keeps the whole query but the key pairs: the gateway cannot know
	// what a custom station reads.
	all bool
}

// builtin describes one endpoint the ServerAPI plugin serves: its defaults and
// how its path is shaped. The slice order is the plugin's own endpoint order,
// which the index keeps.
type builtin struct {
	name        string
	description string
	rule        paramRule
	kind        paramKind
	disabled    bool          // disabled unless enabled in the config
	mainThread  bool          // the plugin does the work on the game's main thread
	cacheTTL    time.Duration // the micro-cache's default time to live
	snapshot    time.Duration // the plugin's default refresh interval of a snapshot station
	public      bool          // no key required by default
	fields      []string      // protected fields by default
	query       queryRule     // what the backend reads of the query (queryRule); nothing by default
	// members are the member names of the endpoint's data at any depth, as
	// the plugin writes them (BACKEND-CONTRACT.md, section 5; the gateway's
	// own for index and network): the names protected_fields may give it
	// (checkFields). TestMembersCoverTheSim keeps them a superset of what
	// statusgate_sim answers.
	members []string
	// open are the members among them whose value is a map with names of
	// the game's own (statistics, materials, game rules, entity types,
	// placeholders): the names in it are not listed, and protected_fields
	// names one with extra_fields.
	open []string
}

// words is a list written as the words of s.
func words(s string) []string { return strings.Fields(s) }

// builtins is the endpoint table: every endpoint of the ServerAPI plugin's
// /api/v1 with statusgate's defaults (docs/configuration.md, "Defaults").
var builtins = []builtin{
	{name: "index", description: "This list of endpoints", public: true,
		members: words("name apiVersion authEnabled versions version path current alias stations description requiresKey")},
	{name: "status", description: "Online player UUIDs and count, chat-platform member count; history=true adds the time series, newest first", public: true, cacheTTL: time.Second, snapshot: 5 * time.Second,
		query:   queryRule{flags: []string{"history=true"}},
		members: words("online minecraft discord history last")},
	{name: "player", description: "One player's name, rank, nickname, playtime, AFK flag, balance and statistics; detailed=true expands per-block, per-item and per-entity statistics", rule: paramRequired, kind: paramUUID, public: true, fields: []string{"op", "banned", "chatplatform", "discord"},
		query:   queryRule{flags: []string{"detailed=true"}},
		members: words("uuid name nickname messagecolor nicknamecolor rank registry offline playtime afk balance addons pass discord chatplatform op banned stat detailed"),
		open:    words("stat detailed")},
	{name: "server", description: "Version, MOTD, maximum players, game mode", fields: []string{"motd", "ip", "port"},
		members: words("brand maxPlayers motd version bukkitVersion minecraftVersion port ip onlineMode hardcore allowFlight allowNether allowEnd defaultGameMode viewDistance simulationDistance spawnRadius worldCount pluginCount")},
	{name: "performance", description: "TPS, tick time, memory, JVM",
		members: words("tps 1m 5m 15m averageTickTimeMs memory usedBytes freeBytes totalBytes maxBytes usedMB maxMB jvm javaVersion javaVendor osName osArch availableProcessors uptimeMs threadCount")},
	{name: "worlds", description: "World list; /worlds/{name} for one world", rule: paramOptional, kind: paramName, fields: []string{"seed"}, cacheTTL: 30 * time.Second, snapshot: 10 * time.Minute,
		members: words("count worlds name uid environment seed difficulty time fullTime dayCount weather hasStorm thundering weatherDuration thunderDuration clear pvp allowAnimals allowMonsters minHeight maxHeight seaLevel viewDistance loadedChunks spawnLocation x y z worldBorder size centerX centerZ damageAmount damageBuffer warningDistance warningTimeTicks")},
	{name: "gamerules", description: "Game rules per world", cacheTTL: 30 * time.Second, snapshot: 10 * time.Minute,
		members: words("count worlds world gameRules"), open: words("gameRules")},
	{name: "entities", description: "Entity counts per world, players excluded", cacheTTL: 5 * time.Second, snapshot: 20 * time.Second,
		members: words("totalEntities worlds world total byType"), open: words("byType")},
	{name: "spawnlimits", description: "Spawn limits and spawn intervals", cacheTTL: 30 * time.Second, snapshot: 10 * time.Minute,
		members: words("count worlds world spawnLimits ticksPerSpawns"), open: words("spawnLimits ticksPerSpawns")},
	{name: "punishments", description: "Punishment records and statistics; /punishments/{uuid} for one player", rule: paramOptional, kind: paramUUID,
		query: queryRule{flags: []string{"view=html"}},
		members: words("summary total bans ipBans mutes jails kicks warnings punishedPlayers activeNow cmiAvailable returned limit records type uuid name ip reason by at expires liftedAt permanent active extra " +
			"banned ban category warningCount warningPoints mute shadow jail history cause historyCount activeCount")},
	{name: "bans", description: "Ban list (UUIDs and IPs)",
		members: words("players count entries reason source created expires permanent uuid name ips ip")},
	{name: "operators", description: "Operator list", members: words("count operators")},
	{name: "whitelist", description: "Whitelist state and entries", disabled: true, members: words("enabled count players")},
	{name: "plugins", description: "Installed plugin list",
		members: words("count plugins name version enabled description website apiVersion authors depend softDepend")},
	{name: "placeholders", description: "Resolved placeholder values (uuid, p)", mainThread: true,
		query:   queryRule{params: []string{"uuid", "p", "list"}},
		members: words("uuid online values"), open: words("values")},
	{name: "network", description: "Cross-server aggregation", disabled: true,
		members: words("cluster thisServer serverCount totalOnline servers server online players discord updatedAt")},
	{name: "constants", description: "Static enumeration reference",
		members: words("gameModes difficulties environments weatherTypes spawnCategories entityTypeCount materialCount")},
}

// customPrefix starts the name of a backend's custom station.
const customPrefix = "custom/"

// endpoint is one resolved entry of the endpoint table: the defaults with the
// config applied. It is immutable after Provision and shared by all requests.
type endpoint struct {
	// Station is what the guard is told of the endpoint: its name, its
	// main-thread lane, cache and snapshot times, protected fields and
	// counters.
	guard.Station
	description string
	rule        paramRule
	kind        paramKind
	enabled     bool
	requireKey  bool      // already false for every endpoint while auth is off
	query       queryRule // what of the client's query reaches the backend (upstreamQuery)
	fieldList   []string  // the names in fields, for the metrics' labels
	indexPath   string    // the path the index shows
	basePath    string    // canonical upstream path without the parameter

	nameValue any // name as a placeholder value, made once

	// hidden and published are the fields it hides from callers without
	// a key, and those hidden by default or by the global option that a
	// handler's line publishes, each with the place that says so, for the
	// startup log (logFields).
	hidden, published []hiddenField
}

// validEndpointName reports whether name is a built-in endpoint or a well-formed
// custom station name. Custom names are restricted to letters, digits, '_' and
// '-' so that they are a single path segment that needs no escaping.
func validEndpointName(name string) bool {
	if custom, ok := strings.CutPrefix(name, customPrefix); ok {
		return ident.Valid(custom)
	}
	for i := range builtins {
		if builtins[i].name == name {
			return true
		}
	}
	return false
}

// endpointNameError is the message for a name that is not an endpoint, with
// the nearest built-in name when one is near enough to be meant.
func endpointNameError(name string) error {
	return fmt.Errorf("unknown endpoint '%s'%s (want one of %s, or custom/NAME with letters, digits, '_' and '-')",
		name, nearest.Suggest(name, builtinList), strings.Join(builtinList, ", "))
}

// builtinList is the built-in endpoint names, in table order.
var builtinList = func() []string {
	names := make([]string, len(builtins))
	for i, b := range builtins {
		names[i] = b.name
	}
	return names
}()

// endpointTable is the provisioned routing table.
type endpointTable struct {
	byName  map[string]*endpoint // enabled and disabled built-ins, and configured custom stations
	ordered []*endpoint          // index order: the builtins order, then custom stations by name
}

// lookup returns the enabled endpoint called name, or nil.
func (t *endpointTable) lookup(name string) *endpoint {
	ep := t.byName[name]
	if ep == nil || !ep.enabled {
		return nil
	}
	return ep
}

// tableConfig is everything the config says about endpoints: the switches
// and access rules, and the micro-cache's times, checked already by
// resolveLimits.
type tableConfig struct {
	// publish is publish_fields: fields hidden by default or by the global
	// option, made public. globalFields and globalPublish are the global
	// statusgate option's protected_fields and publish_fields, which fields
	// and publish add to (endpointFields).
	publish, globalFields, globalPublish map[string][]string

	authOn     bool
	enabled    map[string]bool
	requireKey map[string]bool
	fields     map[string][]string
	extra      map[string][]string // extra_fields: names protected_fields may give an endpoint besides its members
	cache      map[string]caddy.Duration
	snapshot   map[string]caddy.Duration
	noCache    bool // cache_size off: no micro-cache, whatever cache says
	// ownNetwork says the gateway answers network itself, from the
	// network's members' /status: its answer changes as theirs do, and its
	// live streams are polled for status's times.
	ownNetwork bool
	// server names the game server the handler fronts, for its request
	// counters (metrics.Config.Server).
	server string
}

// buildTable applies the config to the built-in defaults, and makes the
// metrics in the load's collectors cols (nil in some tests): the series of every enabled endpoint,
// its protected fields and every key name (keys, in keyring order), with
// each endpoint holding its own counters. Every endpoint name in the config
// must be known; custom stations come into being by being named.
func buildTable(c tableConfig, cols *metrics.Collectors, keys []string) (*endpointTable, *metrics.Metrics, error) {
	var custom []string
	check := func(section string, names []string) error {
		for _, name := range names {
			if !validEndpointName(name) {
				return fmt.Errorf("%s: %w", section, endpointNameError(name))
			}
			if strings.HasPrefix(name, customPrefix) && !slices.Contains(custom, name) {
				custom = append(custom, name)
			}
		}
		return nil
	}
	if err := check("endpoints", slices.Sorted(maps.Keys(c.enabled))); err != nil {
		return nil, nil, err
	}
	if err := check("auth.require_key", slices.Sorted(maps.Keys(c.requireKey))); err != nil {
		return nil, nil, err
	}
	if err := check("auth.protected_fields", slices.Sorted(maps.Keys(c.fields))); err != nil {
		return nil, nil, err
	}
	if err := check("auth.extra_fields", slices.Sorted(maps.Keys(c.extra))); err != nil {
		return nil, nil, err
	}
	for section, m := range map[string]map[string][]string{"protected_fields": c.fields, "publish_fields": c.publish, "extra_fields": c.extra} {
		for name, list := range m {
			if slices.Contains(list, "") {
				return nil, nil, fmt.Errorf("auth.%s.%s: empty field name", section, name)
			}
		}
	}
	fieldLists := map[string]map[string][]string{"auth.protected_fields": c.fields, "auth.publish_fields": c.publish,
		"defaults.auth.protected_fields": c.globalFields, "defaults.auth.publish_fields": c.globalPublish}
	for _, section := range slices.Sorted(maps.Keys(fieldLists)) {
		if err := check(section, slices.Sorted(maps.Keys(fieldLists[section]))); err != nil {
			return nil, nil, err
		}
		if err := checkFields(section, fieldLists[section], c.extra); err != nil {
			return nil, nil, err
		}
	}
	levels := []fieldLevel{
		{where: globalLevel, path: "defaults.auth", fields: c.globalFields, publish: c.globalPublish},
		{where: handlerLevel, path: "auth", fields: c.fields, publish: c.publish},
	}
	var fieldErr error
	slices.Sort(custom)

	t := &endpointTable{byName: make(map[string]*endpoint, len(builtins)+len(custom))}
	add := func(b builtin) {
		ep := &endpoint{
			Station:     guard.Station{Name: b.name, MainThread: b.mainThread, CacheTTL: b.cacheTTL, Snapshot: b.snapshot},
			description: b.description,
			rule:        b.rule,
			kind:        b.kind,
			enabled:     !b.disabled,
			requireKey:  !b.public,
			query:       b.query,
			basePath:    "/api/v1/" + b.name,
		}
		if b.name == "index" {
			ep.basePath = "/api/v1"
		}
		ep.indexPath = ep.basePath
		if b.rule == paramRequired && b.kind == paramUUID {
			ep.indexPath += "/{uuid}"
		}
		if on, ok := c.enabled[b.name]; ok {
			ep.enabled = on
		}
		if need, ok := c.requireKey[b.name]; ok {
			ep.requireKey = need
		}
		if ttl, ok := c.cache[b.name]; ok {
			ep.CacheTTL = max(time.Duration(ttl), 0) // off is -1
		}
		if c.noCache {
			ep.CacheTTL = 0
		}
		if every, ok := c.snapshot[b.name]; ok {
			ep.Snapshot = max(time.Duration(every), 0)
		}
		hidden, published, err := endpointFields(b.name, b.fields, levels)
		fieldErr = cmp.Or(fieldErr, err)
		names := hiddenFieldNames(hidden)
		ep.hidden, ep.published = hidden, published
		if !c.authOn {
			ep.requireKey = false
			names = nil
		}
		if len(names) > 0 {
			ep.Fields = jsonfilter.NewNames(names)
			ep.fieldList = names
		}
		ep.nameValue = ep.Name
		t.byName[b.name] = ep
		t.ordered = append(t.ordered, ep)
	}
	for _, b := range builtins {
		add(b)
	}
	if c.ownNetwork {
		n, s := t.byName["network"], t.byName["status"]
		n.CacheTTL, n.Snapshot = s.CacheTTL, s.Snapshot
	}
	for _, name := range custom {
		// A custom station is a single parameterless segment below custom/,
		// disabled until enabled and protected unless configured otherwise,
		// like a freshly generated custom/<name>.yml of the plugin.
		// The gateway cannot know what it reads of the query: all but the
		// key reaches it.
		add(builtin{name: name, description: "Custom station " + strings.TrimPrefix(name, customPrefix), disabled: true, query: queryRule{all: true}})
	}
	if fieldErr != nil {
		return nil, nil, fieldErr
	}

	mc := metrics.Config{Keys: keys, Fields: map[string][]string{}, Server: c.server}
	for _, ep := range t.ordered {
		if ep.enabled {
			mc.Endpoints = append(mc.Endpoints, ep.Name)
			if len(ep.fieldList) > 0 {
				mc.Fields[ep.Name] = ep.fieldList
			}
		}
	}
	m, err := cols.New(mc)
	if err != nil {
		return nil, nil, err
	}
	for _, ep := range t.ordered {
		ep.Metrics = m.Endpoint(ep.Name)
	}
	return t, m, nil
}

// The check of protected_fields' names: a name that the
// endpoint's answers do not have hides nothing, and a misspelt one
// (`protected_fields network player`, meant players) would leave public what
// it was written to hide.

// fieldError is the error for the protected field called field of the
// endpoint called endpoint when the endpoint's answers have no member of
// that name (builtin.members) and extra, the names extra_fields gives it,
// does not add it; nil when they do, for a custom station (the gateway
// cannot know its answers) and for a name that is no endpoint (another
// check names that). fix says how the config at hand names a field the
// gateway does not know: the Caddyfile's extra_fields line or the JSON's
// member.
func fieldError(endpoint, field string, extra []string, fix string) error {
	i := slices.IndexFunc(builtins, func(b builtin) bool { return b.name == endpoint })
	if i < 0 || slices.Contains(builtins[i].members, field) || slices.Contains(extra, field) {
		return nil
	}
	known := append(slices.Clone(builtins[i].members), extra...)
	inside := ""
	if open := builtins[i].open; len(open) > 0 {
		inside = " or inside " + strings.Join(open, " or ")
	}
	return fmt.Errorf("%s has no field '%s'%s (docs/field-layer.md lists the fields of each endpoint; for a field that statusgate does not know, of a newer plugin%s, %s)",
		endpoint, field, nearest.Suggest(field, known), inside, fix)
}

// checkFields checks every name of protected (endpoint → fields), the
// lists at the JSON path section, with fieldError against extra (endpoint →
// names extra_fields adds): the error names <section>.<endpoint>.
func checkFields(section string, protected, extra map[string][]string) error {
	for _, ep := range slices.Sorted(maps.Keys(protected)) {
		for _, f := range protected[ep] {
			fix := fmt.Sprintf(`list "%s" in auth.extra_fields.%s too`, f, ep)
			if err := fieldError(ep, f, extra[ep], fix); err != nil {
				return fmt.Errorf("%s.%s: %v", section, ep, err)
			}
		}
	}
	return nil
}
