package docs

// The documentation and the demo's config, checked like code: every relative
// link of README.md and docs/ resolves (file and heading), the README stays a
// front page, CI runs the README's test command, and Caddyfile.example is a
// valid config whose metrics stay on loopback.

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
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	// The modules the docs' Caddyfiles use besides Caddy's and the
	// gateway's: caddy-ratelimit and Redis storage (docs/cluster.md).
	_ "github.com/mholt/caddy-ratelimit"
	_ "github.com/pberkel/caddy-storage-redis"

	_ "github.com/statusgate/statusgate/internal/sim"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// maxReadme is the README's size limit in bytes: a front page, with the
// rest in docs/.
const maxReadme = 15 * 1024

// docFiles are README.md and every page under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(RepoRoot, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	return append([]string{filepath.Join(RepoRoot, "README.md")}, pages...)
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
	readme, err := os.ReadFile(filepath.Join(RepoRoot, "README.md"))
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
	ci, err := os.ReadFile(filepath.Join(RepoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "packages=(./... ./test/... ./cmd/statusgate-build/...)") ||
		!strings.Contains(string(ci), `go test "${packages[@]}"`) {
		t.Errorf(".ci/run does not run the README's test command %q", testCmd)
	}
}

// TestCaddyfileExample adapts and validates the demo's config (the README's
// first command runs it) without starting it, checks its routes as a start
// would (startDocConfig), and checks that every site of
// it listens on loopback only, the metrics' among them, and its admin API
// too, at a port of its own. (test/demo runs it and reloads it.)
func TestCaddyfileExample(t *testing.T) {
	body, err := os.ReadFile(filepath.Join(RepoRoot, "Caddyfile.example"))
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
	// The admin API, which `caddy reload --config Caddyfile.example` finds
	// in the file, on loopback at a port of its own: never another Caddy's
	// (localhost:2019 is every Caddy's unless told otherwise).
	if cfg.Admin == nil || cfg.Admin.Disabled || !strings.HasPrefix(cfg.Admin.Listen, "127.0.0.1:") || strings.HasSuffix(cfg.Admin.Listen, ":2019") {
		t.Errorf("Caddyfile.example's admin API is %+v, want it on 127.0.0.1 at a port other than 2019", cfg.Admin)
	}
	// Every site binds 127.0.0.1 only: the demo's keys are published, and
	// its metrics name every key. The metrics have a site of their own.
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
		for _, l := range srv.Listen {
			if !strings.HasPrefix(l, "127.0.0.1:") {
				t.Errorf("server %s listens on %q, want 127.0.0.1 only", name, l)
			}
		}
		routes, _ := json.Marshal(srv.Routes)
		found = found || strings.Contains(string(routes), `"handler":"metrics"`)
	}
	if !found {
		t.Error("Caddyfile.example serves no metrics (the tour in docs/demo.md curls them)")
	}

	// Validate provisions every module (the gateway, the sim, the metrics
	// handler) and cleans up; it opens no listener. It comes last because
	// provisioning clears the config's raw JSON. The widget site's root is
	// relative to the repository's root, where the demo runs.
	wd, _ := os.Getwd()
	if err := os.Chdir(RepoRoot); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	if err := caddy.Validate(&cfg); err != nil {
		t.Fatalf("Caddyfile.example does not validate: %v", err)
	}
	startDocConfig(t, "Caddyfile.example", body, adapted)
}

var (
	caddyfileBlock = regexp.MustCompile("(?ms)^```caddyfile\n(.*?)^```")
	envPlaceholder = regexp.MustCompile(`\{(?:env\.|\$)([A-Za-z_][A-Za-z0-9_]*)(?::[^}]*)?\}`)
)

// TestDocCaddyfiles checks every ```caddyfile block of README.md and
// docs/*.md: `caddy fmt` leaves it as it is, and it adapts without a
// warning, as a whole Caddyfile or, for a part of a site (a directive and
// its block), inside one. Blocks that show a syntax, with <…> and |, are
// fenced as text. With the environment variables it names set (as the
// page says they must be), a block without {file.*} placeholders also
// validates: every module provisions, as `caddy validate` would (but for a
// storage, which connects to its server when provisioned), and it starts
// without a route mistake (startDocConfig).
func TestDocCaddyfiles(t *testing.T) {
	n := 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range caddyfileBlock.FindAllSubmatchIndex(b, -1) {
			n++
			block := b[m[2]:m[3]]
			where := fmt.Sprintf("%s:%d", filepath.Base(file), bytes.Count(b[:m[0]], []byte("\n"))+1)
			t.Run(where, func(t *testing.T) { checkDocCaddyfile(t, where, block) })
		}
	}
	if n < 10 {
		t.Errorf("found %d caddyfile blocks in README.md and docs/, want at least 10", n)
	}
}

func checkDocCaddyfile(t *testing.T, where string, block []byte) {
	if formatted := caddyfile.Format(block); !bytes.Equal(formatted, block) {
		t.Errorf("%s: not as `caddy fmt` writes it:\n%s\nwant:\n%s", where, block, formatted)
	}
	for _, m := range envPlaceholder.FindAllSubmatch(block, -1) {
		t.Setenv(string(m[1]), "doc-test-key-"+strings.ToLower(string(m[1])))
	}
	adapter := caddyconfig.GetAdapter("caddyfile")
	adapted, warnings, err := adapter.Adapt(block, map[string]any{"filename": where})
	if err != nil {
		// A part of a site: the same lines inside a site block.
		site := "example.com {\n\t" + strings.ReplaceAll(strings.TrimSpace(string(block)), "\n", "\n\t") + "\n}\n"
		var errSite error
		adapted, warnings, errSite = adapter.Adapt([]byte(site), map[string]any{"filename": where})
		if errSite != nil {
			t.Fatalf("%s: does not adapt as a Caddyfile (%v) nor inside a site (%v):\n%s", where, err, errSite, block)
		}
	}
	for _, w := range warnings {
		t.Errorf("%s: warning at line %d: %s", where, w.Line, w.Message)
	}
	switch {
	case bytes.Contains(block, []byte("{file.")):
		t.Logf("%s: not validated: its key is read from a file", where)
		return
	case regexp.MustCompile(`(?m)^\s*storage `).Match(block):
		t.Logf("%s: not validated: its storage connects to another machine when provisioned", where)
		return
	}
	var cfg caddy.Config
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&cfg); err != nil {
		t.Errorf("%s: does not validate: %v\n%s", where, err, block)
		return
	}
	startDocConfig(t, where, block, adapted)
}
