package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestLayoutMatchesTheTree: docs/development.md's map of the gateway's
// files names every production file of caddymodule and every package under
// caddymodule/internal and caddymodule/internal/guard's files, and nothing
// the tree no longer has, so that the map a newcomer reads first is the
// house as it is.
func TestLayoutMatchesTheTree(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(RepoRoot, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(page), "caddymodule/              the gateway")
	end := strings.Index(string(page), "\ninternal/                 shared by the gateway")
	if start < 0 || end < start {
		t.Fatal("docs/development.md has no map of caddymodule/ (the Layout section's block)")
	}
	gateway, guardPart := string(page[start:end]), ""
	if i := strings.Index(gateway, "    guard/"); i >= 0 {
		j := strings.Index(gateway[i:], "\n    cors/")
		if j < 0 {
			t.Fatal("the map's guard/ entry is not followed by cors/")
		}
		gateway, guardPart = gateway[:i]+gateway[i+j:], gateway[i:i+j]
	}
	named := func(text string) map[string]bool {
		m := map[string]bool{}
		for _, f := range regexp.MustCompile(`\b[a-z0-9_]+\.go\b`).FindAllString(text, -1) {
			m[f] = true
		}
		return m
	}
	check := func(dir, text string) {
		t.Helper()
		files, _ := filepath.Glob(filepath.Join(RepoRoot, dir, "*.go"))
		have := map[string]bool{}
		for _, f := range files {
			base := filepath.Base(f)
			if !strings.HasSuffix(base, "_test.go") {
				have[base] = true
			}
		}
		inMap := named(text)
		for f := range have {
			if !inMap[f] {
				t.Errorf("docs/development.md's map does not name %s/%s", dir, f)
			}
		}
		for f := range inMap {
			if !have[f] && !strings.HasSuffix(f, "_test.go") {
				if _, err := os.Stat(filepath.Join(RepoRoot, dir, f)); err != nil {
					t.Errorf("docs/development.md's map names %s/%s, which the tree does not have", dir, f)
				}
			}
		}
	}
	// The lines of caddymodule's own sub-packages (jsonfilter/, apikey/)
	// name their files, not the gateway's.
	var own []string
	for _, line := range strings.Split(gateway, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasSuffix(f[0], "/") && f[0] != "caddymodule/" {
			continue
		}
		own = append(own, line)
	}
	check("caddymodule", strings.Join(own, "\n"))
	check("caddymodule/internal/guard", guardPart)
	dirs, err := os.ReadDir(filepath.Join(RepoRoot, "caddymodule", "internal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && !regexp.MustCompile(`(?m)^    (\S+/\s+)*`+regexp.QuoteMeta(d.Name())+`/`).MatchString(string(page[start:end])) {
			t.Errorf("docs/development.md's map does not name caddymodule/internal/%s/", d.Name())
		}
	}
}
