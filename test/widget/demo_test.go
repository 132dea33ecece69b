package widget

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestDemoWidgetMoved runs the demo as docs/demo.md's "Moving the demo"
// says, Caddyfile.example with STATUSGATE_DEMO_PORTS set, and opens its
// widget pages in Chromium from the moved widget site: each page names the
// moved gateway (data-api, filled in by the demo's Caddy) and shows its
// live answer, the server's page and the network's.
func TestDemoWidgetMoved(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy and runs the demo")
	}
	needBrowser(t)
	repo, bin := CheckoutCaddy(t)
	d, prefix := StartDemo(t, bin, repo, t.TempDir(), filepath.Join(repo, "Caddyfile.example"))

	site := "http://127.0.0.1:" + strconv.Itoa(harness.DemoPort(prefix, harness.DemoWidget))
	wantAPI := "http://localhost:" + strconv.Itoa(d.Gateway)
	for _, path := range []string{"/", "/network.html"} {
		p := openPage(t, site+path)
		var api string
		p.run("reading data-api", chromedp.Evaluate(`document.querySelector('.statusgate').getAttribute('data-api')`, &api))
		if api != wantAPI {
			t.Errorf("%s: data-api %q, want the moved gateway %q", path, api, wantAPI)
		}
		p.waitState("public-state", "ok", "Updated")
		p.noExceptions()
	}
}
