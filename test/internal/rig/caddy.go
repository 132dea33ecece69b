package rig

// The one in-process Caddy that every test of a test package shares: the ports
// it listens on, its start, and the wait that makes a config load complete.
//
// The ports are free ones, taken when the test binary starts, so that two
// runs at once (two checkouts, or two helpers on one machine) never meet:
// Caddy on Linux listens with SO_REUSEPORT, so a second Caddy on the same
// fixed port would not even fail, it would take half of the first one's
// connections. Tests use the names below, never a number.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/certmagic"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"
)

// Patience is how long a test waits for what must happen (an answer, a
// request at the backend, a line in a log) before it fails.
const Patience = fixture.Patience

var (
	// AdminPort is the admin API's (on localhost, as caddytest expects).
	// HTTPPort is the gateway's (Gateway.Caddyfile), HTTPSPort Caddy's
	// https_port, and WidgetPort the widget page's (test/widget).
	AdminPort, HTTPPort, HTTPSPort, WidgetPort = freePorts()

	// GatewayAddr is the gateway's host:port, the Host of every request.
	GatewayAddr = "localhost:" + strconv.Itoa(HTTPPort)
	// AdminURL is the admin API's base URL, without a trailing slash.
	AdminURL = "http://localhost:" + strconv.Itoa(AdminPort)
)

func freePorts() (admin, http, https, widget int) {
	p, err := harness.FreePorts(4)
	if err != nil {
		panic(fmt.Sprintf("the integration tests need four free loopback ports: %v", err))
	}
	return p[0], p[1], p[2], p[3]
}

// RunWithCaddy runs a test package's tests (m.Run) with the package's own
// in-process Caddy, and returns the exit code for TestMain's os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(RunWithCaddy(m)) }
//
// stop are what the package started for its tests and stops after them
// (test/widget's browser), before Caddy stops.
func RunWithCaddy(m *testing.M, stop ...func()) int {
	home, err := ownCaddyHome()
	if err == nil {
		err = startCaddy()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	for _, f := range stop {
		f()
	}
	_ = caddy.Stop()
	os.RemoveAll(home)
	return code
}

// ownCaddyHome gives the in-process Caddy a folder of its own for the
// config it saves on every load (autosave.json) and for its data, instead
// of the user's: two runs at once would overwrite each other's (a test
// reads the autosaved config), and a run would overwrite the developer's.
func ownCaddyHome() (string, error) {
	home, err := os.MkdirTemp("", "statusgate-test-caddy-")
	if err != nil {
		return "", err
	}
	caddy.ConfigAutosavePath = filepath.Join(home, "config", "autosave.json")
	caddy.DefaultStorage = &certmagic.FileStorage{Path: filepath.Join(home, "data")}
	// Caddy's data folder, where the adapter keeps the key of key revisions
	// (caddymodule/revision.go), for this process and the caddy processes
	// it starts.
	return home, os.Setenv("XDG_DATA_HOME", filepath.Join(home, "data-home"))
}

// startCaddy starts the in-process Caddy with only its admin API, on
// AdminPort, before caddytest would: caddytest takes any server that
// answers on its admin port for its own, and skips every test when none
// starts; here a port that is taken is an error that names it.
func startCaddy() error {
	caddytest.Default.AdminPort = AdminPort
	// A load waits for the config it replaces to stop: its shutdown_delay,
	// and on a busy machine the handlers still at work. caddytest gives it
	// 5 s, which a load after a test of reloads under load has been seen to
	// pass (TestReloadWithShutdownDelayRetiresTheOldConfig's first load,
	// once in CI): a load that must happen is waited for as long as
	// anything else that must happen.
	caddytest.Default.LoadRequestTimeout = Patience
	addr := net.JoinHostPort("localhost", strconv.Itoa(AdminPort))
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("port %d (the tests' admin API, %s) is taken by another process", AdminPort, addr)
	}
	cfg, _ := json.Marshal(map[string]any{"admin": map[string]any{"listen": addr}})
	if err := caddy.Load(cfg, true); err != nil {
		return fmt.Errorf("starting the tests' Caddy with its admin API on %s: %w", addr, err)
	}
	return nil
}

// AwaitOldListeners returns once the listeners of the config before the one
// just loaded are closed. A config load returns when the new servers listen
// and the old ones have been told to stop; on Linux both listen on the same
// port at once for a moment (SO_REUSEPORT), and until the old socket is
// closed the kernel can hand it a new connection, which the old config then
// answers, or which is reset when that socket closes. So the next request
// would be the previous test's. Caddy counts the configs that use each
// listener address, and the count is back to one a moment before the old
// socket is closed; on Linux, where that moment was seen to matter (one
// load in a few hundred on a busy machine), the kernel's list of listening
// sockets shows when it is.
//
// The admin API's listener is one of them: every load starts a new admin
// server and stops the old one in the background, and a connection the
// kernel hands the old one meanwhile is reset (a test's next /load met
// "connection reset by peer" on a busy machine).
func AwaitOldListeners(t testing.TB, adapted []byte) {
	t.Helper()
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Listen []string `json:"listen"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatalf("reading the adapted config's listeners: %v", err)
	}
	var keys [][2]string
	// port: the config's listening sockets on it
	sockets := map[uint]int{uint(AdminPort): 1}
	for _, srv := range cfg.Apps.HTTP.Servers {
		for _, l := range srv.Listen {
			na, err := caddy.ParseNetworkAddress(l)
			if err != nil {
				t.Fatalf("listen address %q: %v", l, err)
			}
			for _, a := range na.Expand() {
				keys = append(keys, [2]string{a.Network, a.JoinHostPort(0)})
				if a.Network == "tcp" {
					sockets[a.StartPort]++
				}
			}
		}
	}
	awaitListeners(t, keys, sockets)
}

// awaitListeners returns once no listener address of keys (network,
// host:port) is used by two configs and the kernel lists no more listening
// sockets on each port of sockets than its count.
func awaitListeners(t testing.TB, keys [][2]string, sockets map[uint]int) {
	t.Helper()
	for deadline := time.Now().Add(Patience); ; time.Sleep(2 * time.Millisecond) {
		open := ""
		for _, k := range keys {
			if caddy.ListenerUsage(k[0], k[1]) > 1 {
				open = k[1]
			}
		}
		if open == "" {
			listening, known := harness.ListeningTCP()
			for port, n := range sockets {
				if known && listening[port] > n {
					open = fmt.Sprintf("port %d (%d sockets)", port, listening[port])
				}
			}
		}
		if open == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the previous config's listener on %s is still open %v after the reload", open, Patience)
		}
	}
}

// AdminClient talks to Caddy's admin API (and to metrics) on a new
// connection each time: a config load replaces the admin server, which
// closes the connections the last one kept alive, and a request sent on
// one of those meets EOF. And it connects only once the old admin server's
// socket is closed: every load starts a new admin server, a refused one too
// (Caddy loads the running config again), and stops the old one in the
// background; a connection the kernel hands the old socket meanwhile is
// reset (a test's /load after a refused one met "connection reset by peer"
// on a busy machine).
var AdminClient = &http.Client{Transport: adminTransport{&http.Transport{DisableKeepAlives: true}}}

type adminTransport struct{ *http.Transport }

// RoundTrip waits until the kernel lists one listening socket on AdminPort
// (for at most Patience; the request then meets what it meets) and sends r.
func (a adminTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Port() == strconv.Itoa(AdminPort) {
		for deadline := time.Now().Add(Patience); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if listening, known := harness.ListeningTCP(); !known || listening[uint(AdminPort)] <= 1 {
				break
			}
		}
	}
	return a.Transport.RoundTrip(r)
}

// CheckoutCaddy is this checkout's caddy (cmd/caddy), built for a test that
// runs it as a process, and the checkout's root, where it runs from. The
// build is one per checkout, kept between runs (harness.CheckoutBinary):
// Build reuses it while it is newer than every source of the binary, and
// builds it once for the tests and packages that want it at once.
func CheckoutCaddy(t testing.TB) (repo, bin string) {
	t.Helper()
	repo, err := filepath.Abs(RepoRoot)
	if err != nil {
		t.Fatal(err)
	}
	bin = harness.CheckoutBinary(repo)
	msg, err := harness.Build(repo, bin, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(msg)
	return repo, bin
}
