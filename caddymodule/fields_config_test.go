package caddymodule

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestFieldListsAdd checks that a field list adds to what the defaults and
// the global option hide, and that only publish_fields, naming each
// field, or a list with no fields makes a field hidden elsewhere public;
// the startup log says what each endpoint hides and why. Before, a list
// replaced the defaults: protected_fields player uuid published op, banned
// and the linked Discord account, and a handler's status list published
// the online UUIDs the global option hid.
func TestFieldListsAdd(t *testing.T) {
	var a App
	if err := json.Unmarshal([]byte(`{"defaults":{"auth":{"protected_fields":{"status":["online"],"player":["rank"]},"publish_fields":{"worlds":["seed"]}}}}`), &a); err != nil {
		t.Fatal(err)
	}
	var h Handler
	if err := json.Unmarshal([]byte(`{"auth":{"protected_fields":{"player":["uuid"],"status":["history"],"bans":[]},"publish_fields":{"server":["motd"]}}}`), &h); err != nil {
		t.Fatal(err)
	}
	if err := h.adopt(&a); err != nil {
		t.Fatal(err)
	}
	auth := h.Auth
	table, _, err := buildTable(tableConfig{authOn: true, fields: auth.ProtectedFields, publish: auth.PublishFields,
		globalFields: auth.globalFields, globalPublish: auth.globalPublish}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ep, want := range map[string][]string{
		"player": {"op", "banned", "chatplatform", "discord", "rank", "uuid"},
		"status": {"online", "history"},
		"server": {"ip", "port"},
		"worlds": nil,
		"bans":   nil,
	} {
		if got := table.byName[ep].fieldList; !slices.Equal(got, want) {
			t.Errorf("%s hides %v, want %v", ep, got, want)
		}
	}
	core, logs := observer.New(zap.InfoLevel)
	logFields(zap.New(core), table)
	hidden := logs.FilterMessage("fields hidden from callers without a key").All()
	if len(hidden) != 1 {
		t.Fatalf("the startup log has %d lines of hidden fields", len(hidden))
	}
	lines := strings.Join(toStrings(hidden[0].ContextMap()["hidden_fields"]), "\n")
	for _, want := range []string{"player: op (default), banned (default), chatplatform (default), discord (default), rank (the global statusgate option), uuid (this handler)",
		"status: online (the global statusgate option), history (this handler)"} {
		if !strings.Contains(lines, want) {
			t.Errorf("hidden_fields %q, want %q", lines, want)
		}
	}
	published := logs.FilterMessage("fields hidden by default or by the global statusgate option are public on this handler").All()
	if len(published) != 1 {
		t.Fatalf("%d warnings of published fields, want 1", len(published))
	}
	got := strings.Join(toStrings(published[0].ContextMap()["published_fields"]), "\n")
	for _, want := range []string{"server: motd (hidden by default, published by publish_fields server in this handler)",
		"worlds: seed (hidden by default, published by publish_fields worlds in the global statusgate option)"} {
		if !strings.Contains(got, want) {
			t.Errorf("published_fields %q, want %q", got, want)
		}
	}
}

func toStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, s := range l {
			out = append(out, s.(string))
		}
	}
	if l, ok := v.([]string); ok {
		out = l
	}
	return out
}

// TestGlobalExtraFields: the global option's extra_fields count for every
// handler's protected_fields and publish_fields, in JSON when the config
// loads and in the Caddyfile when it is adapted (golden
// fields_global_extra); before, the Caddyfile refused the handler's line
// and asked for the extra_fields line already written.
func TestGlobalExtraFields(t *testing.T) {
	var a App
	if err := json.Unmarshal([]byte(`{"defaults":{"auth":{"extra_fields":{"player":["pronouns"]}}}}`), &a); err != nil {
		t.Fatal(err)
	}
	var h Handler
	if err := json.Unmarshal([]byte(`{"auth":{"protected_fields":{"player":["pronouns"]}}}`), &h); err != nil {
		t.Fatal(err)
	}
	if err := h.adopt(&a); err != nil {
		t.Fatal(err)
	}
	table, _, err := buildTable(tableConfig{authOn: true, fields: h.Auth.ProtectedFields, extra: h.Auth.ExtraFields}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := table.byName["player"].fieldList; !slices.Contains(got, "pronouns") {
		t.Errorf("player hides %v, want pronouns among them", got)
	}
	_, _, err = caddyconfig.GetAdapter("caddyfile").Adapt([]byte("{\n\tstatusgate {\n\t\textra_fields player pronouns\n\t}\n}\n:8080 {\n\tstatusgate 127.0.0.1:8081 {\n\t\tpublish_fields player op\n\t\tprotected_fields player pronouns\n\t}\n}\n"), nil)
	if err != nil {
		t.Errorf("the global option's extra_fields in the Caddyfile: %v", err)
	}
}

// TestProvisionLogsHiddenFields: every load logs what each endpoint hides
// from callers without a key, and which place hides it.
func TestProvisionLogsHiddenFields(t *testing.T) {
	_, logs := newTestHandler(t, "protected_fields player uuid")
	l := logs.FilterMessage("fields hidden from callers without a key").All()
	if len(l) != 1 {
		t.Fatalf("%d lines of hidden fields, want 1", len(l))
	}
	got := strings.Join(toStrings(l[0].ContextMap()["hidden_fields"]), "\n")
	if !strings.Contains(got, "player: op (default), banned (default), chatplatform (default), discord (default), uuid (this handler)") {
		t.Errorf("hidden_fields %q", got)
	}
}
