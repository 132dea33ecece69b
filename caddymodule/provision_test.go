package caddymodule

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/caddymodule/jsonfilter"
	"github.com/statusgate/statusgate/internal/fixture"
)

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
		got = append(got, ep.Name)
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
		if got := fieldNames(t, ep.Fields, w.fields); !slices.Equal(got, w.fields) {
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

// defaultTable is the defaults table of docs/configuration.md.
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
			if !h.authOn || !h.hide || h.qkey || h.keys.Len() != 0 {
				t.Errorf("authOn=%v hide=%v qkey=%v keys=%d, want true true false 0", h.authOn, h.hide, h.qkey, h.keys.Len())
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
	want["server"] = epWant{enabled: true, fields: []string{"motd", "ip", "port"}} // a list adds to the defaults
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

// TestProvisionKeys checks how configured keys become accepted keys, and by
// which names: plain strings (the form of configs before keys had names),
// named objects, digests, and placeholders in each.
func TestProvisionKeys(t *testing.T) {
	t.Setenv("STATUSGATE_TEST_KEY", " env-key-0123456789abcdef \n")
	t.Setenv("STATUSGATE_TEST_DIGEST", apikey.Digest("digest-from-env-0123456789"))
	t.Setenv("STATUSGATE_TEST_PRE", "mid-0123456789abcdef") // no white space: a key is one word
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("file-key-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config, _ := json.Marshal(map[string]any{"auth": map[string]any{"keys": []any{
		"{env.STATUSGATE_TEST_KEY}",
		"{file." + keyFile + "}",
		"  l1teral-key-0123456789  ",
		"pre-{env.STATUSGATE_TEST_PRE}",
		map[string]string{"name": "discord-bot", "key": apikey.Digest("bot-secret-0123456789")},
		map[string]string{"key": apikey.DigestPrefix + strings.ToUpper(apikey.Digest("unnamed-digest-0123456789")[7:])},
		map[string]string{"name": "env-digest", "key": "{env.STATUSGATE_TEST_DIGEST}"},
	}}})
	h := mustProvision(t, string(config))
	if h.keys.Len() != 7 {
		t.Fatalf("%d keys provisioned, want 7", h.keys.Len())
	}
	for key, name := range map[string]string{
		"env-key-0123456789abcdef":   "key-1",
		"file-key-0123456789abcdef":  "key-2",
		"l1teral-key-0123456789":     "key-3",
		"pre-mid-0123456789abcdef":   "key-4",
		"bot-secret-0123456789":      "discord-bot",
		"unnamed-digest-0123456789":  "key-6",
		"digest-from-env-0123456789": "env-digest",
	} {
		if i, ok := h.keys.Match(key); !ok || h.keys.Names()[i] != name {
			t.Errorf("key %q: Match = %d, %v; want %q", key, i, ok, name)
		}
	}
	for _, key := range []string{
		"{env.STATUSGATE_TEST_KEY}",
		"{file." + keyFile + "}",
		"file-key-0123456789abcdef\n",
		" env-key-0123456789abcdef \n",
		"  l1teral-key-0123456789  ",
		apikey.Digest("bot-secret-0123456789"), // the digest is not the key
		"",
	} {
		if i, ok := h.keys.Match(key); ok {
			t.Errorf("key %q accepted as %q", key, h.keys.Names()[i])
		}
	}
	// The names are the placeholder values, by keyring position.
	var names []any
	for _, k := range h.keyInfo {
		names = append(names, k.name)
	}
	if want := []any{"key-1", "key-2", "key-3", "key-4", "discord-bot", "key-6", "env-digest"}; !slices.Equal(names, want) {
		t.Errorf("key names %q, want %q", names, want)
	}
}

// TestKeysJSONRoundTrip checks that the JSON of keys stays as it was for
// unnamed keys (a list of strings, which `caddy adapt` keeps giving) and is
// an object for a named one.
func TestKeysJSONRoundTrip(t *testing.T) {
	const config = `{"auth":{"keys":["plain-secret-0123456789",{"name":"bot","key":"sha256:` + hex64 + `"}]}}`
	h := new(Handler)
	if err := json.Unmarshal([]byte(config), h); err != nil {
		t.Fatal(err)
	}
	want := []apikey.Key{{Secret: "plain-secret-0123456789"}, {Name: "bot", Secret: "sha256:" + hex64}}
	if !reflect.DeepEqual(h.Auth.Keys, want) {
		t.Errorf("keys %+v, want %+v", h.Auth.Keys, want)
	}
	out, err := json.Marshal(h)
	if err != nil || string(out) != config {
		t.Errorf("marshalled %s, %v; want %s", out, err, config)
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
	t.Setenv("STATUSGATE_TEST_BAD_DIGEST", "sha256:12345678secret-tail")
	os.Unsetenv("STATUSGATE_TEST_UNSET") //nolint:errcheck // absent is what we want
	named := func(name, key string) map[string]string { return map[string]string{"name": name, "key": key} }
	tests := []struct {
		name string
		keys []any
		want []string
	}{
		{"empty env var", []any{"g00d-key-0123456789", "{env.STATUSGATE_TEST_EMPTY}"}, []string{"auth.keys[1] 'key-2' {env.STATUSGATE_TEST_EMPTY}", "empty"}},
		{"unset env var", []any{"{env.STATUSGATE_TEST_UNSET}"}, []string{"auth.keys[0] 'key-1' {env.STATUSGATE_TEST_UNSET}"}},
		{"blank env var", []any{named("bot", "{env.STATUSGATE_TEST_BLANK}")}, []string{"auth.keys[0] 'bot' {env.STATUSGATE_TEST_BLANK}: the environment variable STATUSGATE_TEST_BLANK holds only white space"}},
		{"blank file", []any{"{file." + blankFile + "}"}, []string{"auth.keys[0] 'key-1' {file." + blankFile + "}", "holds only white space"}},
		{"missing file", []any{"{file." + filepath.Join(dir, "nope") + "}"}, []string{"auth.keys[0] 'key-1' {file." + filepath.Join(dir, "nope") + "}"}},
		// Not one Provision expands: it may be part of a secret, so not shown.
		{"runtime placeholder", []any{"{http.request.header.X-Key}"}, []string{"auth.keys[0] 'key-1': a placeholder in the key is unknown or empty"}},
		{"empty literal", []any{""}, []string{"auth.keys[0] 'key-1': empty key"}},
		{"whitespace literal", []any{"ok-key-0123456789abc", " \t\n "}, []string{"auth.keys[1] 'key-2': empty key"}},
		{"bad name", []any{named("discord bot", "abcdefghijklmnopqrstuvwxyz")}, []string{"auth.keys[0]: invalid name (letters, digits, _ and -)"}},
		{"short digest", []any{named("bot", "sha256:abcd")}, []string{"auth.keys[0] 'bot': malformed digest 'sha256:abcd'", "got 4"}},
		{"digest in pieces", []any{"sha256:{env.STATUSGATE_TEST_BLANK}"}, []string{"auth.keys[0] 'key-1': malformed digest 'sha256:…'", "character 8 is not a hex digit"}},
		{"bad digest from env", []any{"{env.STATUSGATE_TEST_BAD_DIGEST}"}, []string{"auth.keys[0] 'key-1': malformed digest 'sha256:12345678…'"}},
		{"same name, another scope", []any{named("bot", "f1rst-key-0123456789"), map[string]any{"name": "bot", "key": "s3cond-key-0123456789", "endpoints": []string{"status"}}},
			[]string{"auth.keys[1] 'bot': endpoints not the same as on keys[0] 'bot', another secret of the key: the secrets of one name are one key (a key being rotated), with one scope and one cap; give each the same endpoints, max_in_flight and max_held"}},
		{"same name, another cap", []any{map[string]any{"name": "bot", "key": "f1rst-key-0123456789", "max_in_flight": 2}, map[string]any{"name": "bot", "key": "s3cond-key-0123456789", "max_in_flight": 3}},
			[]string{"auth.keys[1] 'bot': max_in_flight not the same as on keys[0] 'bot'"}},
		{"default name taken", []any{named("key-2", "f1rst-key-0123456789"), "s3cond-key-0123456789"},
			[]string{"auth.keys[1] 'key-2': 'key-2' is the name of keys[0] and, by its position, of keys[1]; give keys[1] a name of its own"}},
		{"default name taken later", []any{"f1rst-key-0123456789", named("key-1", "s3cond-key-0123456789")},
			[]string{"auth.keys[1] 'key-1': 'key-1' is the name of keys[1] and, by its position, of keys[0]; give keys[0] a name of its own"}},
		{"same secret as digest", []any{"s4me-key-0123456789", named("bot", apikey.Digest("s4me-key-0123456789"))}, []string{"auth.keys[1] 'bot' has the same secret as keys[0] 'key-1'"}},
		{"same secret under one name", []any{named("bot", "s4me-key-0123456789"), named("bot", "s4me-key-0123456789")}, []string{"auth.keys[1] 'bot' has the same secret as keys[0] 'bot'"}},
		{"a name alone", []any{"discord-bot-production"},
			[]string{`auth.keys[0] 'key-1': one word that reads like a name, with no secret: write {"name": "NAME", "key": "SECRET"}, or make a key with caddy statusgate-key --name NAME`}},
		{"a name alone in an object", []any{map[string]string{"key": "website"}}, []string{"auth.keys[0] 'key-1': one word that reads like a name, with no secret"}},
		{"object without key", []any{map[string]string{"name": "bot"}}, []string{`missing "key"`}},
		{"too long", []any{named("bot", strings.Repeat("k", apikey.MaxSecretLength+1))}, []string{"auth.keys[0] 'bot': longer than 256 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			config, _ := json.Marshal(map[string]any{"auth": map[string]any{"keys": tc.keys}})
			h := new(Handler)
			err := json.Unmarshal(config, h)
			if err == nil {
				ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
				t.Cleanup(cancel)
				t.Cleanup(func() { _ = h.Cleanup() })
				err = h.Provision(ctx)
			}
			wantErrorWords(t, err, tc.want...)
			for _, secret := range []string{"f1rst-key", "s3cond-key", "s4me-key", "abcdefghij", "secret-tail", "g00d-key", "ok-key"} {
				if err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a secret: %v", err)
				}
			}
		})
	}
}

// TestProvisionKeyErrorsQuoteNoSecret checks the errors of keys in a JSON
// config (written by hand: no adapter has sealed or checked them) that could
// show key material: each names the key by position, and by its name when
// that is a valid one, and quotes no piece of a secret.
func TestProvisionKeyErrorsQuoteNoSecret(t *testing.T) {
	os.Unsetenv("STATUSGATE_TEST_UNSET") //nolint:errcheck // absent is what we want
	named := func(name, key string) map[string]string { return map[string]string{"name": name, "key": key} }
	tests := []struct {
		name    string
		keys    []any
		want    string
		secrets []string
	}{
		{"braces in a secret", []any{"Qx7Zk9{Wv3Jp8Yt5}Rb2Hm4"},
			"auth.keys[0] 'key-1': a placeholder in the key is unknown or empty", []string{"Qx7Zk9{Wv3Jp8Yt5}Rb2Hm4"}},
		{"a secret in braces", []any{named("bot", "{"+secretP+"}")},
			"auth.keys[0] 'bot': a placeholder in the key is unknown or empty", []string{secretP}},
		{"a secret next to an empty placeholder", []any{secretP + "{env.STATUSGATE_TEST_UNSET}"},
			"auth.keys[0] 'key-1': a placeholder in the key is unknown or empty", []string{secretP}},
		{"a secret with odd characters as the name", []any{named("Qx7+Zk9/Wv3=", secretQ)},
			"auth.keys[0]: invalid name (letters, digits, _ and -)", []string{"Qx7+Zk9/Wv3=", secretQ}},
		{"a generated secret as the name", []any{named(genP, genQ)},
			"auth.keys[0]: invalid name (it has the form of a secret from caddy statusgate-key)", []string{genP, genQ}},
		{"a random secret as the name", []any{named(secretP, secretQ)},
			"auth.keys[0]: invalid name (it reads as a secret: random hex, base64url or a UUID)", []string{secretP, secretQ}},
		{"the name is another key's secret", []any{passP, named(passP, passQ)},
			"auth.keys[1]: the name is the secret of keys[0]; write the name, then the secret", []string{passP, passQ}},
		{"the name is a later key's secret, which is also given twice", []any{named(passP, passQ), passQ, passP},
			"auth.keys[0]: the name is the secret of keys[2]", []string{passP, passQ}},
		{"the name is another key's secret given as its digest", []any{named("bot", apikey.Digest(passP)), named(passP, passQ)},
			"auth.keys[1]: the name is the secret of keys[0]", []string{passP, passQ}},
		{"a secret after sha256:", []any{named("bot", "sha256:"+secretP)},
			"auth.keys[0] 'bot': malformed digest 'sha256:…'", []string{secretP}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			config, _ := json.Marshal(map[string]any{"auth": map[string]any{"keys": tc.keys}})
			_, err := provisionJSON(t, string(config))
			wantErrorWords(t, err, tc.want)
			fixture.QuotesNoSecret(t, err, 4, tc.secrets...)
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
		{"unknown endpoint", "key abcdefghijk1mnopqrstuvwxyz\n\t\trequire_key status on\n\t\tenable whitelist playrs",
			[]string{"enable: unknown endpoint 'playrs'", "Caddyfile:9"}},
		{"unset key variable", "key {env.UNSET_VAR_FOR_TEST}",
			[]string{"auth.keys[0] 'key-1' {env.UNSET_VAR_FOR_TEST}"}},
		{"malformed digest", "key website sha256:00ff\n\t\tkey bot sha256:zz",
			[]string{"key: malformed digest 'sha256:00ff'", "got 4", "Caddyfile:7"}},
		{"bad key name", "key abcdefghijk1mnopqrstuvwxyz\n\t\tkey web.site abcdefghijklmnopqrstuvwxy0",
			[]string{"key: invalid name (letters, digits, _ and -); write key <name> <secret>", "Caddyfile:8"}},
		{"key line with two secrets", "key " + genP + " " + genQ,
			[]string{"key: the first of two words looks like a secret, not a name; write key <name> <secret>", "Caddyfile:7"}},
		{"key with an unknown placeholder", "key bot Qx7Zk9{Wv3Jp8Yt5}Rb2Hm4",
			[]string{"key: a placeholder in the key is unknown or empty", "Caddyfile:7"}},
		{"key with three words", "key a b c",
			[]string{"key: want [<name>] <secret|sha256:<hex>>, got 3 arguments", "Caddyfile:7"}},
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
