package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FreePort asks the kernel for an unused loopback port.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts asks the kernel for n different unused loopback ports: it holds
// each until it has them all. A port is free when it is handed out; another
// process could take it before the caller listens on it, which the kernel's
// random choice among tens of thousands of ports makes unlikely.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("no free loopback port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Process is one `caddy run` child process.
type Process struct {
	Port    int    // the loopback port Start waited for
	LogPath string // Caddy's stdout and stderr
	Cmd     *exec.Cmd
	exited  chan struct{}
}

// Start writes caddyfile into dir as <name>.Caddyfile, starts bin on it and
// returns once 127.0.0.1:port accepts connections, which it does once Caddy
// has loaded the config.
func Start(ctx context.Context, bin, dir, name string, port int, caddyfile string) (*Process, error) {
	p := &Process{Port: port, exited: make(chan struct{})}
	conf := filepath.Join(dir, name+".Caddyfile")
	if err := os.WriteFile(conf, []byte(caddyfile), 0o600); err != nil {
		return nil, err
	}
	p.LogPath = filepath.Join(dir, name+".log")
	logf, err := os.Create(p.LogPath)
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "caddy-home")
	p.Cmd = exec.Command(bin, "run", "--config", conf, "--adapter", "caddyfile")
	p.Cmd.Stdout, p.Cmd.Stderr = logf, logf
	p.Cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home)
	// Caddy goes when the harness goes, even if it dies without cleaning up
	// (killed, or its output piped into head).
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := p.Cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		p.Cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	if err := p.waitReady(ctx); err != nil {
		p.Stop()
		return nil, fmt.Errorf("%s did not come up: %v; its log:\n%s", name, err, Tail(p.LogPath, 20))
	}
	return p, nil
}

// Base is the URL of the site on Port.
func (p *Process) Base() string { return "http://127.0.0.1:" + strconv.Itoa(p.Port) }

// Pid is the process id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

func (p *Process) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		select {
		case <-p.exited:
			return errors.New("caddy exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p.Port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
	}
}

// Stop ends the process gracefully, or kills it after a few seconds.
func (p *Process) Stop() { p.StopWithin(5 * time.Second) }

// StopWithin ends the process gracefully (SIGTERM), or kills it (SIGKILL)
// if it has not exited within d, and reports whether it had to kill it. A
// test of what a graceful stop leaves behind gives it fixture.Patience and
// fails if it was killed: a busy machine can make a graceful stop slower
// than Stop's few seconds, and what the kill left would blame the code.
func (p *Process) StopWithin(d time.Duration) (killed bool) {
	if p == nil || p.Cmd.Process == nil {
		return false
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return false
	case <-time.After(d):
		_ = p.Cmd.Process.Kill()
		<-p.exited
		return true
	}
}

// Tail returns the last n lines of a file, for error messages.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ListeningTCP counts the listening TCP sockets by local port, from Linux's
// /proc/net/tcp and tcp6; known is false where they cannot be read.
// A config load leaves the old config's socket listening beside the new one
// for a moment (Caddy listens with SO_REUSEPORT on Linux), and a connection
// the kernel hands it then is reset when it closes: a test that reloads
// waits for the count to drop before it sends.
func ListeningTCP() (byPort map[uint]int, known bool) {
	byPort = map[uint]int{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		known = true
		lines := strings.Split(string(b), "\n")
		for _, line := range lines[1:] {
			// sl local_address rem_address st ...; st 0A is LISTEN
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if port, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil {
				byPort[uint(port)]++
			}
		}
	}
	return byPort, known
}
