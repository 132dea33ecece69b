package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statusgate/statusgate/caddymodule/apikey"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestKeyFileHoldsOneSecret writes to a key's file each wrong line an
// operator pastes from caddy statusgate-key's output (the digest line, the
// Caddyfile line, the secret line, the JSON entry, the whole output) and
// checks that the config is refused, naming the file and what to write, in
// the Caddyfile (at adapt, with the line) and in JSON (where the config
// loads); then the right file, the digest alone, is served: the bot's
// secret opens /server, and the text of the wrong line does not. Before,
// the file's whole text was the key: the real secret was refused, and
// "digest: sha256:<hex>", built from the digest that may be kept in git,
// opened every endpoint.
func TestKeyFileHoldsOneSecret(t *testing.T) {
	be := NewBackend(t)
	const server = "/api/v1/server"
	g, err := apikey.Generate(nil, "discord-bot")
	if err != nil {
		t.Fatal(err)
	}
	var output strings.Builder
	if err := g.Write(&output); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bot-key.txt")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config := Gateway{Upstream: be.Addr(), Statusgate: []string{"key discord-bot {file." + file + "}"}}.Caddyfile()
	write(g.Digest + "\n")
	adapted := Adapt(t, config) // adapted with a right file; the JSON is loaded below with each wrong one

	for what, c := range map[string]struct{ text, fix string }{
		"digest line":    {"digest: " + g.Digest + "\n", "write the digest alone"},
		"Caddyfile line": {"key discord-bot " + g.Digest + "\n", "write the digest alone"},
		"secret line":    {"secret: " + g.Secret + "\n", "write the secret alone"},
		"JSON entry":     {g.JSONEntry() + "\n", "write the digest alone"},
		"whole output":   {output.String(), "write the digest alone"},
		"digest: glued":  {"digest:" + g.Digest + "\n", "write the digest alone"},
		"two words":      {g.Secret + " " + g.Secret + "\n", "write the secret alone"},
	} {
		t.Run(what, func(t *testing.T) {
			write(c.text)
			for form, msg := range map[string]string{
				"Caddyfile": LoadRefused(t, config),
				"JSON":      LoadJSONRefused(t, adapted),
			} {
				for _, want := range []string{"the file " + file, "not one secret", c.fix} {
					if !strings.Contains(msg, want) {
						t.Errorf("%s refused with %q, want it to say %q", form, msg, want)
					}
				}
				if strings.Contains(msg, g.Secret) || strings.Contains(msg, strings.TrimPrefix(g.Digest, "sha256:")) {
					t.Errorf("%s: the error quotes the file: %q", form, msg)
				}
			}
		})
	}

	write(g.Digest + "\n")
	LoadCaddyfile(t, config)
	WantBackendBytes(t, Send(t, "GET", server, WithKey(g.Secret)), server)
	be.WantSeen(t, "the bot's secret", server)
	WantNotFound(t, Send(t, "GET", server, WithKey("digest: "+g.Digest)), server)
	be.WantSeen(t, "the digest line is no key")
}
