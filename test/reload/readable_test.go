package reload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestReloadErrorReadable: a reload refused for one mistake made in two
// places (a site's rate_limit, without `order rate_limit after statusgate`,
// runs before the statusgate of each of its two handle blocks) is printed
// by `caddy reload`, with this repository's caddy against a caddy process,
// as one message that lists both places, its fix said once, and without
// the JSON escapes Caddy's admin API adds to an error it encodes (a line
// break between the places came out as a literal \n, angle brackets as
// \u003c). Before, each handler got the whole message, joined by \n.
func TestReloadErrorReadable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy and runs it")
	}
	_, bin := CheckoutCaddy(t)
	ports, err := harness.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	gw, sim, admin := ports[0], ports[1], ports[2]
	dir := t.TempDir()
	site := func(rateLimit string) string {
		return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	statusgate {
		server lobby 127.0.0.1:%d
	}
}
http://127.0.0.1:%d {
%s	handle_path /lobby/* {
		statusgate {
			server lobby
		}
	}
	handle {
		statusgate {
			server lobby
		}
	}
}
http://127.0.0.1:%d {
	statusgate_sim {
		seed 7
	}
}
`, admin, sim, gw, rateLimit, sim)
	}
	p, err := harness.Start(context.Background(), bin, dir, "gateway", gw, site(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)

	conf := filepath.Join(dir, "gateway.Caddyfile")
	if err := os.WriteFile(conf, []byte(site("\trate_limit {\n\t\tzone per_caller {\n\t\t\tkey {remote_host}\n\t\t\tevents 60\n\t\t\twindow 1m\n\t\t}\n\t}\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "reload", "--config", conf, "--adapter", "caddyfile")
	home := filepath.Join(dir, "caddy-home")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("caddy reload of a rate_limit before statusgate succeeded:\n%s", out)
	}
	// caddy reload logs Caddy's answer, {"error":"…"}, inside a JSON log
	// line: what is Caddy's (the quotes around the error, the encoder's
	// final newline) comes out escaped twice whatever the message says.
	// The message itself must need no escape at all.
	text := string(out)
	const start = "statusgate app module: start: "
	i := strings.Index(text, start)
	if i < 0 {
		t.Fatalf("caddy reload's output has no statusgate start error:\n%s", text)
	}
	message, _, _ := strings.Cut(text[i+len(start):], `\"}`)
	for _, want := range []string{
		regexp.QuoteMeta("a rate_limit runs before statusgate in 2 places"),
		regexp.QuoteMeta("add `order rate_limit after statusgate` to the global options"),
		// The adapter names the servers srv0 and srv1 in the order of
		// their listeners, which are free ports taken at random.
		regexp.QuoteMeta("; the places: (1) statusgate in server ") + `srv\d` + regexp.QuoteMeta(fmt.Sprintf(" (listen :%d), site 127.0.0.1, route matching path /lobby/*, at apps.http.servers.", gw)),
		regexp.QuoteMeta("; (2) statusgate in server ") + `srv\d` + regexp.QuoteMeta(fmt.Sprintf(" (listen :%d), site 127.0.0.1, at apps.http.servers.", gw)),
	} {
		if !regexp.MustCompile(want).MatchString(message) {
			t.Errorf("caddy reload's message does not say %s:\n%s", want, message)
		}
	}
	if n := strings.Count(text, "runs before"); n != 1 {
		t.Errorf("the mistake is said %d times, want once:\n%s", n, text)
	}
	if strings.Contains(message, `\`) {
		t.Errorf("caddy reload's message has JSON escapes:\n%s", message)
	}
	if len(message) > 1200 {
		t.Errorf("caddy reload's message is %d characters for one mistake:\n%s", len(message), message)
	}
}
