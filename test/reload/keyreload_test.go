package reload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestFileKeyReload replaces a {file.*} key's secret as docs/keys.md says
// ("A key in a file or in the environment"): the new secret written to the
// file, then `caddy reload --config … --adapter caddyfile` with this
// repository's caddy, against a caddy process run on that Caddyfile. The old
// secret's open live stream ends, the old secret is refused from then on,
// and the new one is served, on a stream too. Before the revision the
// adapted JSON held only the placeholder: Caddy found the config unchanged
// and the leaked secret stayed valid until caddy reload --force. An
// {env.*} key cannot change so (the running Caddy's environment is its
// own): a reload from an environment where it has another value fails,
// saying so, and the keys in force stay.
func TestFileKeyReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy and runs it")
	}
	repo, bin := CheckoutCaddy(t)
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "keys.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{
		"key bot {file./etc/caddy/bot.key}",
		"1. Write the new secret to the file",
		"2. `caddy reload`, with the `--config` (and `--adapter`) Caddy runs with.",
		"The old secret is refused from then on, and its open [live streams](live.md) end with the\nreload; the new one is served.",
	} {
		if !strings.Contains(string(doc), step) {
			t.Fatalf("docs/keys.md does not say %q, which this test does", step)
		}
	}

	ports, err := harness.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	gw, sim, admin := ports[0], ports[1], ports[2]
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "bot.key")
	const oldSecret, newSecret = "Qx7Zk9Wv3Jp8Yt5R-leaked", "Hm4Lc6Nd1Fs0Gq8Tw-next"
	const webSecret, webNext = "Zt3Vn8Kq2Lm6Pw9Rb-web", "Yd5Hs1Jx7Gc4Nf0Qa-web2"
	t.Setenv("STATUSGATE_TEST_WEB_KEY", webSecret) // the caddy process's environment
	if err := os.WriteFile(keyFile, []byte(oldSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	caddyfile := fmt.Sprintf(`{
	admin 127.0.0.1:%d
}
http://127.0.0.1:%d {
	statusgate 127.0.0.1:%d {
		key bot {file.%s}
		key web {env.STATUSGATE_TEST_WEB_KEY}
		require_key status on
	}
}
http://127.0.0.1:%d {
	statusgate_sim {
		seed 7
		frozen off
		latency * 0
	}
}
`, admin, gw, sim, keyFile, sim)
	p, err := harness.Start(context.Background(), bin, dir, "gateway", gw, caddyfile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)

	status := p.Base() + "/api/v1/status"
	get := func(key string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, status, nil)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// stream opens a live stream of /status with key and returns a channel
	// that is closed when the stream ends, once its first event came.
	stream := func(key string) (ended <-chan struct{}, stop func()) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, status, nil)
		req.Header.Set("X-API-Key", key)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() && !strings.HasPrefix(lines.Text(), "data: ") {
		}
		done := make(chan struct{})
		go func() {
			for lines.Scan() {
			}
			resp.Body.Close()
			close(done)
		}()
		return done, cancel
	}

	if got := get(oldSecret); got != http.StatusOK {
		t.Fatalf("the key from the file: %d, want 200", got)
	}
	if got := get(newSecret); got != http.StatusNotFound {
		t.Fatalf("a key nobody has yet: %d, want the disguised 404", got)
	}
	oldStream, stop := stream(oldSecret)
	defer stop()

	// The docs' steps: the new secret into the file, then caddy reload.
	if err := os.WriteFile(keyFile, []byte(newSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// caddy reload in the environment harness.Start gives the caddy
	// process (its data folder holds the key of the revisions), and env.
	reload := func(env ...string) ([]byte, error) {
		cmd := exec.Command(bin, "reload", "--config", filepath.Join(dir, "gateway.Caddyfile"), "--adapter", "caddyfile")
		home := filepath.Join(dir, "caddy-home")
		cmd.Env = append(append(os.Environ(), "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home), env...)
		return cmd.CombinedOutput()
	}
	if out, err := reload(); err != nil {
		t.Fatalf("caddy reload: %v\n%s", err, out)
	}
	fixture.WaitEvery(t, "the old config's listener to close", 2*time.Millisecond, func() bool {
		listening, known := harness.ListeningTCP()
		return !known || listening[uint(gw)] <= 1
	})

	fixture.Recv(t, oldStream, "the end of the old secret's stream")
	if got := get(oldSecret); got != http.StatusNotFound {
		t.Errorf("the old secret after the reload: %d, want the disguised 404; the log:\n%s", got, harness.Tail(p.LogPath, 10))
	}
	if got := get(newSecret); got != http.StatusOK {
		t.Errorf("the new secret after the reload: %d, want 200", got)
	}
	_, stopNew := stream(newSecret)
	stopNew()

	// The web key's variable changed in the shell, not in the caddy process.
	out, err := reload("STATUSGATE_TEST_WEB_KEY=" + webNext)
	if err == nil || !strings.Contains(string(out), "auth.keys[1] 'web' {env.STATUSGATE_TEST_WEB_KEY}: the environment variable has another value here than where the config was adapted") ||
		!strings.Contains(string(out), "so a reload cannot change the key: restart Caddy with the new value") {
		t.Errorf("caddy reload with another value of the web key's variable: %v, want it to fail saying why:\n%s", err, out)
	}
	for key, want := range map[string]int{webSecret: http.StatusOK, webNext: http.StatusNotFound, newSecret: http.StatusOK} {
		if got := get(key); got != want {
			t.Errorf("after the refused reload, %.6s…: %d, want %d", key, got, want)
		}
	}
}
