package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// buildCaddy builds ./cmd/caddy of the module at repo into bin, unless bin is
// already newer than every Go source, go.mod and go.sum of the module outside
// test/. It reports what it did.
func buildCaddy(repo, bin string, force bool) (string, error) {
	if !force {
		if fi, err := os.Stat(bin); err == nil {
			newest, src, err := newestSource(repo)
			if err != nil {
				return "", err
			}
			if fi.ModTime().After(newest) {
				return "reused " + bin + " (newer than the newest source, " + src + ")", nil
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
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

// newestSource is the latest modification time among the files a build of
// cmd/caddy can depend on: non-test .go files outside test/, go.mod and go.sum.
func newestSource(repo string) (time.Time, string, error) {
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

// gateway is one Caddy process: a site on a loopback port that proxies to the
// backend, with or without statusgate in front, and an admin endpoint for pprof.
type gateway struct {
	port      int
	adminPort int
	cmd       *exec.Cmd
	exited    chan struct{}
	logPath   string
}

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// caddyfile is the config of one gateway. Both gateways get the same global
// options and site; only the statusgate block differs.
func caddyfile(adminPort, port int, backend string, statusgateKey string) string {
	var sg string
	if statusgateKey != "" {
		// Coalescing and the micro-cache off: the harness measures what each
		// request costs the gateway, every one of them a trip to the backend
		// (with them on, most would be answered from memory).
		sg = "\tstatusgate {\n\t\tkey " + statusgateKey + "\n\t\tcoalesce off\n\t\tcache status off\n\t}\n"
	}
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	auto_https off
	persist_config off
	grace_period 1s
	log {
		level WARN
	}
}

http://:%d {
	bind 127.0.0.1
%s	reverse_proxy %s
}
`, adminPort, port, sg, backend)
}

// startGateway writes the Caddyfile into dir and starts caddy run on it. It
// returns once the site answers.
func startGateway(ctx context.Context, bin, dir, name, backend, key string) (*gateway, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		return nil, err
	}
	g := &gateway{port: port, adminPort: adminPort, exited: make(chan struct{})}
	conf := filepath.Join(dir, name+".Caddyfile")
	if err := os.WriteFile(conf, []byte(caddyfile(adminPort, port, backend, key)), 0o600); err != nil {
		return nil, err
	}
	g.logPath = filepath.Join(dir, name+".log")
	logf, err := os.Create(g.logPath)
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "caddy-home")
	g.cmd = exec.Command(bin, "run", "--config", conf, "--adapter", "caddyfile")
	g.cmd.Stdout, g.cmd.Stderr = logf, logf
	g.cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home)
	// Caddy goes when the harness goes, even if it dies without cleaning up
	// (killed, or its output piped into head).
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := g.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		g.cmd.Wait()
		logf.Close()
		close(g.exited)
	}()
	if err := g.waitReady(ctx); err != nil {
		g.stop()
		return nil, fmt.Errorf("%s did not come up: %v; its log:\n%s", name, err, tail(g.logPath, 20))
	}
	return g, nil
}

func (g *gateway) base() string { return "http://127.0.0.1:" + strconv.Itoa(g.port) }

// waitReady polls the site's port until it accepts connections, which it does
// once Caddy has loaded the config.
func (g *gateway) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		select {
		case <-g.exited:
			return errors.New("caddy exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(g.port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
	}
}

// stop ends the process gracefully, or kills it after a few seconds.
func (g *gateway) stop() {
	if g == nil || g.cmd.Process == nil {
		return
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(5 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
}

// procKB reads one "<field>: <n> kB" line of a /proc file such as
// /proc/<pid>/status or /proc/meminfo.
func procKB(path, field string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, path)
}

// vmKB reads a Vm* field of a process's /proc/<pid>/status.
func vmKB(pid int, field string) (int64, error) {
	return procKB("/proc/"+strconv.Itoa(pid)+"/status", field)
}

// adminGet fetches a path of the gateway's admin endpoint into file.
func (g *gateway) adminGet(path, file string) error {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(g.adminPort) + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// pprofTop runs go tool pprof -top on a profile and returns its first lines.
func pprofTop(profile string, lines int, extra ...string) string {
	args := append([]string{"tool", "pprof", "-top", "-nodecount=" + strconv.Itoa(lines)}, extra...)
	out, err := exec.Command("go", append(args, profile)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("go tool pprof: %v\n%s", err, out)
	}
	return string(out)
}

// grepLines returns the first n lines of s that contain substr.
func grepLines(s, substr string, n int) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, substr) && len(out) < n {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
