package caddymodule

import (
	"crypto/rand"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "statusgate-key",
		Usage: "[--name <name>]",
		Short: "Generates a new statusgate API key and prints its config lines",
		Long: `
Generates a new random API key for statusgate: 256 bits from the system's
secure random source, written as "sg_" and 43 URL-safe base64 characters.

It prints the secret, which goes to the client (it sends it in the
X-API-Key header) and is shown only this once, and its SHA-256 digest
"sha256:<hex>", which goes in the config: a config that holds digests holds
no secret. Then the lines to paste: the Caddyfile line with the digest, the
Caddyfile line that reads the secret itself from an environment variable
instead, and the JSON entry of "auth" → "keys".

--name
    The key's name, shown in logs, placeholders and metrics instead of the
    secret: letters, digits, _ and -, at most 64 characters. Without a
    name the key is called key-<n> by its position in the config, which
    changes when keys are added or removed before it.
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().StringP("name", "n", "", "The key's name (letters, digits, _ and -)")
			cmd.Args = cobra.NoArgs
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
				return cmdStatusgateKey(cmd.OutOrStdout(), rand.Reader, fl.String("name"))
			})
		},
	})
}

// cmdStatusgateKey generates a key named name from the random source r and
// prints it to w. A bad name is an error and a failed exit, before any key is
// made.
func cmdStatusgateKey(w io.Writer, r io.Reader, name string) (int, error) {
	if name != "" {
		if err := apikey.ValidateName(name); err != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("--name: %v", err)
		}
	}
	g, err := apikey.Generate(r, name)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if err := g.Write(w); err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	return caddy.ExitCodeSuccess, nil
}
