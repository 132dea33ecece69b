package apikey

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// counting is a deterministic "random" source: 0, 1, 2, …
type counting struct{ next byte }

func (c *counting) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = c.next
		c.next++
	}
	return len(p), nil
}

func TestGenerateFormat(t *testing.T) {
	g, err := Generate(&counting{}, "discord-bot")
	if err != nil {
		t.Fatal(err)
	}
	// base64url of the bytes 0..31, without padding.
	const wantSecret = "sg_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
	if g.Secret != wantSecret {
		t.Errorf("Secret = %s, want %s", g.Secret, wantSecret)
	}
	if g.Name != "discord-bot" {
		t.Errorf("Name = %q", g.Name)
	}
	sum := sha256.Sum256([]byte(wantSecret))
	if want := "sha256:" + hex.EncodeToString(sum[:]); g.Digest != want {
		t.Errorf("Digest = %s, want %s", g.Digest, want)
	}
}

// IsGenerated knows what Generate makes, and nothing that merely starts
// the same way.
func TestIsGenerated(t *testing.T) {
	for range 20 {
		g, err := Generate(nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if !IsGenerated(g.Secret) {
			t.Errorf("IsGenerated(%q) = false", g.Secret)
		}
		if IsGenerated(g.Digest) || IsGenerated(g.Secret[1:]) || IsGenerated(g.Secret+"A") || IsGenerated(g.Secret[:45]+".") {
			t.Errorf("IsGenerated is true for a variant of %q", g.Secret)
		}
	}
	for _, s := range []string{"", "sg_", "sg_bot", "SG_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", "discord-bot"} {
		if IsGenerated(s) {
			t.Errorf("IsGenerated(%q) = true", s)
		}
	}
}

func TestGenerateRandom(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		g, err := Generate(nil, "")
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := strings.CutPrefix(g.Secret, GeneratedPrefix)
		if !ok {
			t.Fatalf("secret %q lacks the prefix", g.Secret)
		}
		if len(g.Secret) != len(GeneratedPrefix)+43 {
			t.Errorf("secret length %d, want %d", len(g.Secret), len(GeneratedPrefix)+43)
		}
		b, err := base64.RawURLEncoding.Strict().DecodeString(raw)
		if err != nil || len(b)*8 != GeneratedBits {
			t.Fatalf("secret %q decodes to %d bytes, %v", g.Secret, len(b), err)
		}
		if strings.ContainsAny(raw, "+/=") {
			t.Errorf("secret %q is not URL-safe", g.Secret)
		}
		if g.Digest != Digest(g.Secret) {
			t.Errorf("digest %s does not match the secret", g.Digest)
		}
		if seen[g.Secret] {
			t.Fatalf("secret %q generated twice", g.Secret)
		}
		seen[g.Secret] = true
	}
}

func TestGenerateErrors(t *testing.T) {
	if _, err := Generate(&counting{}, "x y"); err == nil || err.Error() != "invalid name (letters, digits, _ and -)" {
		t.Errorf("bad name: %v", err)
	}
	short := bytes.NewReader(make([]byte, 31))
	if _, err := Generate(short, "bot"); err == nil || !strings.HasPrefix(err.Error(), "reading random bytes: ") {
		t.Errorf("short random source: %v", err)
	}
	failing := errReader{errors.New("entropy exhausted")}
	if _, err := Generate(failing, ""); err == nil || err.Error() != "reading random bytes: entropy exhausted" {
		t.Errorf("failing random source: %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestGeneratedWrite(t *testing.T) {
	g, err := Generate(&counting{}, "discord-bot")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := g.Write(&out); err != nil {
		t.Fatal(err)
	}
	want := `secret: sg_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8
digest: ` + g.Digest + `

Caddyfile, inside statusgate { }:
	key discord-bot ` + g.Digest + `
or with the secret itself in the environment variable STATUSGATE_KEY_DISCORD_BOT:
	key discord-bot {env.STATUSGATE_KEY_DISCORD_BOT}
or with the digest in a key file, which holds the digest alone (written by the echo line):
	key discord-bot {file./etc/statusgate/discord-bot.digest}
	echo ` + g.Digest + ` > /etc/statusgate/discord-bot.digest
JSON, an entry of "auth" → "keys":
	{"name":"discord-bot","key":"` + g.Digest + `"}

The secret is shown only this once: give it to the client (it sends it as X-API-Key). The digest goes in the config.
`
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
	if n := strings.Count(out.String(), g.Secret); n != 1 {
		t.Errorf("the secret is printed %d times, want once", n)
	}
}

func TestGeneratedLinesUnnamed(t *testing.T) {
	g, err := Generate(&counting{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := g.CaddyfileLine(), "key "+g.Digest; got != want {
		t.Errorf("CaddyfileLine = %s, want %s", got, want)
	}
	if got, want := g.CaddyfileEnvLine(), "key {env.STATUSGATE_KEY}"; got != want {
		t.Errorf("CaddyfileEnvLine = %s, want %s", got, want)
	}
	if got, want := g.CaddyfileFileLine(), "key {file./etc/statusgate/key.digest}"; got != want {
		t.Errorf("CaddyfileFileLine = %s, want %s", got, want)
	}
	if got, want := g.JSONEntry(), `"`+g.Digest+`"`; got != want {
		t.Errorf("JSONEntry = %s, want %s", got, want)
	}
	g.Name = "Web_Site-2"
	if got, want := g.EnvVar(), "STATUSGATE_KEY_WEB_SITE_2"; got != want {
		t.Errorf("EnvVar = %s, want %s", got, want)
	}
}

// What the generator prints for JSON is accepted as config: the entry
// decodes, and the keyring built from it knows the secret by the name given
// (the Caddyfile lines are the handler's to parse, and its tests'). The
// environment variable's value, the secret, gives the same keyring.
func TestGeneratedLinesParseBack(t *testing.T) {
	for _, name := range []string{"discord-bot", ""} {
		g, err := Generate(nil, name)
		if err != nil {
			t.Fatal(err)
		}
		wantName := name
		if wantName == "" {
			wantName = DefaultName(1)
		}
		var fromLines []Key
		var j Key
		if err := json.Unmarshal([]byte(g.JSONEntry()), &j); err != nil {
			t.Fatalf("JSON entry %s: %v", g.JSONEntry(), err)
		}
		fromLines = append(fromLines, j)

		fromLines = append(fromLines, Key{Name: name, Secret: g.Secret})

		for i, k := range fromLines {
			kr, err := NewKeyring([]Key{k})
			if err != nil {
				t.Fatalf("line %d: %v", i, err)
			}
			if got, ok := lookup(kr, g.Secret); !ok || got != wantName {
				t.Errorf("line %d: lookup(secret) = %q, %v; want %q", i, got, ok, wantName)
			}
			if _, ok := lookup(kr, g.Digest); ok {
				t.Errorf("line %d: the digest is accepted as a key", i)
			}
		}
	}
}
