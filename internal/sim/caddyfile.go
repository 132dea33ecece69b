package sim

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/internal/onoff"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("statusgate_sim", parseCaddyfile)
	// The sim is a terminal handler, as reverse_proxy is; ordering it just
	// before reverse_proxy spares the user an `order` line.
	httpcaddyfile.RegisterDirectiveOrder("statusgate_sim", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	s := new(Sim)
	err := s.UnmarshalCaddyfile(h.Dispenser)
	return s, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	statusgate_sim {
//		seed      <int>
//		frozen    [on|off]
//		server_id <id>
//	}
//
// The block is optional: a bare `statusgate_sim` serves live data from a
// random seed. `frozen` without an argument means on; true and false are
// accepted wherever on and off are.
func (s *Sim) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "seed":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.ParseInt(d.Val(), 10, 64)
			if err != nil {
				return d.Errf("seed must be a 64-bit integer, got '%s'", d.Val())
			}
			s.Seed = &n
		case "frozen":
			on, err := onoff.Parse(d, "frozen", true)
			if err != nil {
				return err
			}
			s.Frozen = &on
		case "server_id":
			if !d.NextArg() {
				return d.ArgErr()
			}
			s.ServerID = d.Val()
		default:
			return d.Errf("unrecognized subdirective '%s'", d.Val())
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}
