package docs

// The route checks that Caddy runs when it starts a config
// (caddymodule/routecheck.go), against every config the documentation
// shows (docs_test.go calls startDocConfig): none of them is refused.

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// startDocConfig provisions adapted, a config of the docs (block, as
// written there), and starts its statusgate app, which is where a
// statusgate that nothing follows or a rate_limit before statusgate is
// refused: the docs show neither. The config's servers are not started
// (caddy.ProvisionContext), so nothing listens.
func startDocConfig(t *testing.T, where string, block, adapted []byte) {
	t.Helper()
	if bytes.HasPrefix(block, []byte("# Gateway B: the global options as on A")) {
		// docs/cluster.md's second gateway, whose global options are
		// A's (with a storage, not provisioned here): they order rate_limit.
		var err error
		if adapted, _, err = caddyconfig.GetAdapter("caddyfile").Adapt(append([]byte("{\n\torder rate_limit after statusgate\n}\n"), block...), nil); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
	}
	var cfg caddy.Config
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Admin = &caddy.AdminConfig{Disabled: true}
	ctx, err := caddy.ProvisionContext(&cfg)
	if err != nil {
		t.Fatalf("%s: does not provision: %v", where, err)
	}
	app, err := ctx.AppIfConfigured("statusgate")
	if err != nil {
		return // no statusgate in it
	}
	a := app.(caddy.App)
	if err := a.Start(); err != nil {
		t.Errorf("%s: refused when Caddy starts it: %v\n%s", where, err, block)
		return
	}
	if err := a.Stop(); err != nil {
		t.Error(err)
	}
}
