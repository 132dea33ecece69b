package docs

// The README's build command for a checkout, run as written.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// readmeBuildMarker picks the README's checkout build command out of its
// ```sh blocks: the one that replaces the module by the checkout.
const readmeBuildMarker = "--replace github.com/statusgate/statusgate=."

var shBlock = regexp.MustCompile("(?ms)^```sh\n(.*?)^```")

// readmeBuildCommand is the ```sh block of README.md that builds from a
// checkout, as written.
func readmeBuildCommand(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(RepoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, m := range shBlock.FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(m[1], readmeBuildMarker) {
			found = append(found, m[1])
		}
	}
	if len(found) != 1 {
		t.Fatalf("README.md has %d ```sh blocks with %q, want the one build command for a checkout", len(found), readmeBuildMarker)
	}
	return found[0]
}

// TestReadmeBuild runs the README's build command for a checkout, as
// written, in a copy of this checkout (so that it starts from a clean tree
// and writes its ./caddy there), and checks that the binary has statusgate
// and caddy-ratelimit. The command forbids fetching statusgate's
// repository (GOVCS) and lets each proxy fall through to the next, so it
// builds where the module proxy does not have statusgate, as here, whatever
// GOPROXY is.
//
// The build takes minutes (all of Caddy, with xcaddy's flags), so its
// binary is kept in the user's cache directory under a hash of the command,
// the Go version and every file the build reads (the gateway's module,
// go.work and the pinned xcaddy's go.mod and go.sum): a run with nothing
// changed checks the kept binary instead of building again, and two runs
// at once (two checkouts, CI's runs) share it. -short skips the test.
func TestReadmeBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy with xcaddy, which takes minutes")
	}
	command := readmeBuildCommand(t)
	key := buildInputsHash(t, command)
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory for the built binary: %v", err)
	}
	kept := filepath.Join(cache, "statusgate", "readme-build", key, "caddy")
	if _, err := os.Stat(kept); err == nil {
		t.Logf("the README's command built %s from these sources before; checking that binary", kept)
		checkModules(t, kept)
		return
	}

	dir := t.TempDir()
	copyCheckout(t, RepoRoot, dir)
	// The build takes what the machine gives it, up to the test binary's
	// own deadline (go test's -timeout): it is stopped half a minute before
	// it, so that a machine too busy fails here, with the command's output,
	// rather than in go test's bare panic.
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-30*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", command)
	cmd.Dir = dir
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOWORK=") })
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's build command failed after %s: %v\n%s\n%s", time.Since(start).Round(time.Second), err, command, out)
	}
	t.Logf("the README's build command took %s", time.Since(start).Round(time.Second))
	built := filepath.Join(dir, "caddy")
	checkModules(t, built)

	if err := os.MkdirAll(filepath.Dir(kept), 0o755); err != nil {
		t.Fatal(err)
	}
	// Renamed into place whole, so that a run beside this one sees the
	// binary complete or not at all.
	tmp := kept + ".tmp" + filepath.Base(dir)
	if err := copyFile(built, tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, kept); err != nil {
		t.Fatal(err)
	}
}

// checkModules runs `caddy list-modules` of bin and wants statusgate and
// caddy-ratelimit in it.
func checkModules(t *testing.T, bin string) {
	t.Helper()
	out, err := exec.Command(bin, "list-modules").Output()
	if err != nil {
		t.Fatalf("%s list-modules: %v", bin, err)
	}
	modules := map[string]bool{}
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		modules[strings.TrimSpace(sc.Text())] = true
	}
	for _, m := range []string{"http.handlers.statusgate", "http.handlers.rate_limit"} {
		if !modules[m] {
			t.Errorf("caddy list-modules does not name %s:\n%s", m, out)
		}
	}
}

// buildInputsHash hashes what the README's build reads: the command, the
// Go version, and the checkout's files outside test/ but for tests and
// Markdown (the gateway's module, go.work, and cmd/statusgate-build's
// go.mod and go.sum, which pin xcaddy).
func buildInputsHash(t *testing.T, command string) string {
	t.Helper()
	h := sha256.New()
	goVersion, err := exec.Command("go", "version").Output()
	if err != nil {
		t.Fatalf("go version: %v", err)
	}
	h.Write([]byte(command))
	h.Write(goVersion)
	root, _ := filepath.Abs(RepoRoot)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "test" || rel == "examples" || rel == "docs" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, ".md") || rel == "caddy" || strings.Contains(rel, "testdata") {
			return nil
		}
		if !strings.HasSuffix(name, ".go") && !strings.HasPrefix(name, "go.") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		h.Write([]byte(rel + "\x00"))
		h.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// copyCheckout copies the checkout at from into to, without .git and
// without a built ./caddy.
func copyCheckout(t *testing.T, from, to string) {
	t.Helper()
	root, _ := filepath.Abs(from)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == ".git" || rel == "caddy" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return copyFile(path, target, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copying the checkout: %v", err)
	}
}

func copyFile(from, to string, perm fs.FileMode) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// TestUsersBuildRequiresNoPlugins: the module users build in requires
// neither caddy-ratelimit nor caddy-storage-redis, nor anything that
// requires them: this repository's Caddy (cmd/caddy), which compiles them
// in with the demo backend, is a module of its own, so that a user's xcaddy
// build gets them only with --with.
func TestUsersBuildRequiresNoPlugins(t *testing.T) {
	cmd := exec.Command("go", "list", "-m", "all")
	cmd.Dir = RepoRoot
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOWORK=") }), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	for _, plugin := range []string{"github.com/mholt/caddy-ratelimit", "github.com/pberkel/caddy-storage-redis"} {
		if regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(plugin) + ` `).Match(out) {
			t.Errorf("the module graph of github.com/statusgate/statusgate has %s", plugin)
		}
	}
}
