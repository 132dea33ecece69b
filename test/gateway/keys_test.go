package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestKeysKeptOutOfConfig loads a Caddyfile with a plain key, a {$VAR} key
// (substituted by the Caddyfile parser, so plain text by the time statusgate
// reads it) and an {env.*} key, with Caddy's debug log on, and checks that no
// secret is in the config Caddy keeps and shows: the debug log (its
// "adjusted config" line), the admin API's GET /config/ and the
// autosave.json Caddy writes on every load. Each key still opens a protected
// endpoint.
func TestKeysKeptOutOfConfig(t *testing.T) {
	be := NewBackend(t)
	t.Setenv("STATUSGATE_TEST_PARSER_KEY", KeyB)
	t.Setenv("STATUSGATE_TEST_KEY", KeyEnv)
	debugLog := filepath.Join(t.TempDir(), "caddy.log")
	Gateway{
		Upstream: be.Addr(),
		Statusgate: []string{
			"key website " + KeyA,
			"key {$STATUSGATE_TEST_PARSER_KEY}",
			"key bot {env.STATUSGATE_TEST_KEY}",
		},
		Global: []string{"debug", "log {\n\t\toutput file " + debugLog + "\n\t\tlevel DEBUG\n\t}"},
		// Caddy writes its "adjusted config" debug log only when some server
		// has automatic HTTPS: a site on the HTTPS port, without a host (no
		// certificate to get), and auto_https not off.
		AutoHTTPS: "disable_redirects",
		Sites:     []string{fmt.Sprintf(":%d {\n\trespond 204\n}", HTTPSPort)},
	}.Start(t)

	const server = "/api/v1/server"
	for _, k := range []string{KeyA, KeyB, KeyEnv} {
		WantBackendBytes(t, Send(t, "GET", server, WithKey(k)), server)
	}
	be.WantSeen(t, "each key", server, server, server)
	for _, k := range []string{"", KeyC, "{env.STATUSGATE_TEST_KEY}", "{$STATUSGATE_TEST_PARSER_KEY}"} {
		r := Send(t, "GET", server, WithKey(k))
		WantNotFound(t, r, server)
	}
	be.WantSeen(t, "no key, wrong keys")

	res, err := AdminClient.Get(AdminURL + "/config/")
	if err != nil {
		t.Fatal(err)
	}
	config, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /config/: %d, %v", res.StatusCode, err)
	}
	// caddytest loads the config through the admin API's /load, which
	// autosaves it, to the folder TestMain gives this run (RunWithCaddy).
	autosave, err := os.ReadFile(caddy.ConfigAutosavePath)
	if err != nil {
		t.Fatalf("autosave: %v", err)
	}
	var debug []byte
	for deadline := time.Now().Add(Patience); ; {
		debug, _ = os.ReadFile(debugLog)
		if bytes.Contains(debug, []byte(`"adjusted config"`)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	for name, text := range map[string][]byte{"GET /config/": config, "autosave.json": autosave, "debug log": debug} {
		// The texts are this config, not an older one, and they hold it
		// whole: the keys' names and the placeholder that stays one.
		for _, want := range []string{be.Addr(), `"website"`, `"bot"`, "{env.STATUSGATE_TEST_KEY}"} {
			if !bytes.Contains(text, []byte(want)) {
				t.Errorf("%s does not hold %s: %s", name, want, Clip(text))
			}
		}
		for _, secret := range []string{KeyA, KeyB, KeyEnv} {
			if bytes.Contains(text, []byte(secret)) {
				t.Errorf("%s holds the secret %q: %s", name, secret, lineWith(text, secret))
			}
		}
	}
}

// TestKeyWithBraces configures a plain key with braces in it. Unescaped, the
// braces make a placeholder Caddy does not know: the config is refused with
// a message that names the line and quotes no part of the key. Escaped
// (\{ \}), they are the key's own characters: it opens a protected endpoint.
func TestKeyWithBraces(t *testing.T) {
	be := NewBackend(t)
	const braceKey = "kBrace-{Hunter2-part}-7c1d"
	refused := Gateway{Upstream: be.Addr(), Statusgate: []string{"key brace " + braceKey}}.Caddyfile()
	msg := LoadRefused(t, refused)
	line := 1 + strings.Count(refused[:strings.Index(refused, braceKey)], "\n")
	if !strings.Contains(msg, "placeholder") || !strings.Contains(msg, ":"+strconv.Itoa(line)) {
		t.Errorf("the error does not name the placeholder and line %d: %s", line, msg)
	}
	fixture.QuotesNoSecret(t, errors.New(msg), 6, braceKey)

	escaped := strings.NewReplacer("{", `\{`, "}", `\}`).Replace(braceKey)
	Gateway{Upstream: be.Addr(), Statusgate: []string{"key brace " + escaped}}.Start(t)
	const server = "/api/v1/server"
	WantBackendBytes(t, Send(t, "GET", server, WithKey(braceKey)), server)
	be.WantSeen(t, "brace key", server)
	WantNotFound(t, Send(t, "GET", server, WithKey(escaped)), server)
	be.WantSeen(t, "the key as written in the Caddyfile")
}

// TestKeyLineWithTwoSecrets loads `key <secret> <secret>`, two keys as
// `caddy statusgate-key` prints them pasted on one line: Caddy must refuse
// the config (the first secret would otherwise be the second key's name, in
// every log line and metric) with a message that names the line and
// quotes neither secret.
func TestKeyLineWithTwoSecrets(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be) // a running config, which the refused one must not replace
	first, second := generate(t, ""), generate(t, "")
	cfg := Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "key " + first.Secret + " " + second.Secret}}.Caddyfile()
	msg := LoadRefused(t, cfg)
	line := 1 + strings.Count(cfg[:strings.Index(cfg, first.Secret)], "\n")
	if !strings.Contains(msg, "key <name> <secret>") || !strings.Contains(msg, ":"+strconv.Itoa(line)) {
		t.Errorf("the error does not name line %d and the form `key <name> <secret>`: %s", line, msg)
	}
	// Random secrets: 8 bytes, so that a chance match with the message's
	// words is out of the question.
	fixture.QuotesNoSecret(t, errors.New(msg), 8, first.Secret, second.Secret)
	// The running config is the old one.
	WantBackendBytes(t, Send(t, "GET", "/api/v1/server", WithKey(KeyA)), "/api/v1/server")
	be.WantSeen(t, "old config", "/api/v1/server")
	WantNotFound(t, Send(t, "GET", "/api/v1/server", WithKey(second.Secret)), "/api/v1/server")
	be.WantSeen(t, "refused config's key")
}

// TestJSONNullRefused: a JSON config (as config generators write it) with
// null where null would read as "every endpoint", "no cap", "public" or
// "hide nothing" is refused with the path, and the running config stays.
func TestJSONNullRefused(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be)
	g := Gateway{Upstream: be.Addr(), Statusgate: []string{"key bot " + KeyB + " {\n\t\t\tendpoints status\n\t\t\tmax_in_flight 2\n\t\t}", "require_key bans on", "protected_fields server motd"}}
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(g.Caddyfile()), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"endpoints":["status"]`, `"endpoints":null`, "auth.keys[0] 'bot': endpoints: null is not a scope"},
		{`"max_in_flight":2`, `"max_in_flight":null`, "auth.keys[0] 'bot': max_in_flight: null is not a cap"},
		{`"bans":true`, `"bans":null`, "auth.require_key.bans: null is not a value"},
		{`"server":["motd","ip","port"]`, `"server":null`, "auth.protected_fields.server: null is not a value"},
	} {
		if !bytes.Contains(adapted, []byte(tc.from)) {
			t.Fatalf("the adapted config lacks %s: %s", tc.from, adapted)
		}
		res, err := AdminClient.Post(AdminURL+"/load", "application/json", bytes.NewReader(bytes.Replace(adapted, []byte(tc.from), []byte(tc.to), 1)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK || !strings.Contains(string(body), tc.want) || strings.Contains(string(body), KeyB) {
			t.Errorf("%s: %d %s, want refused with %q and no secret", tc.to, res.StatusCode, body, tc.want)
		}
	}
	if r := Send(t, "GET", "/api/v1/bans", WithKey(KeyA)); r.Status != 200 {
		t.Errorf("the running config after the refused loads: %d", r.Status)
	}
}
