// Package demo runs the demo as docs/demo.md's tour does: Caddyfile.example
// in a caddy process of this repository's build, changed while it runs and
// reloaded with `caddy reload --config`, which finds the demo by the admin
// address the file gives.
package demo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"
	"github.com/statusgate/statusgate/test/internal/rig"
)

// The commands of the tour's "Changing it while it runs", which this test
// runs with the built binary in place of `go run ./cmd/caddy`.
const (
	reloadCommand = "go run ./cmd/caddy reload --config Caddyfile.example"
	keyCommand    = "go run ./cmd/caddy statusgate-key --name demo"
	policyLine    = "require_key server off"
	demoKeyLine   = "key demo {$STATUSGATE_KEY:demo-key-change-me-0123}"
	demoSecret    = "demo-key-change-me-0123"
)

// TestDemoReloads runs the tour's changes against the demo: a policy change
// and a key rotation under the key's own name, each by `caddy reload
// --config Caddyfile.example` as the tour writes it. The demo is moved off
// its ports the way docs/demo.md says, by STATUSGATE_DEMO_PORTS (for the
// reloads too, which read the admin port from the file), so that it meets
// no other Caddy and no other test.
func TestDemoReloads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy and runs the demo")
	}
	repo, bin := rig.CheckoutCaddy(t)
	tour := tourSection(t, repo)
	for _, want := range []string{reloadCommand, keyCommand, policyLine, demoKeyLine, "below `require_key constants off`", "delete the old line and reload"} {
		if !strings.Contains(tour, want) {
			t.Errorf("docs/demo.md's tour does not say %q, which this test does", want)
		}
	}
	example, err := os.ReadFile(filepath.Join(repo, "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\tadmin 127.0.0.1:{$" + harness.DemoPortsVar + ":80}84\n", "\t\trequire_key constants off\n", "\t\t" + demoKeyLine + "\n"} {
		if !bytes.Contains(example, []byte(want)) {
			t.Fatalf("Caddyfile.example has no line %q, which the tour edits", strings.TrimSpace(want))
		}
	}
	wantMovable(t, string(example))

	dir := t.TempDir()
	conf := filepath.Join(dir, "Caddyfile.example")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(string(example))

	hd, prefix := rig.StartDemo(t, bin, repo, dir, conf)
	d := &demo{Demo: hd, t: t}
	// The gateway's site is localhost:PP80 (a host matcher), the metrics'
	// 127.0.0.1:PP83.
	gateway := "http://localhost:" + strconv.Itoa(harness.DemoPort(prefix, harness.DemoGateway))
	metrics := "http://127.0.0.1:" + strconv.Itoa(harness.DemoPort(prefix, harness.DemoMetrics))

	// Before: /server is protected, the demo key opens it.
	d.want(gateway+"/api/v1/server", "", 404, nil)
	d.want(gateway+"/api/v1/server", demoSecret, 200, nil)

	// The policy change: require_key server off, below require_key constants off.
	changed := strings.Replace(string(example), "\t\trequire_key constants off\n", "\t\trequire_key constants off\n\t\t"+policyLine+"\n", 1)
	write(changed)
	d.reload(t)
	d.want(gateway+"/api/v1/server", "", 200, func(meta map[string]any) error {
		if fmt.Sprint(meta["hiddenFields"]) != "[motd ip port]" || meta["authenticated"] != false {
			return fmt.Errorf("meta %v, want hiddenFields [motd ip port] and authenticated false", meta)
		}
		return nil
	})

	// The rotation: the new secret's line below the old one, under the same name.
	secret, line := d.newKey(t)
	rotating := strings.Replace(changed, "\t\t"+demoKeyLine+"\n", "\t\t"+demoKeyLine+"\n\t\t"+line+"\n", 1)
	write(rotating)
	d.reload(t)
	for _, s := range []string{demoSecret, secret} {
		d.want(gateway+"/api/v1/bans", s, 200, nil)
	}
	series, _ := rig.ScrapeURL(t, metrics+"/metrics")
	if n := series[`caddy_http_statusgate_key_requests_total{key="demo"}`]; n != 2 {
		t.Errorf(`key_requests_total{key="demo"} = %v after a request with each secret, want 2 (one key, both secrets); series: %v`, n, series)
	}
	for name := range series {
		if strings.HasPrefix(name, "caddy_http_statusgate_key_requests_total{") && !strings.Contains(name, `key="demo"`) && !strings.Contains(name, `key="discord-bot"`) {
			t.Errorf("a key series of its own for a secret: %s", name)
		}
	}

	// The game's metrics of the demo's three servers, entities by type too.
	game, _ := rig.ScrapeSeries(t, metrics+"/metrics", "minecraft_")
	for _, s := range []string{"survival", "lobby", "creative"} {
		if game[fmt.Sprintf("minecraft_up{server=%q}", s)] != 1 || game[fmt.Sprintf(`minecraft_world_entities_by_type{entity_type="zombie",server=%q,world="world"}`, s)] == 0 {
			t.Errorf("the demo's %s: no game metrics; series: %v", s, game)
		}
	}

	// The old line deleted: the old secret is refused, the new one carries on.
	write(strings.Replace(rotating, "\t\t"+demoKeyLine+"\n", "", 1))
	d.reload(t)
	d.want(gateway+"/api/v1/bans", demoSecret, 404, nil)
	d.want(gateway+"/api/v1/bans", secret, 200, nil)

	// A mistake is refused with its line, and the demo carries on.
	write(strings.Replace(rotating, "\t\t"+demoKeyLine+"\n", "\t\tkey website\n", 1))
	if out, err := d.Caddy("reload", "--config", conf); err == nil || !strings.Contains(out, "one word that reads like a name") || !strings.Contains(out, conf+":") {
		t.Errorf("reload of a config with a mistake: %v\n%s", err, out)
	}
	d.want(gateway+"/api/v1/bans", secret, 200, nil)
}

// tourSection is the section of docs/demo.md on changing the demo.
func tourSection(t *testing.T, repo string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "docs", "demo.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Changing it while it runs\n")
	if !ok {
		t.Fatal(`docs/demo.md has no section "Changing it while it runs"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// wantMovable fails the test if a listening line of the demo's Caddyfile
// names a port of the demo's range as written, which STATUSGATE_DEMO_PORTS
// would not move: every one is written {$STATUSGATE_DEMO_PORTS:80}NN.
func wantMovable(t *testing.T, example string) {
	t.Helper()
	fixed := regexp.MustCompile(`(^|[^\d}])80\d\d\b`)
	for i, line := range strings.Split(example, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") && fixed.MatchString(line) {
			t.Errorf("Caddyfile.example:%d: %q names a demo port that STATUSGATE_DEMO_PORTS does not move", i+1, line)
		}
	}
}

// demo is the demo's caddy process.
type demo struct {
	*harness.Demo
	t *testing.T
}

// reload runs `caddy reload --config` on the demo's file, and waits until
// the old config's listener is closed: until then a connection may be
// answered by the old config.
func (d *demo) reload(t *testing.T) {
	t.Helper()
	if out, err := d.Caddy("reload", "--config", filepath.Join(filepath.Dir(d.Log), "Caddyfile.example")); err != nil {
		t.Fatalf("caddy reload: %v\n%s\nthe demo's log:\n%s", err, out, harness.Tail(d.Log, 20))
	}
	for deadline := time.Now().Add(fixture.Patience); ; time.Sleep(2 * time.Millisecond) {
		listening, known := harness.ListeningTCP()
		if !known || listening[uint(d.Gateway)] <= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old config's listener on port %d is still open %v after the reload", d.Gateway, fixture.Patience)
		}
	}
}

// newKey runs `caddy statusgate-key --name demo` and returns the secret and
// the Caddyfile line it prints.
func (d *demo) newKey(t *testing.T) (secret, line string) {
	t.Helper()
	out, err := d.Caddy("statusgate-key", "--name", "demo")
	if err != nil {
		t.Fatalf("caddy statusgate-key: %v\n%s", err, out)
	}
	for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); {
		text := strings.TrimSpace(sc.Text())
		if s, ok := strings.CutPrefix(text, "secret: "); ok {
			secret = s
		}
		if strings.HasPrefix(text, "key demo sha256:") {
			line = text
		}
	}
	if secret == "" || line == "" {
		t.Fatalf("caddy statusgate-key printed no secret or no key line:\n%s", out)
	}
	return secret, line
}

// want sends GET url with key (none when empty) and checks the status, and
// with check the answer's meta.
func (d *demo) want(url, key string, status int, check func(meta map[string]any) error) {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		d.t.Errorf("GET %s (key %t): %d, want %d: %s", url, key != "", resp.StatusCode, status, body)
		return
	}
	if check != nil {
		var env struct {
			Meta map[string]any `json:"meta"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			d.t.Fatalf("GET %s: %v: %s", url, err, body)
		}
		if err := check(env.Meta); err != nil {
			d.t.Errorf("GET %s: %v", url, err)
		}
	}
}
