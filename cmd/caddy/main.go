// Command caddy is Caddy with the statusgate gateway, its demo backend
// (statusgate_sim) and github.com/mholt/caddy-ratelimit (the rate_limit
// handler statusgate is composed with; xcaddy.json lists it too) compiled
// in: `go build -o caddy ./cmd/caddy`.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// plug in Caddy modules here
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/mholt/caddy-ratelimit"
	_ "github.com/statusgate/statusgate/caddymodule"
	_ "github.com/statusgate/statusgate/internal/sim"
)

func main() {
	caddycmd.Main()
}
