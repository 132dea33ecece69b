// Command caddy is Caddy with the statusgate gateway, its demo backend
// (statusgate_sim), github.com/mholt/caddy-ratelimit (the rate_limit
// handler statusgate is composed with) and
// github.com/pberkel/caddy-storage-redis (storage redis, the store several
// gateways share: docs/cluster.md) compiled in; xcaddy.json lists the two
// plugins too. `go build -o caddy ./cmd/caddy`. It is a module of its own,
// so that these plugins are requirements of this command only, never of a
// build that uses github.com/statusgate/statusgate/caddymodule.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// plug in Caddy modules here
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/mholt/caddy-ratelimit"
	_ "github.com/pberkel/caddy-storage-redis"
	_ "github.com/statusgate/statusgate/caddymodule"
	_ "github.com/statusgate/statusgate/internal/sim"
)

func main() {
	caddycmd.Main()
}
