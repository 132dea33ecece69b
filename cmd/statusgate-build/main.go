// Command statusgate-build builds a production Caddy binary with statusgate
// in it, from a build manifest in the JSON shape of xcaddy's Builder type
// (xcaddy.json at the repository root):
//
//	go run ./cmd/statusgate-build -manifest xcaddy.json -o caddy
//
// It is `xcaddy build` driven by a file instead of flags, so that the exact
// Caddy version, plugins and replacements of a release are reviewed and
// versioned with the code. The demo backend (statusgate_sim) is not in it;
// `go build ./cmd/caddy` is the binary with the demo.
//
// Relative replacement paths ("." for this checkout) are taken relative to
// the manifest's folder and made absolute, because xcaddy runs `go` in a
// temporary folder. Every version must be exact: the manifest is a pinned
// release, and a Go module proxy that does not list versions cannot
// resolve "latest" anyway.
//
// With a local replacement, xcaddy's last `go get` still asks the proxy
// whether the plugin's package path (…/caddymodule) is a module of its own.
// A proxy that answers 404 lets Go move on to "direct", which then fails
// for an unpublished repository; a proxy that refuses (403) fails the
// build at once. Unless -keep-goproxy is given, the build therefore runs
// with GOPROXY set to the configured proxies joined by "|" and ending in
// "off": every pinned module still comes from the proxy, and a lookup the
// proxy cannot answer ends as "not found", which lets Go take the local
// replacement.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/caddyserver/xcaddy"
)

func main() {
	manifest := flag.String("manifest", "xcaddy.json", "build manifest, in the JSON shape of xcaddy's Builder")
	out := flag.String("o", "caddy", "path of the binary to write")
	keepProxy := flag.Bool("keep-goproxy", false, "build with GOPROXY as configured (see the package doc)")
	flag.Parse()
	if flag.NArg() > 0 {
		log.Fatalf("unexpected arguments: %v", flag.Args())
	}

	b, err := loadManifest(*manifest)
	if err != nil {
		log.Fatal(err)
	}
	if !*keepProxy && hasLocalReplacement(b) {
		current, err := exec.Command("go", "env", "GOPROXY").Output()
		if err != nil {
			log.Fatalf("go env GOPROXY: %v", err)
		}
		if p, ok := tolerantGoproxy(strings.TrimSpace(string(current))); ok {
			log.Printf("[INFO] GOPROXY=%s for this build", p)
			if err := os.Setenv("GOPROXY", p); err != nil {
				log.Fatal(err)
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	if err := b.Build(ctx, *out); err != nil {
		log.Fatalf("build failed: %v", err)
	}
	log.Printf("built %s in %s", *out, time.Since(start).Round(time.Second))
}

// exactVersion is a semantic version tag or a Go pseudo-version: something
// `go get` can fetch without asking the proxy for a list.
var exactVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// loadManifest reads the manifest strictly (an unknown member is a typo,
// not something to ignore), resolves relative replacement paths against
// the manifest's folder, and checks that every version is pinned.
func loadManifest(path string) (xcaddy.Builder, error) {
	var b xcaddy.Builder
	data, err := os.ReadFile(path)
	if err != nil {
		return b, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return b, fmt.Errorf("%s: %w", path, err)
	}
	if dec.More() {
		return b, fmt.Errorf("%s: more than one JSON value", path)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return b, err
	}

	var problems []error
	if !exactVersion.MatchString(b.CaddyVersion) {
		problems = append(problems, fmt.Errorf("caddy_version %q is not an exact version", b.CaddyVersion))
	}
	for i, r := range b.Replacements {
		if r.Old == "" || r.New == "" {
			problems = append(problems, fmt.Errorf("replacements[%d] needs both old and new", i))
			continue
		}
		if isLocalPath(string(r.New)) && !filepath.IsAbs(string(r.New)) {
			b.Replacements[i].New = xcaddy.ReplacementPath(filepath.Join(dir, string(r.New)))
		}
	}
	for i, p := range b.Plugins {
		switch {
		case p.PackagePath == "":
			problems = append(problems, fmt.Errorf("plugins[%d] has no module_path", i))
		case p.Version != "" && !exactVersion.MatchString(p.Version):
			problems = append(problems, fmt.Errorf("plugin %s: version %q is not exact", p.PackagePath, p.Version))
		case p.Version == "" && !replaced(b.Replacements, p.PackagePath):
			problems = append(problems, fmt.Errorf("plugin %s has neither a version nor a replacement", p.PackagePath))
		}
	}
	if len(problems) > 0 {
		return b, fmt.Errorf("%s: %w", path, errors.Join(problems...))
	}
	return b, nil
}

// isLocalPath tells a directory replacement from a module one
// ("example.com/fork v1.2.3"), by the rule go.mod uses.
func isLocalPath(p string) bool {
	return p == "." || p == ".." || strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") ||
		filepath.IsAbs(p) || strings.HasPrefix(p, `.\`) || strings.HasPrefix(p, `..\`)
}

// replaced reports whether xcaddy will take the plugin from a replacement
// instead of running `go get` for it: by its own rule, when the package
// lies below a replaced module path (a bare module path, not one with a
// version, and not the module root itself).
func replaced(repls []xcaddy.Replace, pkg string) bool {
	for _, r := range repls {
		if strings.HasPrefix(pkg, string(r.Old)+"/") {
			return true
		}
	}
	return false
}

func hasLocalReplacement(b xcaddy.Builder) bool {
	for _, r := range b.Replacements {
		if isLocalPath(string(r.New)) {
			return true
		}
	}
	return false
}

// tolerantGoproxy turns a GOPROXY list into one where any failed lookup
// falls through to "off" (see the package doc). It reports false when the
// list names no proxy to keep (only direct or off).
func tolerantGoproxy(goproxy string) (string, bool) {
	var proxies []string
	for _, p := range strings.FieldsFunc(goproxy, func(r rune) bool { return r == ',' || r == '|' }) {
		if p = strings.TrimSpace(p); p != "" && p != "direct" && p != "off" {
			proxies = append(proxies, p)
		}
	}
	if len(proxies) == 0 {
		return "", false
	}
	return strings.Join(append(proxies, "off"), "|"), true
}
