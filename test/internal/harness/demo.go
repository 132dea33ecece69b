package harness

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
)

// DemoPortsVar is the environment variable Caddyfile.example reads its
// ports' first two digits from ({$STATUSGATE_DEMO_PORTS:80}80 is the
// gateway's port): docs/demo.md, "Moving the demo".
const DemoPortsVar = "STATUSGATE_DEMO_PORTS"

// The last two digits of each of the demo's ports.
const (
	DemoGateway  = 80
	DemoBackend  = 81
	DemoWidget   = 82
	DemoMetrics  = 83
	DemoAdmin    = 84
	DemoLobby    = 85
	DemoCreative = 86
)

// DemoPort is the demo's port of suffix (DemoGateway, ...) when
// STATUSGATE_DEMO_PORTS is prefix.
func DemoPort(prefix, suffix int) int { return prefix*100 + suffix }

// FreeDemoPrefix returns a value of STATUSGATE_DEMO_PORTS other than the
// default 80 whose seven ports are all free on loopback when it is chosen:
// it holds each of them until it has them all, as FreePorts does. Another
// process could take one before the demo listens on it; the prefixes are
// tried in a random order so that two runs at once rarely meet.
func FreeDemoPrefix() (int, error) {
	for _, prefix := range rand.Perm(55) {
		prefix += 10 // 1080 to 6486: every port a valid one
		if prefix == 80 || demoPortsFree(prefix) != nil {
			continue
		}
		return prefix, nil
	}
	return 0, fmt.Errorf("no two digits PP for which the ports PP80 to PP86 are all free on loopback")
}

func demoPortsFree(prefix int) error {
	for suffix := DemoGateway; suffix <= DemoCreative; suffix++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(DemoPort(prefix, suffix))))
		if err != nil {
			return err
		}
		defer l.Close()
	}
	return nil
}

// Demo is Caddyfile.example run as the README's first command runs it: a
// caddy process of this checkout's build, from the repository's root (the
// widget's files are found from there).
type Demo struct {
	Bin, Repo string
	Env       []string // the process's environment, for the commands run beside it
	Gateway   int      // the gateway's port
	Log       string   // the process's output
}

// StartDemo runs `bin run --config conf` from repo with the environment
// variables env added (STATUSGATE_DEMO_PORTS among them, to move it), its
// data and config folders in dir, and returns once the gateway's index
// answers on gateway. The process is ended by stop, and dies with the test
// binary.
func StartDemo(bin, repo, dir, conf string, gateway int, env ...string) (d *Demo, stop func(), err error) {
	home := filepath.Join(dir, "caddy-home")
	d = &Demo{Bin: bin, Repo: repo, Gateway: gateway, Log: filepath.Join(dir, "demo.log"),
		Env: append(append(os.Environ(), "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home), env...)}
	logf, err := os.Create(d.Log)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, "run", "--config", conf)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = repo, d.Env, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(fixture.Patience):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	for deadline := time.Now().Add(fixture.Patience); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			return nil, nil, fmt.Errorf("the demo exited; its log:\n%s", Tail(d.Log, 30))
		default:
		}
		if r, err := http.Get("http://localhost:" + strconv.Itoa(gateway) + "/api/v1"); err == nil {
			r.Body.Close()
			return d, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("the demo did not come up on port %d; its log:\n%s", gateway, Tail(d.Log, 30))
		}
	}
}

// Caddy runs the built binary beside the demo, as `go run ./cmd/caddy` runs
// it, from the repository's root and in the demo's environment.
func (d *Demo) Caddy(args ...string) (string, error) {
	cmd := exec.Command(d.Bin, args...)
	cmd.Dir, cmd.Env = d.Repo, d.Env
	out, err := cmd.CombinedOutput()
	return string(out), err
}
