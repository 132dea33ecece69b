package caddymodule

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

// TestKeyRevision checks what the Caddyfile adapter writes beside a key
// read from a file or the environment: a revision that changes when the
// value does and only then, so that caddy reload applies a new secret, and
// that shows nothing of it (not the secret, not its plain digest).
func TestKeyRevision(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // the revision key's folder
	dir := t.TempDir()
	file := filepath.Join(dir, "bot.key")
	adapt := func() apikey.Key {
		t.Helper()
		h := new(Handler)
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("statusgate {\n\tkey bot {file." + file + "}\n}")); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"Qx7Zk9Wv3Jp8Yt5R-old", "Hm4Lc6Nd1Fs0Gq8Tw-new"} {
			if strings.Contains(string(b), secret) || strings.Contains(string(b), strings.TrimPrefix(apikey.Digest(secret), apikey.DigestPrefix)) {
				t.Fatalf("the adapted JSON shows the secret or its digest: %s", b)
			}
		}
		return h.Auth.Keys[0]
	}
	write := func(secret string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("Qx7Zk9Wv3Jp8Yt5R-old")
	old := adapt()
	if _, err := hex.DecodeString(old.Revision); err != nil || len(old.Revision) != 24 {
		t.Fatalf("revision %q, want 24 hex digits", old.Revision)
	}
	if again := adapt(); again.Revision != old.Revision {
		t.Errorf("the same file gave revisions %s and %s: every reload would apply it anew", old.Revision, again.Revision)
	}
	write("Hm4Lc6Nd1Fs0Gq8Tw-new")
	if changed := adapt(); changed.Revision == old.Revision || changed.Secret != "{file."+file+"}" {
		t.Errorf("a new secret in the file: %+v, the old revision %s", changed, old.Revision)
	}

	t.Setenv("STATUSGATE_TEST_BOT_KEY", "Qx7Zk9Wv3Jp8Yt5R-old")
	h := new(Handler)
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("statusgate {\n\tkey bot {env.STATUSGATE_TEST_BOT_KEY}\n\tkey web {file." + filepath.Join(dir, "missing") + "}\n}")); err != nil {
		t.Fatal(err)
	}
	if env, missing := h.Auth.Keys[0], h.Auth.Keys[1]; env.Revision != old.Revision || missing.Revision != "" {
		t.Errorf("an {env.*} key of the old value: revision %q, want %q, the file's; a file that is not there: %q, want none", env.Revision, old.Revision, missing.Revision)
	}

	// The running Caddy's environment is its own: a config adapted where the
	// variable had another value (caddy reload's shell) is loaded with a
	// warning that says the key did not change, and with none otherwise.
	for _, c := range []struct {
		revision string
		warns    bool
	}{{old.Revision, false}, {adapt().Revision, true}} {
		h := new(Handler)
		config := `{"auth":{"keys":[{"name":"bot","key":"{env.STATUSGATE_TEST_BOT_KEY}","revision":"` + c.revision + `"}]}}`
		if err := json.Unmarshal([]byte(config), h); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		core, logs := observer.New(zap.WarnLevel)
		if err := h.provisionWith(ctx, zap.New(core)); err != nil {
			t.Fatal(err)
		}
		_ = h.Cleanup()
		cancel()
		said := logs.FilterMessageSnippet("restart Caddy to change the key").All()
		if (len(said) > 0) != c.warns {
			t.Errorf("revision %s: warnings %v, want one: %v", c.revision, said, c.warns)
		}
	}
}
