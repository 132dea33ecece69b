package test

// The documentation and the demo's config, checked like code: every relative
// link of README.md and docs/ resolves (file and heading), the README stays a
// front page, CI runs the README's test command, and Caddyfile.example is a
// valid config whose metrics stay on loopback.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	_ "github.com/statusgate/statusgate/internal/sim"
)

// repoRoot is the checkout's root, seen from this package's directory.
const repoRoot = ".."

// maxReadme is the README's size limit in bytes: a front page, with the
// rest in docs/.
const maxReadme = 15 * 1024

// docFiles are README.md and every page under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, pages...)
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	fence     = regexp.MustCompile("(?ms)^```.*?^```")
)

// anchors are the GitHub anchors of a Markdown page's headings.
func anchors(text string) map[string]bool {
	text = fence.ReplaceAllString(text, "")
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(text, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f && r != '→' && r != '·':
				b.WriteRune(r)
			}
		}
		a := b.String()
		for n := 1; out[a]; n++ { // GitHub numbers repeated headings
			a = b.String() + "-" + string(rune('0'+n))
		}
		out[a] = true
	}
	return out
}

// TestDocLinks checks every relative link of README.md and docs/*.md: the
// file exists, and a #fragment names a heading of the Markdown page it
// points to.
func TestDocLinks(t *testing.T) {
	pageAnchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := pageAnchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		pageAnchors[path] = anchors(string(b))
		return pageAnchors[path]
	}
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(b), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, frag, _ := strings.Cut(link, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: %v", file, link, err)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[frag] {
				t.Errorf("%s: link %q: %s has no heading with that anchor", file, link, path)
			}
		}
	}
}

// TestReadme checks that README.md stays a front page, and that CI runs the
// test command it gives.
func TestReadme(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(readme) > maxReadme {
		t.Errorf("README.md is %d bytes, more than %d: move the details to docs/", len(readme), maxReadme)
	}
	const testCmd = "go test ./... ./test/... ./cmd/statusgate-build/..."
	if !strings.Contains(string(readme), "\n"+testCmd+" ") {
		t.Errorf("README.md does not give the test command %q", testCmd)
	}
	ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "packages=(./... ./test/... ./cmd/statusgate-build/...)") ||
		!strings.Contains(string(ci), `go test "${packages[@]}"`) {
		t.Errorf(".ci/run does not run the README's test command %q", testCmd)
	}
}

// TestCaddyfileExample adapts and validates the demo's config (the README's
// first command runs it) without starting it, and checks that its metrics
// site listens on loopback only.
func TestCaddyfileExample(t *testing.T) {
	body, err := os.ReadFile(filepath.Join(repoRoot, "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	adapted, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(body, map[string]any{"filename": "Caddyfile.example"})
	if err != nil {
		t.Fatalf("adapting Caddyfile.example: %v", err)
	}
	for _, w := range warnings {
		t.Errorf("adapting Caddyfile.example: warning %s:%d: %s", w.File, w.Line, w.Message)
	}

	var cfg caddy.Config
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatal(err)
	}
	// The site with the metrics handler binds 127.0.0.1 only.
	var http struct {
		Servers map[string]struct {
			Listen []string `json:"listen"`
			Routes []any    `json:"routes"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(cfg.AppsRaw["http"], &http); err != nil {
		t.Fatal(err)
	}
	found := false
	for name, srv := range http.Servers {
		routes, _ := json.Marshal(srv.Routes)
		if !strings.Contains(string(routes), `"handler":"metrics"`) {
			continue
		}
		found = true
		for _, l := range srv.Listen {
			if !strings.HasPrefix(l, "127.0.0.1:") {
				t.Errorf("server %s serves the metrics on %q, want 127.0.0.1 only", name, l)
			}
		}
	}
	if !found {
		t.Error("Caddyfile.example serves no metrics (the tour in docs/demo.md curls them)")
	}

	// Validate provisions every module (the gateway, the sim, the metrics
	// handler) and cleans up; it opens no listener. It comes last because
	// provisioning clears the config's raw JSON. The widget site's root is
	// relative to the repository's root, where the demo runs.
	wd, _ := os.Getwd()
	if err := os.Chdir(repoRoot); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	if err := caddy.Validate(&cfg); err != nil {
		t.Fatalf("Caddyfile.example does not validate: %v", err)
	}
}
