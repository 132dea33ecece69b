package caddymodule

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	if id, mac, _ := strings.Cut(old.Revision, "."); len(id) != 8 || len(mac) != 24 || !hexDigits(id+mac) {
		t.Fatalf("revision %q, want 8 and 24 hex digits", old.Revision)
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

	// The running Caddy's environment is its own, fixed when it started: a
	// reload whose config was adapted where the variable had another value
	// (caddy reload's shell) is refused, saying why; a start (a config
	// saved before a restart with a new value) warns; the same value passes.
	for _, c := range []struct {
		revision string
		reload   bool
		want     string // the error; "" for none
		warns    bool
	}{
		{old.Revision, true, "", false},
		{adapt().Revision, true, "auth.keys[0] 'bot' {env.STATUSGATE_TEST_BOT_KEY}: the environment variable has another value here than where the config was adapted (caddy reload's own environment, or another machine), and a running Caddy's environment is fixed when it starts, so a reload cannot change the key: restart Caddy with the new value, or keep the key in a file ({file./path}), which caddy reload reads again", false},
		{adapt().Revision, false, "", true},
		{"00000000." + strings.Repeat("0", 24), true, "", false}, // made under another revision key: not comparable
	} {
		var k apikey.Key
		if err := json.Unmarshal([]byte(`{"name":"bot","key":"{env.STATUSGATE_TEST_BOT_KEY}","revision":"`+c.revision+`"}`), &k); err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zap.WarnLevel)
		_, _, err := loadKeys([]apikey.Key{k}, c.reload, zap.New(core))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("revision %s, reload %v: %v", c.revision, c.reload, err)
		case c.want != "":
			wantErrorWords(t, err, c.want)
		}
		if warned := logs.FilterMessageSnippet("fixed when it starts").Len() > 0; warned != c.warns {
			t.Errorf("revision %s, reload %v: warned %v, want %v", c.revision, c.reload, warned, c.warns)
		}
	}
}

func hexDigits(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// TestAdaptedWithoutSecret: a key file the adapter cannot read gets no
// revision, and its warning says how to apply a change all the same
// (docs/keys.md: caddy reload --force); an empty file's does not, since it
// has no secret anywhere.
func TestAdaptedWithoutSecret(t *testing.T) {
	dir := t.TempDir()
	unreadable := readKeySource("{file." + dir + "}") // a directory: read fails, as for caddy reload's user
	empty := filepath.Join(dir, "empty.key")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src   keySource
		force bool
	}{{unreadable, true}, {readKeySource("{file." + empty + "}"), false}} {
		why := tc.src.problem("bot")
		if why == "" {
			t.Fatalf("%+v: no problem", tc.src)
		}
		msg := adaptedWithout(tc.src, "bot", why)
		if got := strings.Contains(msg, "caddy reload --force"); got != tc.force {
			t.Errorf("%q: tells caddy reload --force %v, want %v", msg, got, tc.force)
		}
	}
}
