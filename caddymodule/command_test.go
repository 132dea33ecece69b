package caddymodule

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

// runKeyCommand runs the registered statusgate-key command, built the way
// Caddy's command factory builds it, with args, and returns what it printed.
func runKeyCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	reg, ok := caddycmd.Commands()["statusgate-key"]
	if !ok {
		t.Fatal("statusgate-key is not registered")
	}
	cmd := &cobra.Command{Use: reg.Name + " " + reg.Usage, Short: reg.Short, Long: reg.Long, SilenceUsage: true}
	reg.CobraFunc(cmd)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(append([]string{}, args...)) // never nil: cobra would parse the test binary's own arguments
	err := cmd.Execute()
	return out.String(), err
}

// fields reads the "secret: " and "digest: " lines of the printed text.
func fields(t *testing.T, out string) (secret, digest string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	if len(lines) < 2 {
		t.Fatalf("printed %q", out)
	}
	secret, ok1 := strings.CutPrefix(lines[0], "secret: ")
	digest, ok2 := strings.CutPrefix(lines[1], "digest: ")
	if !ok1 || !ok2 {
		t.Fatalf("printed %q", out)
	}
	return secret, digest
}

func TestKeyCommand(t *testing.T) {
	for _, args := range [][]string{{"--name", "discord-bot"}, {"-n", "discord-bot"}, {"--name=discord-bot"}} {
		out, err := runKeyCommand(t, args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		secret, digest := fields(t, out)
		if !strings.HasPrefix(secret, apikey.GeneratedPrefix) || len(secret) != len(apikey.GeneratedPrefix)+43 {
			t.Errorf("%q: secret %q", args, secret)
		}
		if digest != apikey.Digest(secret) {
			t.Errorf("%q: digest %s does not match the secret", args, digest)
		}
		for _, line := range []string{
			"\tkey discord-bot " + digest + "\n",
			"\tkey discord-bot {env.STATUSGATE_KEY_DISCORD_BOT}\n",
			"\t{\"name\":\"discord-bot\",\"key\":\"" + digest + "\"}\n",
		} {
			if !strings.Contains(out, line) {
				t.Errorf("%q: output lacks %q:\n%s", args, line, out)
			}
		}
	}
}

func TestKeyCommandUnnamed(t *testing.T) {
	out1, err := runKeyCommand(t)
	if err != nil {
		t.Fatal(err)
	}
	out2, err := runKeyCommand(t)
	if err != nil {
		t.Fatal(err)
	}
	s1, d1 := fields(t, out1)
	s2, _ := fields(t, out2)
	if s1 == s2 {
		t.Fatal("two runs printed the same secret")
	}
	if !strings.Contains(out1, "\tkey "+d1+"\n") || !strings.Contains(out1, "\tkey {env.STATUSGATE_KEY}\n") || !strings.Contains(out1, "\t\""+d1+"\"\n") {
		t.Errorf("unnamed key lines:\n%s", out1)
	}
}

func TestKeyCommandErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--name", "x y"}, "--name: invalid name (letters, digits, _ and -)"},
		{[]string{"--name", "bot.example"}, "--name: invalid name (letters, digits, _ and -)"},
		{[]string{"--name", strings.Repeat("n", 65)}, "--name: invalid name (at most 64 characters)"},
		{[]string{"--name", "sg_Pq2Wx8Zr6Vm4Bn0Jk3Hd5Lf7Ty9Gc1Xs4Qa8Ue2Ri6N"}, "--name: invalid name (it has the form of a secret from caddy statusgate-key)"},
		{[]string{"discord-bot"}, `unknown command "discord-bot" for "statusgate-key"`},
		{[]string{"--nmae", "bot"}, "unknown flag: --nmae"},
		{[]string{"--name", "bot", "--endpoints", "status,stats"}, "--endpoints: " + endpointNameError("stats").Error()},
		{[]string{"--name", "bot", "--endpoints", ""}, "--endpoints: no endpoint given"},
		{[]string{"--name", "bot", "--max-in-flight", "0"}, "--max-in-flight: 0 is not a whole number of at least 1"},
		{[]string{"--endpoints", "status"}, "--endpoints and --max-in-flight need --name"},
	} {
		out, err := runKeyCommand(t, c.args...)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
		if strings.Contains(out, "secret:") {
			t.Errorf("%q: printed a key despite the error:\n%s", c.args, out)
		}
	}
}

// cmdStatusgateKey's exit codes: Caddy's Main exits with 1 for an error, and
// the function says so too.
func TestCmdStatusgateKeyStatus(t *testing.T) {
	var out bytes.Buffer
	if code, err := cmdStatusgateKey(&out, strings.NewReader(strings.Repeat("r", 32)), "bot", keyScopeFlags{}); code != caddy.ExitCodeSuccess || err != nil {
		t.Errorf("success: %d, %v", code, err)
	}
	if !strings.HasPrefix(out.String(), "secret: sg_") {
		t.Errorf("printed %q", out.String())
	}
	out.Reset()
	if code, err := cmdStatusgateKey(&out, strings.NewReader("short"), "bot", keyScopeFlags{}); code != caddy.ExitCodeFailedStartup || err == nil {
		t.Errorf("short random source: %d, %v", code, err)
	}
	if code, err := cmdStatusgateKey(&out, strings.NewReader(strings.Repeat("r", 32)), "a b", keyScopeFlags{}); code != caddy.ExitCodeFailedStartup || err == nil {
		t.Errorf("bad name: %d, %v", code, err)
	}
	if out.Len() != 0 {
		t.Errorf("printed %q on failure", out.String())
	}
}

// The line that keeps the secret in the environment works once the variable
// is set: expanded with Caddy's replacer, as the handler expands keys, it
// gives a keyring that knows the secret by the key's name.
func TestKeyCommandEnvLine(t *testing.T) {
	out, err := runKeyCommand(t, "--name", "discord-bot")
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := fields(t, out)
	t.Setenv("STATUSGATE_KEY_DISCORD_BOT", secret)
	k, err := keyLineOf("key discord-bot {env.STATUSGATE_KEY_DISCORD_BOT}")
	if err != nil {
		t.Fatal(err)
	}
	k.Secret, err = caddy.NewReplacer().ReplaceOrErr(k.Secret, true, true)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := apikey.NewKeyring([]apikey.Key{k})
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := kr.Match(secret); !ok || kr.Names()[i] != "discord-bot" {
		t.Errorf("Match = %d, %v", i, ok)
	}
}

// TestKeyCommandScoped prints a scoped key's lines: the Caddyfile block and
// the JSON object with endpoints and max_in_flight, which a config accepts.
func TestKeyCommandScoped(t *testing.T) {
	out, err := runKeyCommand(t, "--name", "discord-bot", "--endpoints", "status,bans", "--max-in-flight", "2")
	if err != nil {
		t.Fatal(err)
	}
	_, digest := fields(t, out)
	block := "\tkey discord-bot " + digest + " {\n\t\tendpoints status bans\n\t\tmax_in_flight 2\n\t}\n"
	entry := "\t{\"name\":\"discord-bot\",\"key\":\"" + digest + "\",\"endpoints\":[\"status\",\"bans\"],\"max_in_flight\":2}\n"
	for _, want := range []string{block, entry} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	h, err := parseTestCaddyfile("statusgate {\n" + block + "}")
	if err != nil {
		t.Fatalf("the printed block does not parse: %v", err)
	}
	if k := h.Auth.Keys[0]; strings.Join(k.Endpoints, " ") != "status bans" || k.MaxInFlight != 2 {
		t.Errorf("parsed %+v", k)
	}
}

// TestKeyCommandKeyFile: the key file the command prints is one that works.
// Its echo line, run by a shell with the path moved to a temporary folder,
// writes a file that `key discord-bot {file.<path>}` reads as the key: the
// printed secret then opens a protected endpoint, and nothing else in the
// printed text does.
func TestKeyCommandKeyFile(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // the revision key's folder
	out, err := runKeyCommand(t, "--name", "discord-bot")
	if err != nil {
		t.Fatal(err)
	}
	secret, digest := fields(t, out)
	const printedFile = "/etc/statusgate/discord-bot.digest"
	if !strings.Contains(out, "\tkey discord-bot {file."+printedFile+"}\n") {
		t.Fatalf("no key file line:\n%s", out)
	}
	echo := "\techo " + digest + " > " + printedFile + "\n"
	if !strings.Contains(out, echo) {
		t.Fatalf("no echo line for the key file:\n%s", out)
	}
	file := filepath.Join(t.TempDir(), "discord-bot.digest")
	cmd := exec.Command("sh", "-c", strings.Replace(strings.TrimSpace(echo), printedFile, file, 1))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the printed echo line: %v %s", err, b)
	}
	if b, _ := os.ReadFile(file); string(b) != digest+"\n" {
		t.Fatalf("the key file holds %q, want the digest and a newline", b)
	}
	h, _ := newTestHandler(t, "key discord-bot {file."+file+"}")
	next := &counter{}
	if r := serve(t, h, next, "GET", "/api/v1/server", keyHeader(secret)); r.Code != 200 || next.n() != 1 {
		t.Errorf("the printed secret with the key file: %d, backend reached %d times", r.Code, next.n())
	}
	for _, wrong := range []string{digest, strings.TrimPrefix(digest, apikey.DigestPrefix), "discord-bot"} {
		if r := serve(t, h, next, "GET", "/api/v1/server", keyHeader(wrong)); r.Code == 200 {
			t.Errorf("%q opened /server", wrong)
		}
	}
}
