package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/internal/sim"
)

// TestMembersCoverTheSim keeps the endpoint table's field names (builtin
// members) from going stale: every member name, at any depth, of the data
// statusgate_sim answers for each endpoint (every player, every world, each
// query flag) is in the endpoint's members, but for the names inside an
// open map (stat, gameRules, ...), which are the game's own. The index is
// the gateway's own answer, so its names are read from the gateway.
func TestMembersCoverTheSim(t *testing.T) {
	seed := int64(7)
	s := &sim.Sim{Seed: &seed, Latency: map[string]sim.Span{"*": {}}}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := s.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(target string) json.RawMessage {
		t.Helper()
		rec := httptest.NewRecorder()
		if err := s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil), nil); err != nil {
			t.Fatal(err)
		}
		var env struct {
			OK   bool            `json:"ok"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || !env.OK {
			t.Fatalf("%s: %d %.300s", target, rec.Code, rec.Body)
		}
		return env.Data
	}
	var roster struct {
		Players []string `json:"players"`
	}
	if err := json.Unmarshal(get("/api/v1/whitelist"), &roster); err != nil || len(roster.Players) < 3 {
		t.Fatalf("the sim's whitelist: %v %v", roster, err)
	}
	targets := map[string][]string{
		"status":       {"/api/v1/status?history=true"},
		"server":       {"/api/v1/server"},
		"performance":  {"/api/v1/performance"},
		"worlds":       {"/api/v1/worlds", "/api/v1/worlds/world"},
		"gamerules":    {"/api/v1/gamerules"},
		"entities":     {"/api/v1/entities"},
		"spawnlimits":  {"/api/v1/spawnlimits"},
		"punishments":  {"/api/v1/punishments"},
		"bans":         {"/api/v1/bans"},
		"operators":    {"/api/v1/operators"},
		"whitelist":    {"/api/v1/whitelist"},
		"plugins":      {"/api/v1/plugins"},
		"placeholders": {"/api/v1/placeholders?uuid=" + roster.Players[0] + "&p=player_name,vault_eco_balance"},
		"network":      {"/api/v1/network"},
		"constants":    {"/api/v1/constants"},
	}
	for _, u := range append(roster.Players, "00000000-0000-4000-8000-000000000001") {
		targets["player"] = append(targets["player"], "/api/v1/player/"+u, "/api/v1/player/"+u+"?detailed=true")
		targets["punishments"] = append(targets["punishments"], "/api/v1/punishments/"+u)
	}
	for _, b := range builtins {
		if b.name == "index" {
			continue
		}
		if len(targets[b.name]) == 0 {
			t.Errorf("%s: no request of the sim's for it", b.name)
		}
		for _, target := range targets[b.name] {
			for _, name := range memberNames(t, get(target), b.open) {
				if !slices.Contains(b.members, name) {
					t.Errorf("%s (%s): the sim's answer has the field %q, which the endpoint table does not list", b.name, target, name)
				}
			}
		}
	}

	h, _ := newTestHandler(t, "key staff Qx7Zk9Wv3Jp8Yt5R")
	rep := serve(t, h, nil, http.MethodGet, "/api/v1", keyHeader("Qx7Zk9Wv3Jp8Yt5R"))
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(rep.Body.Bytes(), &env); err != nil {
		t.Fatal(err)
	}
	index := builtins[slices.IndexFunc(builtins, func(b builtin) bool { return b.name == "index" })]
	for _, name := range memberNames(t, env.Data, nil) {
		if !slices.Contains(index.members, name) {
			t.Errorf("index: the gateway's answer has the field %q, which the endpoint table does not list", name)
		}
	}
}

// memberNames is every member name of the JSON value v at any depth, but
// inside the members called one of open.
func memberNames(t *testing.T, v json.RawMessage, open []string) []string {
	t.Helper()
	var doc any
	if err := json.Unmarshal(v, &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				names = append(names, k)
				if !slices.Contains(open, k) {
					walk(v)
				}
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(doc)
	return names
}

// TestProtectedFieldNames checks protected_fields' names against each
// endpoint's fields, in the Caddyfile with the line and in JSON with the
// path: a name the endpoint does not have is refused with the nearest, and
// extra_fields names one the gateway does not know; a custom station takes
// any name.
func TestProtectedFieldNames(t *testing.T) {
	for _, ok := range []string{
		"protected_fields network players",
		"protected_fields player op banned discord chatplatform rank",
		"protected_fields status online history",
		"protected_fields player deaths\n\textra_fields player deaths",
		"extra_fields network pronouns\n\tprotected_fields network pronouns",
		"protected_fields custom/votes top anything",
		"protected_fields worlds",
	} {
		if _, err := parseTestCaddyfile("statusgate {\n\t" + ok + "\n}"); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, c := range []struct{ lines, want string }{
		{"protected_fields network player", "protected_fields: network has no field 'player'; did you mean players? (docs/field-layer.md lists the fields of each endpoint; for a field that statusgate does not know, of a newer plugin, write extra_fields network player too), at Testfile:2"},
		{"protected_fields player op deahts", "protected_fields: player has no field 'deahts' (docs/field-layer.md lists the fields of each endpoint; for a field that statusgate does not know, of a newer plugin or inside stat or detailed, write extra_fields player deahts too)"},
		{"protected_fields server motd\n\tprotected_fields worlds sead", "protected_fields: worlds has no field 'sead'; did you mean seed?"},
		{"extra_fields player", "extra_fields: wrong argument count or unexpected line ending after 'player'; write extra_fields <endpoint> <field>..."},
		{"extra_fields stauts x", "extra_fields: unknown endpoint 'stauts'; did you mean status?"},
	} {
		_, err := parseTestCaddyfile("statusgate {\n\t" + c.lines + "\n}")
		wantErrorWords(t, err, c.want)
	}
	for config, want := range map[string]string{
		`{"auth":{"protected_fields":{"network":["players"]}}}`:                                    "",
		`{"auth":{"protected_fields":{"network":["player"]}}}`:                                     `auth.protected_fields.network: network has no field 'player'; did you mean players? (docs/field-layer.md lists the fields of each endpoint; for a field that statusgate does not know, of a newer plugin, list "player" in auth.extra_fields.network too)`,
		`{"auth":{"protected_fields":{"player":["deaths"]},"extra_fields":{"player":["deaths"]}}}`: "",
		`{"auth":{"protected_fields":{"custom/votes":["top"]}}}`:                                   "",
	} {
		h := new(Handler)
		err := caddy.StrictUnmarshalJSON([]byte(config), h)
		if err == nil {
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			err = h.Provision(ctx)
			_ = h.Cleanup()
			cancel()
		}
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", config, err)
			}
			continue
		}
		wantErrorWords(t, err, want)
	}
}
