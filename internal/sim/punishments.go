package sim

import (
	"net/http"
	"slices"
)

// punishment is one row of the plugin's punishment log, or a CMI warning.
// Colour codes in reason are what Bukkit's ban list holds; /punishments
// strips them, /bans does not.
type punishment struct {
	typ         string // ban, ipban, kick, mute, jail, warning
	uuid, name  any    // nil for an IP ban
	ip          any    // ipban only
	reason, by  any
	at          int64
	expires     any // epoch ms, or nil: permanent
	liftedAt    any
	extra       any // kick cause, "shadow" for a shadow mute, warning category
	listedInLog bool
}

func (r *punishment) active(now int64) any {
	switch r.typ {
	case "kick", "warning":
		return nil
	}
	if r.liftedAt != nil {
		return false
	}
	exp, ok := r.expires.(int64)
	return !ok || now < exp
}

func (r *punishment) permanent() any {
	switch r.typ {
	case "kick", "warning":
		return nil
	}
	return r.expires == nil
}

// punishmentRecords places the server's punishment history relative to
// anchor (the provision instant, or the frozen instant, where the times
// match the examples of the contract: the ban at 1784200000000 that
// expires at 1784804800000).
func (w *world) punishmentRecords(anchor int64) []punishment {
	griefer, anna, luna, kid, pixel, old := w.byUUID[grieferUUID], w.byUUID[annaUUID], w.byUUID[lunaUUID],
		w.byUUID[kidUUID], w.byUUID[pixelUUID], w.byUUID[oldTimerUUID]
	ban := anchor - 100000000
	recs := []punishment{
		{typ: "kick", uuid: griefer.uuid, name: griefer.name, reason: "§eSpamming chat", by: anna.name, at: ban - 5*minute, extra: "KICK_COMMAND"},
		{typ: "ban", uuid: griefer.uuid, name: griefer.name, reason: "§cX-ray", by: anna.name, at: ban, expires: ban + 7*day},
		{typ: "ipban", ip: "203.0.113.77", reason: "Alt farming", by: "Console", at: anchor - 400000000},
		{typ: "mute", uuid: kid.uuid, name: kid.name, reason: "Caps lock abuse", by: anna.name, at: anchor - 3*hour, expires: anchor + 21*hour},
		{typ: "kick", uuid: kid.uuid, name: kid.name, reason: "Spamming chat", by: anna.name, at: anchor - 5*hour, extra: "KICK_COMMAND"},
		{typ: "jail", uuid: pixel.uuid, name: pixel.name, reason: "Griefing at spawn", by: anna.name, at: anchor - 2*day, expires: anchor - day, liftedAt: anchor - day},
		{typ: "mute", uuid: pixel.uuid, name: pixel.name, reason: "Advertising", by: "Console", at: anchor - 9*day, expires: anchor - 8*day, liftedAt: anchor - 8*day, extra: "shadow"},
		{typ: "kick", uuid: luna.uuid, name: luna.name, reason: "Timed out", by: "Server", at: anchor - 30*hour, extra: "PLUGIN"},
		{typ: "ban", uuid: old.uuid, name: old.name, reason: "Suspected x-ray (appeal accepted)", by: anna.name, at: anchor - 40*day, liftedAt: anchor - 38*day},
		{typ: "warning", uuid: griefer.uuid, name: griefer.name, reason: "Caps", by: anna.name, at: 1783000000000 - (frozenAt - anchor), extra: "chat"},
		{typ: "warning", uuid: kid.uuid, name: kid.name, reason: "Spam", by: anna.name, at: anchor - 6*hour, extra: "chat"},
	}
	for i := range recs {
		recs[i].listedInLog = recs[i].typ != "warning"
	}
	// Newest first, as the plugin sorts them.
	slices.SortStableFunc(recs, func(a, b punishment) int {
		switch {
		case a.at > b.at:
			return -1
		case a.at < b.at:
			return 1
		}
		return 0
	})
	return recs
}

// The log also holds older kicks, beyond the returned window, against
// players who appear nowhere else: the summary counts over the whole log
// and so differs from the list, as in the plugin.
const (
	archivedKicks   = 14
	archivedTargets = 7
)

func (w *world) punishments(c *call) (any, *apiError) {
	if c.flag("view=html") {
		return nil, notFound(c.path) // web.punishments is off; checked before anything else
	}
	if c.rest != "" {
		uuid, ok := parseJavaUUID(c.rest)
		if !ok {
			return nil, &apiError{http.StatusNotFound, "Invalid UUID: " + c.rest}
		}
		return w.punishmentsOf(uuid, c.now), nil
	}
	counts := map[string]int{}
	targets := map[string]bool{}
	activeNow := 0
	records := make([]any, len(w.records))
	for i := range w.records {
		r := &w.records[i]
		counts[r.typ]++
		if r.listedInLog {
			targets[targetOf(r)] = true
		}
		if r.active(c.now) == true {
			activeNow++
		}
		records[i] = obj{
			{"type", r.typ}, {"uuid", r.uuid}, {"name", r.name}, {"ip", r.ip},
			{"reason", stripAny(r.reason)}, {"by", stripAny(r.by)}, {"at", r.at}, {"expires", r.expires},
			{"liftedAt", r.liftedAt}, {"permanent", r.permanent()}, {"active", r.active(c.now)}, {"extra", r.extra},
		}
	}
	kicks := counts["kick"] + archivedKicks
	total := len(w.records) + archivedKicks
	return obj{
		{"summary", obj{
			{"total", total}, {"bans", counts["ban"]}, {"ipBans", counts["ipban"]}, {"mutes", counts["mute"]},
			{"jails", counts["jail"]}, {"kicks", kicks}, {"warnings", counts["warning"]},
			{"punishedPlayers", len(targets) + archivedTargets}, {"activeNow", activeNow},
		}},
		{"cmiAvailable", true},
		{"returned", len(records)},
		{"limit", 500},
		{"records", records},
	}, nil
}

func targetOf(r *punishment) string {
	if s, ok := r.uuid.(string); ok {
		return s
	}
	s, _ := r.ip.(string)
	return s
}

// punishmentsOf is the per-player view. Kicks are active: true here and
// count toward activeCount, which is the plugin's bug, kept on purpose.
func (w *world) punishmentsOf(uuid string, now int64) obj {
	var name any
	if p := w.byUUID[uuid]; p != nil {
		name = p.name
	}
	var ban, mute, jail any
	warnings := []any{}
	history := []any{}
	active := 0
	for i := range w.records {
		r := &w.records[i]
		if r.uuid != uuid {
			continue
		}
		isActive := r.active(now) == true
		switch {
		case r.typ == "ban" && isActive:
			ban = obj{{"reason", stripAny(r.reason)}, {"by", stripAny(r.by)}, {"at", r.at}, {"expires", r.expires}, {"permanent", r.expires == nil}}
		case r.typ == "mute" && isActive:
			mute = obj{{"reason", stripAny(r.reason)}, {"expires", r.expires}, {"shadow", r.extra == "shadow"}}
		case r.typ == "jail" && isActive:
			jail = obj{{"reason", stripAny(r.reason)}, {"expires", r.expires}, {"by", stripAny(r.by)}}
		case r.typ == "warning":
			warnings = append(warnings, obj{{"reason", stripAny(r.reason)}, {"by", stripAny(r.by)}, {"at", r.at}, {"category", r.extra}})
		}
		if !r.listedInLog {
			continue
		}
		var cause any
		if r.typ == "kick" {
			cause = r.extra
			isActive = true
		}
		if isActive {
			active++
		}
		history = append(history, obj{
			{"type", r.typ}, {"reason", stripAny(r.reason)}, {"by", stripAny(r.by)}, {"cause", cause},
			{"at", r.at}, {"expires", r.expires}, {"liftedAt", r.liftedAt}, {"active", isActive},
		})
	}
	var points any
	if name != nil {
		points = len(warnings) // one point per warning; CMI knows the player
	}
	p := w.byUUID[uuid]
	return obj{
		{"uuid", uuid}, {"name", name}, {"banned", p != nil && p.banned}, {"ban", ban},
		{"warnings", warnings}, {"warningCount", len(warnings)}, {"warningPoints", points},
		{"mute", mute}, {"jail", jail},
		{"history", history}, {"historyCount", len(history)}, {"activeCount", active},
	}
}

func stripAny(v any) any {
	if s, ok := v.(string); ok {
		return stripColor(s)
	}
	return v
}

// bans is Bukkit's ban lists: colour codes left in, as the plugin does.
func (w *world) bans(c *call) (any, *apiError) {
	players := []any{}
	ips := []any{}
	for i := range w.records {
		r := &w.records[i]
		if r.active(c.now) != true {
			continue
		}
		entry := obj{{"reason", r.reason}, {"source", r.by}, {"created", r.at}, {"expires", r.expires}, {"permanent", r.expires == nil}}
		switch r.typ {
		case "ban":
			players = append(players, append(entry, member{"uuid", r.uuid}, member{"name", r.name}))
		case "ipban":
			ips = append(ips, append(entry, member{"ip", r.ip}))
		}
	}
	return obj{
		{"players", obj{{"count", len(players)}, {"entries", players}}},
		{"ips", obj{{"count", len(ips)}, {"entries", ips}}},
	}, nil
}
