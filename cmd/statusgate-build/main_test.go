package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/xcaddy"
)

func writeManifest(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "xcaddy.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The manifest checked in at the repository root: pinned versions, the
// local module replaced by the checkout itself.
func TestRepositoryManifest(t *testing.T) {
	b, err := loadManifest("../../xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	if b.CaddyVersion != "v2.11.9" {
		t.Errorf("caddy_version %q", b.CaddyVersion)
	}
	want := []xcaddy.Dependency{
		{PackagePath: "github.com/statusgate/statusgate/caddymodule"},
		{PackagePath: "github.com/mholt/caddy-ratelimit", Version: "v0.1.0"},
		{PackagePath: "github.com/pberkel/caddy-storage-redis", Version: "v1.8.1"},
	}
	if len(b.Plugins) != len(want) {
		t.Fatalf("plugins %v", b.Plugins)
	}
	for i := range want {
		if b.Plugins[i] != want[i] {
			t.Errorf("plugins[%d] = %v, want %v", i, b.Plugins[i], want[i])
		}
	}
	root, _ := filepath.Abs("../..")
	if len(b.Replacements) != 1 || b.Replacements[0].Old != "github.com/statusgate/statusgate" ||
		string(b.Replacements[0].New) != root {
		t.Fatalf("replacements %v, want the module replaced by %s", b.Replacements, root)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.HasPrefix(string(gomod), "module github.com/statusgate/statusgate\n") {
		t.Errorf("the replacement does not point at this module's root (%v)", err)
	}
}

func TestRelativeReplacementsResolveAgainstTheManifest(t *testing.T) {
	path := writeManifest(t, `{
		"caddy_version": "v2.11.9",
		"plugins": [{"module_path": "example.com/a/plugin"}, {"module_path": "example.com/b", "version": "v1.2.3"}],
		"replacements": [
			{"old": "example.com/a", "new": "."},
			{"old": "example.com/c", "new": "../c"},
			{"old": "example.com/d", "new": "./d"},
			{"old": "example.com/e", "new": "/abs/e"},
			{"old": "example.com/f", "new": "example.com/fork v1.0.0"}
		]
	}`)
	b, err := loadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	want := []string{dir, filepath.Join(filepath.Dir(dir), "c"), filepath.Join(dir, "d"), "/abs/e", "example.com/fork v1.0.0"}
	for i, w := range want {
		if got := string(b.Replacements[i].New); got != w {
			t.Errorf("replacements[%d].new = %q, want %q", i, got, w)
		}
	}
}

func TestManifestErrors(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"not JSON":          {`{`, "unexpected EOF"},
		"unknown member":    {`{"caddy_version":"v2.11.9","plugin":[]}`, `unknown field "plugin"`},
		"two values":        {`{"caddy_version":"v2.11.9"} {}`, "more than one JSON value"},
		"no caddy version":  {`{}`, `caddy_version "" is not an exact version`},
		"latest":            {`{"caddy_version":"latest"}`, `caddy_version "latest" is not an exact version`},
		"branch":            {`{"caddy_version":"v2.11.9","plugins":[{"module_path":"example.com/x","version":"master"}]}`, `version "master" is not exact`},
		"unpinned plugin":   {`{"caddy_version":"v2.11.9","plugins":[{"module_path":"example.com/x"}]}`, "neither a version nor a replacement"},
		"module root local": {`{"caddy_version":"v2.11.9","plugins":[{"module_path":"example.com/x"}],"replacements":[{"old":"example.com/x","new":"."}]}`, "neither a version nor a replacement"},
		"no module path":    {`{"caddy_version":"v2.11.9","plugins":[{"version":"v1.0.0"}]}`, "plugins[0] has no module_path"},
		"half replacement":  {`{"caddy_version":"v2.11.9","replacements":[{"old":"example.com/x"}]}`, "needs both old and new"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadManifest(writeManifest(t, tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := loadManifest(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("a missing manifest loaded")
	}
}

func TestExactVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"v2.11.9": true, "v0.1.0": true, "v1.2.3-beta.1": true, "v0.0.0-20260331191114-261f960a40d1": true,
		"v1.2.3+incompatible": true, "2.11.9": false, "v2.11": false, "latest": false, "master": false, "": false,
	} {
		if got := exactVersion.MatchString(v); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

func TestTolerantGoproxy(t *testing.T) {
	for in, want := range map[string]string{
		"https://goproxy.example,direct":                  "https://goproxy.example|off",
		"https://a.example|https://b.example,direct":      "https://a.example|https://b.example|off",
		"https://goproxy.example":                         "https://goproxy.example|off",
		" https://a.example , off":                        "https://a.example|off",
		"file:///srv/goproxy,https://goproxy.example|off": "file:///srv/goproxy|https://goproxy.example|off",
	} {
		if got, ok := tolerantGoproxy(in); !ok || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "direct", "off", "direct,off"} {
		if got, ok := tolerantGoproxy(in); ok {
			t.Errorf("%q: %q, want it left alone", in, got)
		}
	}
}

func TestHasLocalReplacement(t *testing.T) {
	local := xcaddy.Builder{Replacements: []xcaddy.Replace{xcaddy.NewReplace("example.com/a", "/abs/a")}}
	module := xcaddy.Builder{Replacements: []xcaddy.Replace{xcaddy.NewReplace("example.com/a", "example.com/fork v1.0.0")}}
	if !hasLocalReplacement(local) || hasLocalReplacement(module) || hasLocalReplacement(xcaddy.Builder{}) {
		t.Error("hasLocalReplacement")
	}
}
