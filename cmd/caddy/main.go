// Command caddy is Caddy with the statusgate gateway and its demo backend
// (statusgate_sim) compiled in: `go build -o caddy ./cmd/caddy`.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// plug in Caddy modules here
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/statusgate/statusgate/caddymodule"
	_ "github.com/statusgate/statusgate/internal/sim"
)

func main() {
	caddycmd.Main()
}
