package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/mholt/caddy-ratelimit"

	_ "github.com/statusgate/statusgate/caddymodule"
	_ "github.com/statusgate/statusgate/internal/sim"
)

// The gateways under test, in the order of each round.
const (
	plain      = "plain"
	statusgate = "statusgate"
)

var variants = []string{plain, statusgate}

// botKey is the key of the keyed callers (the bot and the placeholder
// callers); the statusgate variant accepts it.
const botKey = "flood-bot-key-7c1e9a04d2b3"

// simName is the name the flood's backend registers its counters under.
const simName = "flood"

// site is one round's Caddy config: the gateway on gwPort in front of the
// capacity-modelled sim on simPort, both on loopback in one process.
//
// Every client sends its own X-Forwarded-For address, and the server trusts
// it from loopback, so that Caddy's client_ip tells the 300 pollers apart
// as if they came from 300 hosts. The plain variant is reverse_proxy with
// the response header timeout the README recommends; the statusgate
// variant adds statusgate with its defaults and one key, and a rate_limit
// zone after it, per client IP ({http.statusgate.client}) for callers without
// a key. The zone's name carries the
// round, because caddy-ratelimit keeps a zone's state across config loads.
func site(c config, variant string, round, gwPort, simPort int) string {
	var gate string
	if variant == statusgate {
		gate = fmt.Sprintf(`	rate_limit {
		zone anonymous_%d {
			match {
				not header X-API-Key *
			}
			key {http.statusgate.client}
			events %d
			window %s
		}
	}
	statusgate {
		key %s
	}
`, round, c.anonEvents, c.anonWindow, botKey)
	}
	order := ""
	if variant == statusgate {
		// After the gateway, so that its 429 comes back as the envelope and
		// its key can be the gateway's {http.statusgate.client}.
		order = "\torder rate_limit after statusgate\n"
	}
	return fmt.Sprintf(`{
%s	admin off
	auto_https off
	persist_config off
	grace_period 1s
	log {
		level ERROR
	}
	servers {
		trusted_proxies static 127.0.0.0/8
		client_ip_headers X-Forwarded-For
	}
}

http://:%d {
	bind 127.0.0.1
%s	reverse_proxy 127.0.0.1:%d {
		transport http {
			dial_timeout 2s
			response_header_timeout 5s
		}
	}
}

http://:%d {
	bind 127.0.0.1
	statusgate_sim {
		seed 1
		frozen off
		name %s
%s	}
}
`, order, gwPort, gate, simPort, simPort, simName, simLatency(c))
}

// simLatency writes the latency lines that differ from the sim's defaults.
func simLatency(c config) string {
	if c.placeholderWork == "" {
		return ""
	}
	return fmt.Sprintf("\t\tlatency placeholders %s\n", c.placeholderWork)
}

// load adapts and loads a Caddyfile into this process's Caddy, replacing
// whatever ran before.
func load(caddyfile string) error {
	cfg, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		return fmt.Errorf("adapt: %v\n%s", err, caddyfile)
	}
	if len(warnings) > 0 {
		var w []string
		for _, x := range warnings {
			w = append(w, x.String())
		}
		return fmt.Errorf("adapt warnings: %s", strings.Join(w, "; "))
	}
	return caddy.Load(cfg, true)
}

// unload stops the running config. The sim's queue drains at once then, so
// the next round starts on an idle backend.
func unload() {
	_ = caddy.Stop()
	time.Sleep(100 * time.Millisecond)
}
