package caddymodule

import (
	"fmt"
	"strings"

	"github.com/statusgate/statusgate/caddymodule/jsonfilter"
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

// builtin describes one endpoint of the seed's table: its defaults and how its
// path is shaped. The slice order is the seed's table order, which the index keeps.
type builtin struct {
	name        string
	description string
	rule        paramRule
	kind        paramKind
	disabled    bool     // disabled unless enabled in the config
	public      bool     // no key required by default
	fields      []string // protected fields by default
}

// builtins is the seed's endpoint table (SEED-SPEC.md section 4, INTERFACE.md defaults).
var builtins = []builtin{
	{name: "index", description: "This list of endpoints", public: true},
	{name: "status", description: "Online player UUIDs and count, chat-platform member count; history=true adds the time series, newest first", public: true},
	{name: "player", description: "One player's name, rank, nickname, playtime, AFK flag, balance and statistics; detailed=true expands per-block, per-item and per-entity statistics", rule: paramRequired, kind: paramUUID, public: true, fields: []string{"op", "banned", "chatplatform", "discord"}},
	{name: "server", description: "Version, MOTD, maximum players, game mode", fields: []string{"motd", "ip", "port"}},
	{name: "performance", description: "TPS, tick time, memory, JVM"},
	{name: "worlds", description: "World list; /worlds/{name} for one world", rule: paramOptional, kind: paramName, fields: []string{"seed"}},
	{name: "gamerules", description: "Game rules per world"},
	{name: "entities", description: "Entity counts per world, players excluded"},
	{name: "spawnlimits", description: "Spawn limits and spawn intervals"},
	{name: "punishments", description: "Punishment records and statistics; /punishments/{uuid} for one player", rule: paramOptional, kind: paramUUID},
	{name: "bans", description: "Ban list (UUIDs and IPs)"},
	{name: "operators", description: "Operator list"},
	{name: "whitelist", description: "Whitelist state and entries", disabled: true},
	{name: "plugins", description: "Installed plugin list"},
	{name: "placeholders", description: "Resolved placeholder values (uuid, p)"},
	{name: "network", description: "Cross-server aggregation", disabled: true},
	{name: "constants", description: "Static enumeration reference"},
}

// customPrefix starts the name of a backend's custom station.
const customPrefix = "custom/"

// endpoint is one resolved entry of the endpoint table: the defaults with the
// config applied. It is immutable after Provision and shared by all requests.
type endpoint struct {
	name        string // "status", "custom/votes"
	description string
	rule        paramRule
	kind        paramKind
	enabled     bool
	requireKey  bool              // already false for every endpoint while auth is off
	fields      *jsonfilter.Names // protected fields; nil while auth is off or when the list is empty
	indexPath   string            // the path the index shows
	basePath    string            // canonical upstream path without the parameter
}

// validEndpointName reports whether name is a built-in endpoint or a well-formed
// custom station name. Custom names are restricted to letters, digits, '_' and
// '-' so that they are a single path segment that needs no escaping.
func validEndpointName(name string) bool {
	if custom, ok := strings.CutPrefix(name, customPrefix); ok {
		return validCustomName(custom)
	}
	for i := range builtins {
		if builtins[i].name == name {
			return true
		}
	}
	return false
}

func validCustomName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// endpointNameError is the message for a name that is not an endpoint.
func endpointNameError(name string) error {
	return fmt.Errorf("unknown endpoint '%s' (want one of index, status, player, server, performance, worlds, gamerules, entities, spawnlimits, punishments, bans, operators, whitelist, plugins, placeholders, network, constants, or custom/<name> with letters, digits, '_' and '-')", name)
}

// endpointTable is the provisioned routing table.
type endpointTable struct {
	byName  map[string]*endpoint // enabled and disabled built-ins, and configured custom stations
	ordered []*endpoint          // index order: the seed's table order, then custom stations by name
}

// lookup returns the enabled endpoint called name, or nil.
func (t *endpointTable) lookup(name string) *endpoint {
	ep := t.byName[name]
	if ep == nil || !ep.enabled {
		return nil
	}
	return ep
}
