package caddymodule

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/statusgate/statusgate/caddymodule/jsonfilter"
)

// provisionJSON provisions a handler from its JSON config, the way Caddy does
// once it has decoded the module: Unmarshal, then Provision with a context.
func provisionJSON(t *testing.T, config string) (*Handler, error) {
	t.Helper()
	h := new(Handler)
	if err := json.Unmarshal([]byte(config), h); err != nil {
		t.Fatalf("config %s: %v", config, err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return h, h.Provision(ctx)
}

// mustProvision is provisionJSON for configs that must be accepted.
func mustProvision(t *testing.T, config string) *Handler {
	t.Helper()
	h, err := provisionJSON(t, config)
	if err != nil {
		t.Fatalf("config %s: unexpected error: %v", config, err)
	}
	return h
}

// wantProvisionError checks that config is refused with a message holding every
// one of words.
func wantProvisionError(t *testing.T, config string, words ...string) {
	t.Helper()
	_, err := provisionJSON(t, config)
	wantErrorWords(t, err, words...)
}

// wantErrorWords checks that err is an error whose message holds every one of
// words.
func wantErrorWords(t *testing.T, err error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", words)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

// epWant is what the provisioned table must hold for one endpoint.
type epWant struct {
	enabled, requireKey bool
	fields              []string
}

// checkTable compares the whole provisioned table with want: the same
// endpoints, in the order the index lists them, with the same settings.
func checkTable(t *testing.T, h *Handler, order []string, want map[string]epWant) {
	t.Helper()
	var got []string
	for _, ep := range h.table.ordered {
		got = append(got, ep.name)
	}
	if !slices.Equal(got, order) {
		t.Errorf("endpoints in table order:\n got %v\nwant %v", got, order)
	}
	if len(h.table.byName) != len(order) {
		t.Errorf("byName holds %d endpoints, want %d", len(h.table.byName), len(order))
	}
	for _, name := range order {
		ep, w := h.table.byName[name], want[name]
		if ep == nil {
			t.Errorf("%s: missing from the table", name)
			continue
		}
		if ep.enabled != w.enabled || ep.requireKey != w.requireKey {
			t.Errorf("%s: enabled=%v requireKey=%v, want enabled=%v requireKey=%v",
				name, ep.enabled, ep.requireKey, w.enabled, w.requireKey)
		}
		if (h.table.lookup(name) != nil) != w.enabled {
			t.Errorf("%s: lookup disagrees with enabled=%v", name, w.enabled)
		}
		if got := fieldNames(t, ep.fields, w.fields); !slices.Equal(got, w.fields) {
			t.Errorf("%s: protected fields %q, want %q", name, got, w.fields)
		}
	}
}

// fieldNames reads back the names a compiled set holds, as far as want can
// tell: it runs the set over a document that has every wanted name and
// returns the names the filter removed, in configuration order, after
// checking that the set holds no other name.
func fieldNames(t *testing.T, names *jsonfilter.Names, want []string) []string {
	t.Helper()
	if names == nil {
		return nil
	}
	var doc strings.Builder
	doc.WriteString(`{"data":{"keep":1`)
	for _, w := range want {
		doc.WriteString(`,"` + w + `":1`)
	}
	doc.WriteString(`}}`)
	_, hidden, err := jsonfilter.Apply(nil, []byte(doc.String()), names, jsonfilter.Options{})
	if err != nil {
		t.Fatalf("filtering %s: %v", doc.String(), err)
	}
	if names.Len() != len(hidden) {
		t.Errorf("the set holds %d names; only %q are among %q", names.Len(), hidden, want)
	}
	if hidden == nil {
		return []string{}
	}
	return hidden
}

// builtinOrder is the plugin's endpoint order, which the endpoint table keeps.
var builtinOrder = []string{"index", "status", "player", "server", "performance", "worlds",
	"gamerules", "entities", "spawnlimits", "punishments", "bans", "operators", "whitelist",
	"plugins", "placeholders", "network", "constants"}

// defaultTable is the defaults table of README's "Configuration".
func defaultTable() map[string]epWant {
	want := map[string]epWant{}
	for _, name := range builtinOrder {
		want[name] = epWant{enabled: true, requireKey: true}
	}
	want["index"] = epWant{enabled: true}
	want["status"] = epWant{enabled: true}
	want["player"] = epWant{enabled: true, fields: []string{"op", "banned", "chatplatform", "discord"}}
	want["server"] = epWant{enabled: true, requireKey: true, fields: []string{"motd", "ip", "port"}}
	want["worlds"] = epWant{enabled: true, requireKey: true, fields: []string{"seed"}}
	want["whitelist"] = epWant{requireKey: true}
	want["network"] = epWant{requireKey: true}
	return want
}

func TestProvisionDefaults(t *testing.T) {
	for _, config := range []string{
		`{"handler":"statusgate"}`,
		`{"handler":"statusgate","auth":{}}`,
		`{"handler":"statusgate","auth":{"enabled":true,"require_key":{},"protected_fields":{}},"endpoints":{}}`,
	} {
		t.Run(config, func(t *testing.T) {
			h := mustProvision(t, config)
			checkTable(t, h, builtinOrder, defaultTable())
			if !h.authOn || !h.hide || h.qkey || len(h.keys) != 0 {
				t.Errorf("authOn=%v hide=%v qkey=%v keys=%d, want true true false 0", h.authOn, h.hide, h.qkey, len(h.keys))
			}
		})
	}
}

func TestProvisionAuthOff(t *testing.T) {
	h := mustProvision(t, `{"handler":"statusgate","auth":{"enabled":false,"hide_protected":true,
		"require_key":{"status":true,"custom/votes":true},
		"protected_fields":{"status":["online"],"player":["op"]}},
		"endpoints":{"network":true,"bans":false,"custom/votes":true}}`)
	if h.authOn {
		t.Error("authOn is true")
	}
	want := map[string]epWant{}
	for _, name := range builtinOrder {
		want[name] = epWant{enabled: true}
	}
	want["whitelist"] = epWant{}
	want["bans"] = epWant{}
	want["custom/votes"] = epWant{enabled: true}
	checkTable(t, h, append(slices.Clone(builtinOrder), "custom/votes"), want)
}

func TestProvisionOverrides(t *testing.T) {
	h := mustProvision(t, `{"handler":"statusgate","auth":{"allow_query_key":true,"hide_protected":false,
		"require_key":{"status":true,"server":false,"index":true,"network":false},
		"protected_fields":{"player":[],"server":["ip","port","ip"],"worlds":["seed","name"],"bans":["ip"]}},
		"endpoints":{"whitelist":true,"bans":false,"index":false}}`)
	if !h.qkey || h.hide {
		t.Errorf("qkey=%v hide=%v, want true false", h.qkey, h.hide)
	}
	want := defaultTable()
	want["status"] = epWant{enabled: true, requireKey: true}
	want["index"] = epWant{requireKey: true}
	want["server"] = epWant{enabled: true, fields: []string{"ip", "port"}}
	want["network"] = epWant{}
	want["player"] = epWant{enabled: true}
	want["worlds"] = epWant{enabled: true, requireKey: true, fields: []string{"seed", "name"}}
	want["bans"] = epWant{requireKey: true, fields: []string{"ip"}}
	want["whitelist"] = epWant{enabled: true, requireKey: true}
	checkTable(t, h, builtinOrder, want)
}

func TestProvisionCustomStations(t *testing.T) {
	h := mustProvision(t, `{"handler":"statusgate",
		"auth":{"require_key":{"custom/open":false},"protected_fields":{"custom/shop":["price"]}},
		"endpoints":{"custom/votes":true,"custom/open":true,"custom/old":false}}`)
	want := defaultTable()
	want["custom/votes"] = epWant{enabled: true, requireKey: true}
	want["custom/open"] = epWant{enabled: true}
	want["custom/old"] = epWant{requireKey: true}
	want["custom/shop"] = epWant{requireKey: true, fields: []string{"price"}}
	order := append(slices.Clone(builtinOrder), "custom/old", "custom/open", "custom/shop", "custom/votes")
	checkTable(t, h, order, want)
}

func TestProvisionUnknownEndpoints(t *testing.T) {
	tests := []struct {
		config string
		words  []string
	}{
		{`{"endpoints":{"stats":true}}`, []string{"endpoints", "unknown endpoint 'stats'"}},
		{`{"endpoints":{"status":true,"Whitelist":true}}`, []string{"endpoints", "unknown endpoint 'Whitelist'"}},
		{`{"endpoints":{"custom/":true}}`, []string{"endpoints", "unknown endpoint 'custom/'"}},
		{`{"endpoints":{"custom/a/b":true}}`, []string{"endpoints", "unknown endpoint 'custom/a/b'"}},
		{`{"endpoints":{"custom/a.b":false}}`, []string{"endpoints", "unknown endpoint 'custom/a.b'"}},
		{`{"auth":{"require_key":{"plyer":false}}}`, []string{"auth.require_key", "unknown endpoint 'plyer'"}},
		{`{"auth":{"require_key":{"custom/x y":false}}}`, []string{"auth.require_key", "unknown endpoint 'custom/x y'"}},
		{`{"auth":{"protected_fields":{"server ":["ip"]}}}`, []string{"auth.protected_fields", "unknown endpoint 'server '"}},
		{`{"auth":{"protected_fields":{"/api/v1/player":["op"]}}}`, []string{"auth.protected_fields", "unknown endpoint '/api/v1/player'"}},
		{`{"auth":{"protected_fields":{"player":["op",""]}}}`, []string{"auth.protected_fields.player", "empty field name"}},
	}
	for _, tc := range tests {
		t.Run(tc.config, func(t *testing.T) {
			wantProvisionError(t, tc.config, tc.words...)
		})
	}
}

// TestProvisionKeys checks how configured keys become accepted keys.
func TestProvisionKeys(t *testing.T) {
	t.Setenv("STATUSGATE_TEST_KEY", " env-key-0123456789abcdef \n")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("file-key-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config, _ := json.Marshal(map[string]any{"auth": map[string]any{"keys": []string{
		"{env.STATUSGATE_TEST_KEY}",
		"{file." + keyFile + "}",
		"  literal-key-0123456789  ",
		"pre-{env.STATUSGATE_TEST_KEY}",
	}}})
	h := mustProvision(t, string(config))
	if len(h.keys) != 4 {
		t.Fatalf("%d keys provisioned, want 4", len(h.keys))
	}
	for _, key := range []string{
		"env-key-0123456789abcdef",
		"file-key-0123456789abcdef",
		"literal-key-0123456789",
		"pre- env-key-0123456789abcdef",
	} {
		if !h.keys.accepts(key) {
			t.Errorf("key %q not accepted", key)
		}
	}
	for _, key := range []string{
		"{env.STATUSGATE_TEST_KEY}",
		"{file." + keyFile + "}",
		"file-key-0123456789abcdef\n",
		" env-key-0123456789abcdef \n",
		"  literal-key-0123456789  ",
		"",
	} {
		if h.keys.accepts(key) {
			t.Errorf("key %q accepted", key)
		}
	}
}

func TestProvisionBadKeys(t *testing.T) {
	dir := t.TempDir()
	blankFile := filepath.Join(dir, "blank")
	if err := os.WriteFile(blankFile, []byte(" \n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STATUSGATE_TEST_EMPTY", "")
	t.Setenv("STATUSGATE_TEST_BLANK", " \t ")
	os.Unsetenv("STATUSGATE_TEST_UNSET") //nolint:errcheck // absent is what we want
	tests := []struct {
		name string
		keys []string
		want []string
	}{
		{"empty env var", []string{"good-key-0123456789", "{env.STATUSGATE_TEST_EMPTY}"}, []string{"auth.keys[1] '{env.STATUSGATE_TEST_EMPTY}'"}},
		{"unset env var", []string{"{env.STATUSGATE_TEST_UNSET}"}, []string{"auth.keys[0] '{env.STATUSGATE_TEST_UNSET}'"}},
		{"blank env var", []string{"{env.STATUSGATE_TEST_BLANK}"}, []string{"auth.keys[0] '{env.STATUSGATE_TEST_BLANK}'", "empty"}},
		{"blank file", []string{"{file." + blankFile + "}"}, []string{"auth.keys[0] '{file." + blankFile + "}'", "empty"}},
		{"missing file", []string{"{file." + filepath.Join(dir, "nope") + "}"}, []string{"auth.keys[0] '{file." + filepath.Join(dir, "nope") + "}'"}},
		{"runtime placeholder", []string{"{http.request.header.X-Key}"}, []string{"auth.keys[0] '{http.request.header.X-Key}'"}},
		{"empty literal", []string{""}, []string{"auth.keys[0] '' resolves to an empty string"}},
		{"whitespace literal", []string{"ok-key-0123456789abc", " \t\n "}, []string{"auth.keys[1] ' \t\n ' resolves to an empty string"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			config, _ := json.Marshal(map[string]any{"auth": map[string]any{"keys": tc.keys}})
			wantProvisionError(t, string(config), tc.want...)
		})
	}
}

// adaptAndValidate runs what `caddy validate --config <file>` runs: the
// Caddyfile adapter with the file's name, then caddy.Validate, which
// provisions every module without starting a listener.
func adaptAndValidate(t *testing.T, caddyfile string) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(body, map[string]any{"filename": path})
	if err != nil {
		return err
	}
	var cfg caddy.Config
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatalf("adapted config: %v\n%s", err, adapted)
	}
	return caddy.Validate(&cfg)
}

// TestValidateRefusesBadConfig checks that a config error stops Caddy: an
// unknown endpoint at adaptation, with the file and line; a key that resolves
// to nothing at validation, when the handler is provisioned; an empty field
// name at adaptation, with its line.
func TestValidateRefusesBadConfig(t *testing.T) {
	os.Unsetenv("UNSET_VAR_FOR_TEST") //nolint:errcheck // absent is what we want
	tests := []struct {
		name, block string
		words       []string
	}{
		{"unknown endpoint", "key abcdefghijklmnopqrstuvwxyz\n\t\trequire_key status on\n\t\tenable whitelist playrs",
			[]string{"enable: unknown endpoint 'playrs'", "Caddyfile:9"}},
		{"unset key variable", "key {env.UNSET_VAR_FOR_TEST}",
			[]string{"auth.keys[0] '{env.UNSET_VAR_FOR_TEST}'"}},
		{"empty field name", `protected_fields player op ""`,
			[]string{"protected_fields: empty field name", "Caddyfile:7"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantErrorWords(t, adaptAndValidate(t, validateSite(tc.block)), tc.words...)
		})
	}
}

// validateSite is a whole Caddyfile with a statusgate block holding block,
// whose first line is line 7.
func validateSite(block string) string {
	return "{\n\tadmin off\n}\n\n:0 {\n\tstatusgate {\n\t\t" + block + "\n\t}\n\trespond \"backend\" 200\n}\n"
}

// TestValidateAcceptsGoodConfig is the control for TestValidateRefusesBadConfig.
func TestValidateAcceptsGoodConfig(t *testing.T) {
	t.Setenv("STATUSGATE_TEST_KEY", "env-key-0123456789abcdef")
	block := "key {env.STATUSGATE_TEST_KEY}\n\t\tenable whitelist custom/votes"
	if err := adaptAndValidate(t, validateSite(block)); err != nil {
		t.Fatal(err)
	}
}
