// Package harness holds what the load harnesses (test/perf, test/flood) and
// the tests that run Caddy share: building this repository's Caddy, running
// it as a child process on loopback ports, the listening sockets a reload
// leaves, and latency percentiles. The harnesses are separate commands; this
// keeps one copy of their plumbing.
package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Build builds ./cmd/caddy of the module at repo into bin, unless bin is
// already newer than every Go source, go.mod and go.sum of the module outside
// test/. It reports what it did.
//
// It holds a lock on bin (bin.lock, flock) from the check to the rename, so
// that test packages that run at once and want the same binary
// (CheckoutBinary) build it once: the first builds, the others wait and then
// find it fresh. A process that runs the old binary keeps it: the new one
// takes its name by a rename.
func Build(repo, bin string, force bool) (string, error) {
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close() // and with it the lock
	waited := time.Now()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	queued := ""
	if d := time.Since(waited); d >= time.Second {
		queued = fmt.Sprintf(" after waiting %s for another build of it", d.Round(time.Second))
	}
	if !force {
		if fi, err := os.Stat(bin); err == nil {
			newest, src, err := NewestSource(repo)
			if err != nil {
				return "", err
			}
			if fi.ModTime().After(newest) {
				return "reused " + bin + " (newer than the newest source, " + src + ")" + queued, nil
			}
		}
	}
	start := time.Now()
	tmp := bin + ".tmp"
	cmd := exec.Command("go", "build", "-o", tmp, "./cmd/caddy")
	cmd.Dir = repo
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/caddy: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return fmt.Sprintf("built %s in %s", bin, time.Since(start).Round(time.Second)), nil
}

// CheckoutBinary is where the tests keep their build of the checkout at
// repo, for Build: one per checkout, kept between runs and shared by every
// test package and harness that runs this checkout's caddy as a process
// (test/reload, test/demo, test/cluster, test/netbench). Build's lock makes
// packages that run at once build it once.
func CheckoutBinary(repo string) string {
	sum := sha256.Sum256([]byte(repo))
	return filepath.Join(os.TempDir(), "statusgate-caddy-"+hex.EncodeToString(sum[:6]), "caddy")
}

// NewestSource is the latest modification time among the files a build of
// cmd/caddy can depend on: non-test .go files outside test/, go.mod and go.sum.
func NewestSource(repo string) (time.Time, string, error) {
	var newest time.Time
	var which string
	err := filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, path)
		if d.IsDir() {
			if rel == ".git" || rel == "test" || (rel != "." && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) || rel == "go.mod" || rel == "go.sum" {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if fi.ModTime().After(newest) {
				newest, which = fi.ModTime(), rel
			}
		}
		return nil
	})
	return newest, which, err
}
