package rig

// The demo: its backend (statusgate_sim) as a site of the in-process Caddy,
// and Caddyfile.example as a caddy process.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/statusgate/statusgate/test/internal/harness"
)

// SimSite is a site of the in-process Caddy that serves the demo backend
// (statusgate_sim, docs/sim.md) with the lines of its block given, on a free
// port: it returns the site block, for Gateway.Sites, and its address, for
// the upstream.
func SimSite(t testing.TB, lines ...string) (site, upstream string) {
	t.Helper()
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return SimSiteAt(ports[0], lines...), fmt.Sprintf("127.0.0.1:%d", ports[0])
}

// SimSiteAt is the site block of the demo backend on port, with the lines
// of its block given.
func SimSiteAt(port int, lines ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, ":%d {\n\tstatusgate_sim {\n", port)
	for _, l := range lines {
		b.WriteString("\t\t" + l + "\n")
	}
	b.WriteString("\t}\n}")
	return b.String()
}

// StartDemo runs the demo, conf with bin from repo (harness.StartDemo), its
// folders in dir, moved by STATUSGATE_DEMO_PORTS to a free prefix, which it
// returns, until the test ends.
func StartDemo(t *testing.T, bin, repo, dir, conf string) (d *harness.Demo, prefix int) {
	t.Helper()
	prefix, err := harness.FreeDemoPrefix()
	if err != nil {
		t.Fatal(err)
	}
	d, stop, err := harness.StartDemo(bin, repo, dir, conf, harness.DemoPort(prefix, harness.DemoGateway), harness.DemoPortsVar+"="+strconv.Itoa(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return d, prefix
}
