package caddymodule

// This file is the game_metrics line of the global statusgate option
// (GameMetrics).

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/statusgate/statusgate/internal/nearest"
	"github.com/statusgate/statusgate/internal/onoff"
)

// parseGameMetrics reads the game_metrics line of the global option, seg:
//
//	game_metrics [on|off] [{
//		max_worlds   <n>
//		entity_types [on|off]
//	}]
func parseGameMetrics(seg caddyfile.Segment) (*GameMetrics, error) {
	d := caddyfile.NewDispenser(seg)
	d.Next() // game_metrics
	on, err := onoff.Parse(d, "game_metrics", true)
	if err != nil {
		return nil, err
	}
	gm := &GameMetrics{Off: !on}
	for d.NextBlock(0) {
		if gm.Off {
			return nil, d.Errf("game_metrics off: a block of options for metrics that are off")
		}
		switch opt := d.Val(); opt {
		case "max_worlds":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n < 1 || n > 1000 {
				return nil, d.Errf("max_worlds: '%s' is not a number of worlds from 1 to 1000", d.Val())
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			gm.MaxWorlds = n
		case "entity_types":
			if gm.EntityTypes, err = onoff.Parse(d, opt, true); err != nil {
				return nil, err
			}
		default:
			return nil, d.Errf("game_metrics: unrecognized subdirective '%s'%s", opt, nearest.Suggest(opt, []string{"max_worlds", "entity_types"}))
		}
	}
	return gm, nil
}
