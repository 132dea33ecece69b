package sim

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/internal/nearest"
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
//		seed            <int>
//		frozen          [on|off]
//		server_id       <id>
//		name            <name>
//		threads         <n>
//		latency         <station|index|player_offline|*> <min> [<max>]
//		resolve_timeout <duration>
//		stats_endpoint  [on|off]
//		modded_items    <n>
//	}
//
// The block is optional: a bare `statusgate_sim` serves live data from a
// random seed with realistic latencies. `frozen` and `stats_endpoint`
// without an argument mean on; true and false are accepted wherever on and
// off are. `latency` may repeat, once per key; `latency * 0` makes every
// station instant. `modded_items` (default 0) adds n modded blocks and
// items to the detailed player statistics: a large public answer for a load
// test (20000 make Alex_MC's ?detailed=true about 3 MB).
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
		case "name":
			if !d.NextArg() {
				return d.ArgErr()
			}
			s.Name = d.Val()
		case "threads":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n < 1 {
				return d.Errf("threads must be a whole number of at least 1, got '%s'", d.Val())
			}
			s.Threads = n
		case "latency":
			if err := s.parseLatency(d); err != nil {
				return err
			}
		case "resolve_timeout":
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil || dur <= 0 {
				return d.Errf("resolve_timeout must be a positive duration, got '%s'", d.Val())
			}
			s.ResolveTimeout = caddy.Duration(dur)
		case "modded_items":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n < 0 {
				return d.Errf("modded_items must be a whole number, got '%s'", d.Val())
			}
			s.ModdedItems = n
		case "stats_endpoint":
			on, err := onoff.Parse(d, "stats_endpoint", true)
			if err != nil {
				return err
			}
			s.StatsEndpoint = on
		default:
			return d.Errf("unrecognized subdirective '%s'%s", d.Val(), nearest.Suggest(d.Val(), options))
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// options are the subdirectives of statusgate_sim's block, in the order of
// its syntax: what an unrecognized one is most likely a misspelling of.
var options = []string{"seed", "frozen", "server_id", "name", "threads", "latency", "resolve_timeout", "stats_endpoint", "modded_items"}

// parseLatency reads `latency <key> <min> [<max>]`; the dispenser is on
// the word latency.
func (s *Sim) parseLatency(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	key := d.Val()
	if _, dup := s.Latency[key]; dup {
		return d.Errf("latency %s: given twice", key)
	}
	var sp Span
	for i, field := range []*caddy.Duration{&sp.Min, &sp.Max} {
		if !d.NextArg() {
			if i == 0 {
				return d.ArgErr()
			}
			break
		}
		dur, err := caddy.ParseDuration(d.Val())
		if err != nil || dur < 0 {
			return d.Errf("latency %s: '%s' is not a duration", key, d.Val())
		}
		*field = caddy.Duration(dur)
	}
	if err := checkLatency(key, sp); err != nil {
		return d.Err(err.Error())
	}
	if s.Latency == nil {
		s.Latency = map[string]Span{}
	}
	s.Latency[key] = sp
	return nil
}
