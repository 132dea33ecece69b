package caddymodule

import (
	"crypto/rand"
	"errors"
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
		Usage: "[--name <name> [--endpoints <endpoint>,...] [--max-in-flight <n>]]",
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

--endpoints status,bans
    The key's scope: the endpoints it opens, comma-separated; for any
    other endpoint its caller is a caller without a key. Needs --name.

--max-in-flight 2
    The most requests of this key open at once; past it, 429 at once.
    Needs --name.
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().StringP("name", "n", "", "The key's name (letters, digits, _ and -)")
			cmd.Flags().StringSlice("endpoints", nil, "The endpoints the key opens, comma-separated (default: every endpoint)")
			cmd.Flags().Int("max-in-flight", 0, "The most requests of this key open at once (default: no cap of its own)")
			cmd.Args = cobra.NoArgs
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
				eps, _ := fl.GetStringSlice("endpoints")
				if !fl.Changed("endpoints") {
					eps = nil
				}
				limit := fl.Int("max-in-flight")
				if fl.Changed("max-in-flight") && limit < 1 {
					return caddy.ExitCodeFailedStartup, fmt.Errorf("--max-in-flight: %d is not a whole number of at least 1", limit)
				}
				return cmdStatusgateKey(cmd.OutOrStdout(), rand.Reader, fl.String("name"), keyScopeFlags{endpoints: eps, maxInFlight: limit})
			})
		},
	})
}

// keyScopeFlags are a generated key's scope and cap, from the flags.
type keyScopeFlags struct {
	endpoints   []string // nil: every endpoint
	maxInFlight int      // 0: no cap of its own
}

// cmdStatusgateKey generates a key named name from the random source r and
// prints it to w. A bad name is an error and a failed exit, before any key is
// made.
func cmdStatusgateKey(w io.Writer, r io.Reader, name string, scope keyScopeFlags) (int, error) {
	if name != "" {
		if err := apikey.ValidateName(name); err != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("--name: %v", err)
		}
	}
	if scope.endpoints != nil && len(scope.endpoints) == 0 {
		return caddy.ExitCodeFailedStartup, errors.New("--endpoints: no endpoint given")
	}
	for _, ep := range scope.endpoints {
		if !validEndpointName(ep) {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("--endpoints: %v", endpointNameError(ep))
		}
	}
	if (scope.endpoints != nil || scope.maxInFlight > 0) && name == "" {
		// The Caddyfile's key block follows a named key.
		return caddy.ExitCodeFailedStartup, errors.New("--endpoints and --max-in-flight need --name")
	}
	g, err := apikey.Generate(r, name)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	g.Endpoints, g.MaxInFlight = scope.endpoints, scope.maxInFlight
	if err := g.Write(w); err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	return caddy.ExitCodeSuccess, nil
}
