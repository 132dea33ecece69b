package test

// The route checks that Caddy runs when it starts a config
// (caddymodule/routecheck.go) against every config the documentation
// shows: none of them is refused.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestDocConfigsStart provisions Caddyfile.example and every ```caddyfile
// block of README.md and docs/*.md (a part of a site inside one, as
// TestDocCaddyfiles does), and starts the statusgate app, which is where a
// statusgate that nothing follows or a rate_limit before statusgate is
// refused: the docs show neither. The config's servers are not started
// (caddy.ProvisionContext), so nothing listens. Blocks that read a key from
// a file or connect to a storage are left out, as TestDocCaddyfiles leaves
// them out.
func TestDocConfigsStart(t *testing.T) {
	example, err := os.ReadFile(filepath.Join(repoRoot, "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	t.Run("Caddyfile.example", func(t *testing.T) {
		wd, _ := os.Getwd()
		if err := os.Chdir(repoRoot); err != nil { // the widget's root is the checkout's
			t.Fatal(err)
		}
		defer os.Chdir(wd)
		if startDocConfig(t, "Caddyfile.example", example) {
			started++
		}
	})
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range caddyfileBlock.FindAllSubmatchIndex(b, -1) {
			block := b[m[2]:m[3]]
			where := fmt.Sprintf("%s:%d", filepath.Base(file), bytes.Count(b[:m[0]], []byte("\n"))+1)
			t.Run(where, func(t *testing.T) {
				if startDocConfig(t, where, block) {
					started++
				}
			})
		}
	}
	if started < 10 {
		t.Errorf("started %d configs with statusgate, want at least 10", started)
	}
}

// startDocConfig adapts block, provisions it and starts its statusgate
// app, failing the test if the start is refused; it reports whether there
// was a statusgate app to start.
func startDocConfig(t *testing.T, where string, block []byte) bool {
	live := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAll(block, nil) // comments aside
	if bytes.Contains(live, []byte("{file.")) || regexp.MustCompile(`(?m)^\s*storage `).Match(live) {
		t.Skipf("%s: not provisioned: it reads a key from a file or connects to a storage", where)
	}
	if bytes.HasPrefix(block, []byte("# Gateway B: the global options as on A")) {
		// docs/cluster.md's second gateway: A's global options (a
		// storage, which is not provisioned here) order rate_limit.
		block = append([]byte("{\n\torder rate_limit after statusgate\n}\n"), block...)
	}
	for _, m := range envPlaceholder.FindAllSubmatch(block, -1) {
		t.Setenv(string(m[1]), "doc-test-key-"+strings.ToLower(string(m[1])))
	}
	adapter := caddyconfig.GetAdapter("caddyfile")
	adapted, _, err := adapter.Adapt(block, map[string]any{"filename": where})
	if err != nil {
		site := "example.com {\n\t" + strings.ReplaceAll(strings.TrimSpace(string(block)), "\n", "\n\t") + "\n}\n"
		if adapted, _, err = adapter.Adapt([]byte(site), map[string]any{"filename": where}); err != nil {
			t.Skipf("%s: does not adapt (TestDocCaddyfiles says why): %v", where, err)
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
		return false
	}
	a := app.(caddy.App)
	if err := a.Start(); err != nil {
		t.Errorf("%s: refused when started: %v\n%s", where, err, block)
		return true
	}
	if err := a.Stop(); err != nil {
		t.Error(err)
	}
	return true
}
