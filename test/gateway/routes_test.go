package gateway

// The config mistakes that only the routes around statusgate show, refused
// when Caddy starts the config (caddy run, caddy reload, the admin API's
// /load), which is where a user meets them: a statusgate of the form of 1.0
// that nothing follows, and a rate_limit that runs before statusgate
// (caddymodule/routecheck.go). caddy validate does not start a config, so
// it does not see them.

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestRouteMistakes runs testdata/routes/*.caddyfiletest and *.jsontest: a
// whole config (a Caddyfile whose sites are http://, or Caddy's JSON), a
// line of dashes, then lines of text that the error of loading it each
// contain, or the one word loads: it must load. The configs load into the
// tests' Caddy, whose admin API, ports and log they are given
// (forTheHarness).
func TestRouteMistakes(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "routes", "*test"))
	if len(files) == 0 {
		t.Fatal("no testdata/routes files")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, expected, ok := strings.Cut(string(b), "\n----------\n")
			if !ok {
				t.Fatal("no ---------- line")
			}
			expected = strings.TrimSpace(expected)
			var code int
			var msg string
			if strings.HasSuffix(file, ".jsontest") {
				code, msg = PostJSON(t, jsonForTheHarness(t, input))
			} else {
				code, msg = PostCaddyfile(t, caddyfileForTheHarness(input))
			}
			if expected == "loads" {
				if code != http.StatusOK {
					t.Fatalf("refused: %d %s", code, msg)
				}
				return
			}
			if code == http.StatusOK {
				t.Fatalf("loaded, want it refused with:\n%s", expected)
			}
			for _, line := range strings.Split(expected, "\n") {
				if !strings.Contains(msg, line) {
					t.Errorf("the error does not contain %q:\n%s", line, msg)
				}
			}
		})
	}
}

// harnessOptions are the global options that keep a config on the tests'
// admin API and ports, and its log quiet.
func harnessOptions() string {
	return "\tadmin localhost:" + strconv.Itoa(AdminPort) + "\n\thttp_port " + strconv.Itoa(HTTPPort) +
		"\n\thttps_port " + strconv.Itoa(HTTPSPort) + "\n\tdefault_bind 127.0.0.1\n\tauto_https off\n\tskip_install_trust\n\tlog {\n\t\tlevel ERROR\n\t}\n"
}

// caddyfileForTheHarness is caddyfile with the harness's global options
// first in its global options block (one is added where it has none).
func caddyfileForTheHarness(caddyfile string) string {
	if strings.HasPrefix(caddyfile, "{\n") {
		return "{\n" + harnessOptions() + caddyfile[2:]
	}
	return "{\n" + harnessOptions() + "}\n" + caddyfile
}

// jsonForTheHarness is config with the tests' admin API, its servers on the
// gateway's port and its log quiet.
func jsonForTheHarness(t *testing.T, config string) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["admin"] = map[string]any{"listen": "localhost:" + strconv.Itoa(AdminPort)}
	cfg["logging"] = map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}}
	httpApp := cfg["apps"].(map[string]any)["http"].(map[string]any)
	httpApp["http_port"], httpApp["https_port"] = HTTPPort, HTTPSPort
	for _, srv := range httpApp["servers"].(map[string]any) {
		srv := srv.(map[string]any)
		srv["listen"] = []string{"127.0.0.1:" + strconv.Itoa(HTTPPort)}
		srv["automatic_https"] = map[string]any{"disable": true}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReloadRefusesRouteMistakes: a reload to a config with either mistake
// fails, with the error that names it and the fix, in Caddyfile and in JSON,
// and the running config keeps serving, through every refused reload.
func TestReloadRefusesRouteMistakes(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be)
	const server = "/api/v1/server"
	rateLimit := "rate_limit {\n\t\tzone per_caller {\n\t\t\tkey {http.statusgate.client}\n\t\t\tevents 60\n\t\t\twindow 1m\n\t\t}\n\t}"
	nothingAfter := Gateway{Routes: "statusgate {\n\t\tkey " + KeyA + "\n\t}"}.Caddyfile()
	rateLimitFirst := Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA}, Site: []string{rateLimit}}.Caddyfile()
	for _, c := range []struct {
		what   string
		load   func() (int, string)
		wanted []string
	}{
		{"1.0 form, nothing after it", func() (int, string) { return PostCaddyfile(t, nothingAfter) },
			[]string{"statusgate app module: start: statusgate in server srv0", "declares no upstreams, and no handler runs after it", "statusgate 127.0.0.1:8080"}},
		{"rate_limit without its order line", func() (int, string) { return PostCaddyfile(t, rateLimitFirst) },
			[]string{"statusgate app module: start: statusgate in server srv0", "runs before it", "order rate_limit after statusgate"}},
		{"1.0 form, nothing after it, JSON", func() (int, string) { return PostJSON(t, Adapt(t, nothingAfter)) },
			[]string{"declares no upstreams, and no handler runs after it"}},
		{"rate_limit before statusgate, JSON", func() (int, string) { return PostJSON(t, Adapt(t, rateLimitFirst)) },
			[]string{"the rate_limit at apps.http.servers.srv0.routes[0].handle[0] runs before it"}},
	} {
		code, msg := c.load()
		if code == http.StatusOK {
			t.Fatalf("%s: reloaded, want it refused", c.what)
		}
		for _, w := range c.wanted {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: the error does not contain %q: %s", c.what, w, msg)
			}
		}
		if strings.Contains(msg, KeyA) {
			t.Errorf("%s: the error holds the key: %s", c.what, msg)
		}
		// The running config is the old one: the declared backend, with KeyA.
		// The refused config's servers are gone by now (PostCaddyfile and
		// PostJSON wait for their sockets to close), so no request can
		// meet one of them.
		WantBackendBytes(t, Send(t, "GET", server, WithKey(KeyA)), server)
		be.WantSeen(t, c.what+": the old config", server)
	}
	// The fixed config loads.
	Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA}, Site: []string{rateLimit},
		Global: []string{"log {\n\t\tlevel ERROR\n\t}", "order rate_limit after statusgate"}}.Start(t)
	WantBackendBytes(t, Send(t, "GET", server, WithKey(KeyA)), server)
	be.WantSeen(t, "the fixed config", server)
}
