package caddymodule

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

// TestOneKeyNameOneKey: a handler's key of the name of a key in the global
// statusgate option is one key with both secrets and one block, in JSON as
// in the Caddyfile (the golden key_global_same_name*): with the same block
// both secrets open what the key opens, under its name and scope; with
// another block the config is refused. Before, the handler's key replaced
// the global one on that handler: the global secret was refused, and the
// local one, under the bot's name, opened every endpoint the scope written
// once had kept from it.
func TestOneKeyNameOneKey(t *testing.T) {
	const global, local = "sg_Zs4cJm6Ho2YvTqW8nB1xKe0", "sg_Qp7rTf3Lw9XbNc2Vd8Ha1Mk"
	var a App
	if err := json.Unmarshal([]byte(`{"defaults":{"auth":{"keys":[{"name":"discord-bot","key":"`+apikey.Digest(global)+`","endpoints":["server"]}]}}}`), &a); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ own, want string }{
		{`{"name":"discord-bot","key":"` + apikey.Digest(local) + `"}`,
			"auth.keys[0] 'discord-bot': endpoints not the same as on the global statusgate option's key 'discord-bot': a name is one key, and every secret of it has the key's block; give this key the same endpoints, max_in_flight and max_held, or a name of its own (defaults.auth.keys[0] 'discord-bot')"},
		{`{"name":"discord-bot","key":"` + apikey.Digest(local) + `","endpoints":["server","bans"]}`, "endpoints not the same"},
		{`{"name":"discord-bot","key":"` + apikey.Digest(local) + `","endpoints":["server"],"max_in_flight":2}`, "max_in_flight not the same"},
	} {
		var h Handler
		if err := json.Unmarshal([]byte(`{"auth":{"keys":[`+c.own+`]}}`), &h); err != nil {
			t.Fatal(err)
		}
		wantErrorWords(t, h.adopt(&a), c.want)
	}

	var h Handler
	if err := json.Unmarshal([]byte(`{"auth":{"keys":[{"name":"discord-bot","key":"`+apikey.Digest(local)+`","endpoints":["server"]}]}}`), &h); err != nil {
		t.Fatal(err)
	}
	if err := h.adopt(&a); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.Cleanup()
	for _, secret := range []string{global, local} {
		i, ok := h.keys.Match(secret)
		if !ok || h.keys.Names()[i] != "discord-bot" {
			t.Fatalf("%s: matched %v, want the key discord-bot", secret, ok)
		}
		if info := h.keyInfo[i]; !info.opens("server") || info.opens("bans") {
			t.Errorf("%s opens server %v, bans %v: want the key's scope, server alone", secret, info.opens("server"), info.opens("bans"))
		}
	}
	// The global key written again in the handler, secret and block alike,
	// is that key once.
	var again Handler
	if err := json.Unmarshal([]byte(`{"auth":{"keys":[{"name":"discord-bot","key":"`+apikey.Digest(global)+`","endpoints":["server"]}]}}`), &again); err != nil {
		t.Fatal(err)
	}
	if err := again.adopt(&a); err != nil || len(again.Auth.Keys) != 1 {
		t.Errorf("the global key again in the handler: %v, keys %+v, want it once", err, again.Auth.Keys)
	}
}
