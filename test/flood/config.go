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

// maxInFlight is statusgate's default max_in_flight, the bound the
// backend's concurrency is held to.
const maxInFlight = 8

// site is one round's Caddy config: the gateway on gwPort in front of the
// capacity-modelled sim on simPort, which the harness serves itself
// (backend.go), so that a reload of this config does not restart it.
//
// Every client sends its own X-Forwarded-For address, and the server trusts
// it from loopback, so that Caddy's client_ip tells the 300 pollers apart
// as if they came from 300 hosts. The server speaks HTTP/1.1 and h2c (HTTP/2
// without TLS, by prior knowledge), so that the stalled HTTP/2 streams
// reach it. The plain variant is reverse_proxy with the response header
// timeout that docs/configuration.md recommends; the statusgate variant is
// statusgate with its defaults and one key, declaring the same backend with
// the same transport, and a rate_limit zone after it, per client IP
// ({http.statusgate.client}) for callers without a key. The zone's name
// carries the load's sequence number, because caddy-ratelimit keeps a
// zone's state across config loads (a reload within a round keeps it, as a
// real reload would).
//
// limit, when positive, is statusgate's max_in_flight: a -reload-limits
// round's reloads change it under the flood.
func site(c config, variant string, seq, gwPort, simPort, limit int) string {
	const transport = `transport http {
			dial_timeout 2s
			response_header_timeout 5s
		}`
	handler := fmt.Sprintf("\treverse_proxy 127.0.0.1:%d {\n\t\t%s\n\t}\n", simPort, transport)
	limitLine := ""
	if limit > 0 {
		limitLine = fmt.Sprintf("\n\t\tmax_in_flight %d", limit)
	}
	if variant == statusgate {
		handler = fmt.Sprintf(`	rate_limit {
		zone anonymous_%d {
			match {
				not header X-API-Key *
			}
			key {http.statusgate.client}
			events %d
			window %s
		}
	}
	statusgate 127.0.0.1:%d {
		key %s%s
		proxy {
			%s
		}
	}
`, seq, c.anonEvents, c.anonWindow, simPort, botKey, limitLine, strings.ReplaceAll(transport, "\n", "\n\t"))
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
		protocols h1 h2c
	}
}

http://:%d {
	bind 127.0.0.1
%s}
`, order, gwPort, handler)
}

// simBlock is the sim's Caddyfile block: live data from a fixed seed, the
// realistic capacity model, and the modded items that make the large
// public answer the stalled readers ask for.
func simBlock(c config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "statusgate_sim {\n\tseed 1\n\tfrozen off\n\tname %s\n", simName)
	if c.moddedItems > 0 {
		fmt.Fprintf(&b, "\tmodded_items %d\n", c.moddedItems)
	}
	if c.placeholderWork != "" {
		fmt.Fprintf(&b, "\tlatency placeholders %s\n", c.placeholderWork)
	}
	b.WriteString("}\n")
	return b.String()
}

// adapt turns a Caddyfile into the JSON config that load takes.
func adapt(caddyfile string) ([]byte, error) {
	cfg, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		return nil, fmt.Errorf("adapt: %v\n%s", err, caddyfile)
	}
	if len(warnings) > 0 {
		var w []string
		for _, x := range warnings {
			w = append(w, x.String())
		}
		return nil, fmt.Errorf("adapt warnings: %s", strings.Join(w, "; "))
	}
	return cfg, nil
}

// load loads a JSON config into this process's Caddy, replacing whatever
// ran before, even the same config (a forced reload, as `caddy reload
// --force` does).
func load(cfg []byte) error {
	return caddy.Load(cfg, true)
}

// unload stops the running config.
func unload() {
	_ = caddy.Stop()
	time.Sleep(100 * time.Millisecond)
}
