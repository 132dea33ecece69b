package caddymodule

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

// TestKeyTextOneSecret checks a key read from a file or the environment:
// a value that is not one secret or one digest (a line of caddy
// statusgate-key's output, two words) is refused where the Caddyfile is
// adapted, with the key's line, and where the JSON config loads, naming
// the file or the variable and what to write; the digest alone loads.
func TestKeyTextOneSecret(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	const digest = "sha256:1083d8ba3d33deeb7771c485d9bef78a4962c8087383c20ee93d1e0351256b60"
	file := filepath.Join(t.TempDir(), "bot.key")
	provision := func(raw string) error {
		h := new(Handler)
		if err := caddy.StrictUnmarshalJSON([]byte(raw), h); err != nil {
			return err
		}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		defer cancel()
		defer h.Cleanup()
		return h.Provision(ctx)
	}
	for _, c := range []struct{ value, fix string }{
		{"digest: " + digest + "\n", "write the digest alone"},
		{"key discord-bot " + digest, "write the digest alone"},
		{"secret: sg_28LTmLX-g4RmCaLRYD3bcU1a2CNPVK_HvJJ-lDotZCI", "write the secret alone"},
		{"Qx7Zk9Wv3Jp8Yt5R Lm2Nb6Vc4Xz8Sd1F", "more than one word"},
	} {
		if err := os.WriteFile(file, []byte(c.value), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("STATUSGATE_TEST_KEY_TEXT", c.value)
		for _, ref := range []struct{ placeholder, source string }{
			{"{file." + file + "}", "the file " + file},
			{"{env.STATUSGATE_TEST_KEY_TEXT}", "the environment variable STATUSGATE_TEST_KEY_TEXT"},
		} {
			err := provision(`{"handler":"statusgate","auth":{"keys":[{"name":"bot","key":"` + ref.placeholder + `"}]}}`)
			wantErrorWords(t, err, "auth.keys[0] 'bot' "+ref.placeholder+": "+ref.source, "not one secret", c.fix)
			_, _, err = caddyconfig.GetAdapter("caddyfile").Adapt([]byte(":8080 {\n\tstatusgate 127.0.0.1:8081 {\n\t\tkey bot "+ref.placeholder+"\n\t}\n}\n"), nil)
			wantErrorWords(t, err, "key: "+ref.source, "not one secret", c.fix, "Caddyfile:3")
			if err != nil && strings.Contains(err.Error(), "1083d8ba") {
				t.Errorf("the error quotes the value: %v", err)
			}
		}
	}
	if err := os.WriteFile(file, []byte(digest+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := provision(`{"handler":"statusgate","auth":{"keys":[{"name":"bot","key":"{file.` + file + `}"}]}}`); err != nil {
		t.Errorf("the digest alone in the file: %v", err)
	}
	for _, ok := range []string{digest, "sg_28LTmLX-g4RmCaLRYD3bcU1a2CNPVK_HvJJ-lDotZCI", "Qx7Zk9Wv3Jp8Yt5R", "p@ss:w0rd!xyz-1234"} {
		if err := apikey.SecretTextError(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestKeyTextParserVariable: a {$VAR} key whose value is a line of caddy
// statusgate-key's output is refused naming the variable, with its line,
// whichever words the line then has.
func TestKeyTextParserVariable(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	const digest = "sha256:1083d8ba3d33deeb7771c485d9bef78a4962c8087383c20ee93d1e0351256b60"
	for _, c := range []struct{ value, line, fix string }{
		{"digest: " + digest, "key bot {$STATUSGATE_TEST_PARSER}", "write the digest alone"},
		{"digest: " + digest, "key {$STATUSGATE_TEST_PARSER}", "write the digest alone"},
		{"key discord-bot " + digest, "key {$STATUSGATE_TEST_PARSER}", "write the digest alone"},
		{"digest:" + digest, "key bot \"{$STATUSGATE_TEST_PARSER}\"", "write the digest alone"},
	} {
		t.Setenv("STATUSGATE_TEST_PARSER", c.value)
		dir := t.TempDir()
		file := filepath.Join(dir, "Caddyfile")
		input := ":8080 {\n\tstatusgate 127.0.0.1:8081 {\n\t\t" + c.line + "\n\t}\n}\n"
		if err := os.WriteFile(file, []byte(input), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), map[string]any{"filename": "Caddyfile"})
		wantErrorWords(t, err, "key: the environment variable STATUSGATE_TEST_PARSER, which {$STATUSGATE_TEST_PARSER} on this line stands for, holds what is not one secret", c.fix, "Caddyfile:3")
		if err != nil && strings.Contains(err.Error(), "1083d8ba") {
			t.Errorf("the error quotes the value: %v", err)
		}
	}
}
