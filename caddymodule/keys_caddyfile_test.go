package caddymodule

import (
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

func TestKeyArgs(t *testing.T) {
	dg := apikey.Digest("s")
	for _, c := range []struct {
		line string
		want apikey.Key
	}{
		{"key my-s3cret-0123456789", apikey.Key{Secret: "my-s3cret-0123456789"}},
		{"key {env.KEY}", apikey.Key{Secret: "{env.KEY}"}},
		{"key " + dg, apikey.Key{Secret: dg}},
		{"key discord-bot " + dg, apikey.Key{Name: "discord-bot", Secret: dg}},
		{"key website {env.WEB}", apikey.Key{Name: "website", Secret: "{env.WEB}"}},
	} {
		got, err := keyLineOf(c.line)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.line, got, err, c.want)
		}
	}
	for _, c := range []struct {
		line string
		want string
	}{
		{"key", "key: want [<name>] <secret|sha256:<hex>>, got 0 arguments"},
		{"key a b c", "key: want [<name>] <secret|sha256:<hex>>, got 3 arguments"},
		{`key "x y" secret`, "key: invalid name (letters, digits, _ and -); write key <name> <secret>"},
		{"key sha256:12ab", "key: malformed digest 'sha256:12ab' (want sha256: and 64 hex digits, got 4)"},
		{"key bot sha256:12ab", "key: malformed digest 'sha256:12ab' (want sha256: and 64 hex digits, got 4)"},
		{`key "  "`, "key: empty key"},
		{`key bot ""`, "key: empty key"},
		// Two secrets pasted on one line: generated ones, a digest first.
		{"key sg_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8 sg_IA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKis",
			"key: the first of two words looks like a secret, not a name; write key <name> <secret>"},
		{"key " + dg + " my-secret-0123456789", "key: the first of two words looks like a secret, not a name; write key <name> <secret>"},
		{"key sha256:12ab my-secret-0123456789", "key: the first of two words looks like a secret, not a name; write key <name> <secret>"},
		{"key Qx7+Zk9/Wv3= my-secret-0123456789", "key: invalid name (letters, digits, _ and -); write key <name> <secret>"},
	} {
		_, err := keyLineOf(c.line)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasSuffix(err.Error(), ", at Testfile:1") {
			t.Errorf("%s: %v, want %q at Testfile:1", c.line, err, c.want)
		}
	}
}

// What `caddy statusgate-key` prints for the Caddyfile is accepted: the
// digest line, and the line that reads the secret from the environment once
// expanded as Provision expands it, give a keyring that knows the secret by
// the name given, and not its digest.
func TestGeneratedLinesParseBack(t *testing.T) {
	for _, name := range []string{"discord-bot", ""} {
		g, err := apikey.Generate(nil, name)
		if err != nil {
			t.Fatal(err)
		}
		wantName := name
		if wantName == "" {
			wantName = apikey.DefaultName(1)
		}
		t.Setenv(g.EnvVar(), g.Secret)
		for _, line := range []string{g.CaddyfileLine(), g.CaddyfileEnvLine()} {
			k, err := keyLineOf(line)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			k.Secret, err = caddy.NewReplacer().ReplaceOrErr(k.Secret, true, true)
			if err != nil {
				t.Fatal(err)
			}
			kr, err := apikey.NewKeyring([]apikey.Key{k})
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if i, ok := kr.Match(g.Secret); !ok || kr.Names()[i] != wantName {
				t.Errorf("%s: Match(secret) = %d, %v; want %q", line, i, ok, wantName)
			}
			if _, ok := kr.Match(g.Digest); ok {
				t.Errorf("%s: the digest is accepted as a key", line)
			}
		}
	}
}
