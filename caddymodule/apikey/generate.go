package apikey

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/statusgate/statusgate/internal/ident"
)

// GeneratedPrefix starts every generated secret. It makes a statusgate key
// recognisable wherever it turns up (a leaked file, a secret scanner's
// pattern, a support request) and costs nothing: the randomness is all in
// what follows.
const GeneratedPrefix = "sg_"

// GeneratedBits is the randomness of a generated secret: 256 bits, as much as
// the SHA-256 digest that stands for it can carry.
const GeneratedBits = 256

// EnvPrefix starts the environment variable that the generator suggests for
// keeping a secret out of the config.
const EnvPrefix = "STATUSGATE_KEY"

// Generated is a new random key: its secret, which goes to the client, and its
// digest, which goes in the config.
type Generated struct {
	// Name is the key's name; empty for an unnamed key.
	Name string
	// Secret is GeneratedPrefix and GeneratedBits of randomness in URL-safe
	// base64 without padding (43 characters): safe in a header, a query
	// string and a shell command without quoting.
	Secret string
	// Digest is "sha256:" and the SHA-256 of Secret in lowercase hex.
	Digest string
	// Endpoints and MaxInFlight are the key's scope and cap for the printed
	// config (see Key); zero: every endpoint, no cap of its own.
	Endpoints   []string
	MaxInFlight int
}

// Generate makes a new key named name (which may be empty) from the random
// source r; a nil r means crypto/rand.
func Generate(r io.Reader, name string) (Generated, error) {
	if name != "" {
		if err := ValidateName(name); err != nil {
			return Generated{}, err
		}
	}
	if r == nil {
		r = rand.Reader
	}
	b := make([]byte, GeneratedBits/8)
	if _, err := io.ReadFull(r, b); err != nil {
		return Generated{}, fmt.Errorf("reading random bytes: %v", err)
	}
	secret := GeneratedPrefix + base64.RawURLEncoding.EncodeToString(b)
	return Generated{Name: name, Secret: secret, Digest: Digest(secret)}, nil
}

// IsGenerated reports whether s has the form of a secret Generate makes:
// GeneratedPrefix and 43 characters of URL-safe base64 (whose alphabet is
// exactly that of a key name: letters, digits, '-' and '_').
func IsGenerated(s string) bool {
	rest, ok := strings.CutPrefix(s, GeneratedPrefix)
	return ok && len(rest) == base64.RawURLEncoding.EncodedLen(GeneratedBits/8) && ident.Valid(rest)
}

// EnvVar is the environment variable the printed config suggests for the
// plain secret: STATUSGATE_KEY, or STATUSGATE_KEY_<NAME> with the name in
// upper case and '-' as '_' (a shell variable name cannot hold '-').
func (g Generated) EnvVar() string {
	if g.Name == "" {
		return EnvPrefix
	}
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(g.Name, "-", "_"))
}

// CaddyfileLine is the Caddyfile line with the digest: `key [<name>] sha256:…`.
func (g Generated) CaddyfileLine() string {
	return g.caddyfileLine(g.Digest)
}

// CaddyfileEnvLine is the Caddyfile line for keeping the secret itself in the
// environment instead: `key [<name>] {env.STATUSGATE_KEY…}`.
func (g Generated) CaddyfileEnvLine() string {
	return g.caddyfileLine("{env." + g.EnvVar() + "}")
}

func (g Generated) caddyfileLine(secret string) string {
	line := "key " + secret
	if g.Name != "" {
		line = "key " + g.Name + " " + secret
	}
	if g.Endpoints == nil && g.MaxInFlight == 0 {
		return line
	}
	// The key's block, indented for a line that stands one tab deep.
	line += " {"
	if g.Endpoints != nil {
		line += "\n\t\tendpoints " + strings.Join(g.Endpoints, " ")
	}
	if g.MaxInFlight > 0 {
		line += fmt.Sprintf("\n\t\tmax_in_flight %d", g.MaxInFlight)
	}
	return line + "\n\t}"
}

// KeyFile is where the printed lines suggest keeping the digest in a file of
// its own: /etc/statusgate/<name>.digest, or key.digest without a name.
func (g Generated) KeyFile() string {
	name := g.Name
	if name == "" {
		name = "key"
	}
	return "/etc/statusgate/" + name + ".digest"
}

// CaddyfileFileLine is the Caddyfile line that reads the key from KeyFile:
// `key [<name>] {file./etc/statusgate/<name>.digest}`.
func (g Generated) CaddyfileFileLine() string {
	return g.caddyfileLine("{file." + g.KeyFile() + "}")
}

// KeyFileCommand is the shell command that writes KeyFile's whole content:
// the digest and one newline, which {file.*} drops. A key file holds a bare
// secret or a bare digest and nothing else, so the command is printed rather
// than a description that could be copied with its label.
func (g Generated) KeyFileCommand() string {
	return "echo " + g.Digest + " > " + g.KeyFile()
}

// JSONEntry is the entry of "auth"."keys" in JSON: the digest as a string, or
// {"name":…,"key":…} for a named key.
func (g Generated) JSONEntry() string {
	b, err := json.Marshal(Key{Name: g.Name, Secret: g.Digest, Endpoints: g.Endpoints, MaxInFlight: g.MaxInFlight})
	if err != nil {
		// A Key of two strings always marshals.
		panic(err)
	}
	return string(b)
}

// Write prints the key for an operator: the secret, the digest, the config
// lines for the Caddyfile (with the digest, with the secret in the
// environment, or with the digest in a key file and the command that writes
// that file) and JSON, and a note on where each goes.
func (g Generated) Write(w io.Writer) error {
	_, err := fmt.Fprintf(w, `secret: %s
digest: %s

Caddyfile, inside statusgate { }:
	%s
or with the secret itself in the environment variable %s:
	%s
or with the digest in a key file, which holds the digest alone (written by the echo line):
	%s
	%s
JSON, an entry of "auth" → "keys":
	%s

The secret is shown only this once: give it to the client (it sends it as X-API-Key). The digest goes in the config.
`, g.Secret, g.Digest, g.CaddyfileLine(), g.EnvVar(), g.CaddyfileEnvLine(), g.CaddyfileFileLine(), g.KeyFileCommand(), g.JSONEntry())
	return err
}
