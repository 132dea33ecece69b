package caddymodule

// This file is the Caddyfile's network block: the NetworkConfig of the
// network it configures (networkState).

import (
	"slices"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
)

// networkLines is where a network block's words are, for the errors that
// can only be told once the whole statusgate block is read.
type networkLines struct {
	network caddyfile.Token // the word network
	self    caddyfile.Token // the word self; zero without one
}

// networkBlock reads the network block at d's current token:
//
//	network <cluster-id> {
//		server <server-id> <upstream>... [{
//			<reverse_proxy subdirectives>
//		}]
//		self   <server-id>
//	}
//
// Each server is declared as statusgate <upstream>... { proxy { ... } }
// declares a backend, into the same JSON, so that both name the same guard.
// Every error names the word and the line.
func networkBlock(d *caddyfile.Dispenser) (*NetworkConfig, networkLines, error) {
	lines := networkLines{network: d.Token()}
	if !d.NextArg() {
		return nil, lines, d.Errf("network: name the network: network <cluster-id> { server <server-id> <upstream>... }")
	}
	c := &NetworkConfig{Cluster: d.Val()}
	if err := networkIDError("network", c.Cluster); err != nil {
		return nil, lines, d.Errf("%v", err)
	}
	if d.NextArg() {
		return nil, lines, d.ArgErr()
	}
	var proxies [][]byte // by server, to tell two ids of one backend
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "server":
			s, proxy, err := networkServer(d, c, proxies)
			if err != nil {
				return nil, lines, err
			}
			c.Servers = append(c.Servers, s)
			proxies = append(proxies, proxy)

		case "self":
			if c.Self != "" {
				return nil, lines, d.Errf("'self' given twice")
			}
			lines.self = d.Token()
			if !d.NextArg() {
				return nil, lines, d.Errf("self: name the server that is this statusgate's own backend: self <server-id>")
			}
			c.Self = d.Val()
			if err := networkIDError("self", c.Self); err != nil {
				return nil, lines, d.Errf("%v", err)
			}
			if d.NextArg() {
				return nil, lines, d.ArgErr()
			}

		default:
			return nil, lines, d.Errf("unrecognized network subdirective '%s'", opt)
		}
	}
	if len(c.Servers) == 0 {
		return nil, lines, errAt(lines.network, "network %s: no servers: list each member as server <server-id> <upstream>...", c.Cluster)
	}
	if c.Self != "" && !slices.ContainsFunc(c.Servers, func(s NetworkServer) bool { return s.ID == c.Self }) {
		return nil, lines, errAt(lines.self, "self: '%s' is no server of network %s", c.Self, c.Cluster)
	}
	return c, lines, nil
}

// networkServer reads a server line of the network block c, whose servers
// so far declare proxies: its id, its upstreams and its optional block of
// reverse_proxy subdirectives, read as a statusgate line and its proxy
// block are.
func networkServer(d *caddyfile.Dispenser, c *NetworkConfig, proxies [][]byte) (NetworkServer, []byte, error) {
	seg := d.NextSegment()
	sd := caddyfile.NewDispenser(seg)
	sd.Next() // server
	if !sd.NextArg() {
		return NetworkServer{}, nil, sd.Errf("server: name the server and its upstream(s): server <server-id> <upstream>...")
	}
	s := NetworkServer{ID: sd.Val()}
	if err := networkIDError("server", s.ID); err != nil {
		return s, nil, sd.Errf("%v", err)
	}
	if i := slices.IndexFunc(c.Servers, func(o NetworkServer) bool { return o.ID == s.ID }); i >= 0 {
		return s, nil, sd.Errf("server %s: given twice: each server once", s.ID)
	}
	upstreams := sd.RemainingArgsAsTokens()
	if len(upstreams) == 0 {
		if len(seg) > 2 {
			return s, nil, sd.Errf("server %s: a block without upstreams: write server %s <upstream>... { ... }, or declare %s once in the global statusgate option and write server %s alone", s.ID, s.ID, s.ID, s.ID)
		}
		// A server declared once in the global statusgate option
		// (Handler.adopt finds it when the handler is provisioned).
		return s, nil, nil
	}
	var block caddyfile.Segment
	if rest := seg[2+len(upstreams):]; len(rest) > 0 {
		block = append(caddyfile.Segment{seg[0]}, rest...)
		if err := refuseAnswering(block); err != nil {
			return s, nil, err
		}
	}
	proxy, err := parseProxy(seg[0], upstreams, block)
	if err != nil {
		return s, nil, err
	}
	be, err := upstream.Parse("server "+s.ID, proxy)
	if err != nil {
		return s, nil, sd.Errf("%v", err)
	}
	if why := memberRefusal(be); why != "" {
		return s, nil, sd.Errf("server %s: %s", s.ID, why)
	}
	for i, p := range proxies {
		if other, err := upstream.Parse("server", p); err == nil && other.Server() == be.Server() {
			return s, nil, sd.Errf("server %s: %s is the server that server %s declares as %s: one server under two ids would count its players twice", s.ID, be, c.Servers[i].ID, other)
		}
	}
	s.ProxyRaw = proxy
	return s, proxy, nil
}

// networkAfter checks, once the whole statusgate block is read, what a
// network block c at lines cannot be with the rest of it: the network
// endpoint left off (or given a cache time of its own), or self declared
// with other upstreams than the statusgate line's proxy. The endpoint
// switches are the handler's over those of the global option's defaults
// (global, nil: none), which the handler takes when it loads.
func networkAfter(c *NetworkConfig, lines networkLines, h *Handler, global *App) error {
	endpoints := h.Endpoints
	if global != nil && global.Defaults != nil {
		endpoints = mergeEndpoints(h.Endpoints, global.Defaults.Endpoints)
	}
	if err := networkSwitchError(endpoints, h.Backend); err != nil {
		return errAt(lines.network, "network %s: %v", c.Cluster, err)
	}
	if c.Self == "" || h.ProxyRaw == nil {
		return nil
	}
	if i := slices.IndexFunc(c.Servers, func(s NetworkServer) bool { return s.ID == c.Self }); c.Servers[i].ProxyRaw == nil {
		return nil // a declared server: checked when the handler is provisioned
	}
	own, err := upstream.Parse("proxy", h.ProxyRaw)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(c.Servers, func(s NetworkServer) bool { return s.ID == c.Self })
	self, err := upstream.Parse("server "+c.Self, c.Servers[i].ProxyRaw)
	if err != nil {
		return err
	}
	if !self.Is(own) {
		return errAt(lines.self, "self %s: self names the server the statusgate line fronts, and server %s %s", c.Self, c.Self, selfMismatch(self, own))
	}
	return nil
}
