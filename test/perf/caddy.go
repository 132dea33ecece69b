package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/statusgate/statusgate/test/internal/harness"
)

// gateway is one Caddy process: a site on a loopback port that proxies to the
// backend, with or without statusgate in front, and an admin endpoint for pprof.
type gateway struct {
	*harness.Process
	adminPort int
}

// caddyfile is the config of one gateway. Both gateways get the same global
// options and site; the plain one's handler is reverse_proxy, statusgate's
// statusgate declaring the same backend.
func caddyfile(adminPort, port int, backend string, statusgateKey string) string {
	handler := "\treverse_proxy " + backend + "\n"
	if statusgateKey != "" {
		// Coalescing and the micro-cache off: the harness measures what each
		// request costs the gateway, every one of them a trip to the backend
		// (with them on, most would be answered from memory). The per-client
		// limit off: the eight workers, all from 127.0.0.1, stand for eight
		// clients.
		handler = "\tstatusgate " + backend + " {\n\t\tkey " + statusgateKey + "\n\t\tcoalesce off\n\t\tcache status off\n\t\tmax_per_client off\n\t}\n"
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
%s}
`, adminPort, port, handler)
}

// startGateway starts caddy run on a new gateway config. It returns once
// the site answers.
func startGateway(ctx context.Context, bin, dir, name, backend, key string) (*gateway, error) {
	port, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	p, err := harness.Start(ctx, bin, dir, name, port, caddyfile(adminPort, port, backend, key))
	if err != nil {
		return nil, err
	}
	return &gateway{Process: p, adminPort: adminPort}, nil
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
