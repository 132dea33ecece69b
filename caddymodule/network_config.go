package caddymodule

// This file is a network's configuration (network <cluster-id> { ... }):
// its servers, each a fixed server, and what is checked of them before the
// handler joins their guards (network.go).

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
	"github.com/statusgate/statusgate/internal/ident"
)

// NetworkConfig is a network of game servers whose /api/v1/network the
// gateway answers itself (docs/network.md): the plugin's network document,
// built from each member's /api/v1/status instead of heartbeats in Redis.
// It needs the network endpoint enabled ("endpoints": {"network": true}).
type NetworkConfig struct {
	// Cluster is the network's name, the document's cluster (the plugin's
	// network.cluster-id): letters, digits, '_' and '-'. Required.
	Cluster string `json:"cluster"`

	// Servers are the member servers, at least one, in the order the
	// document lists them.
	Servers []NetworkServer `json:"servers"`

	// Self is the id of the member that is this handler's own backend: its
	// /status is fetched through this handler's guard and proxy, and it is
	// the document's thisServer. With a declared backend, that member must
	// declare the same upstreams. Default: none, and thisServer is "".
	Self string `json:"self,omitempty"`
}

// NetworkServer is one member server of a network.
type NetworkServer struct {
	// ID is the server's name in the document (its server) and in
	// meta.unreachable: letters, digits, '_' and '-', each once. Required.
	ID string `json:"id"`

	// ProxyRaw is the server's backend, as a handler's proxy declares one: the
	// JSON of Caddy's reverse_proxy handler without "handler", at least
	// {"upstreams": [{"dial": "10.0.0.3:8080"}]}. It names the member's
	// guard, so that a handler that declares the same backend (statusgate
	// 10.0.0.3:8080) shares the guard and its counts. A member is a fixed
	// server: no placeholder may pick it, and it may not be the gateway's
	// own listener. Absent: the server the statusgate app declares under
	// ID, with its own limits.
	ProxyRaw json.RawMessage `json:"proxy,omitempty"`

	// declared is the server the statusgate app declares under ID, when
	// Proxy was left out for it (Handler.adopt): the member is counted with
	// the server's own limits.
	declared *Server
}

// networkIDError says why id, the value of the option at path, is no name,
// or nil: the Caddyfile's rule and the JSON's.
func networkIDError(path, id string) error {
	if ident.Valid(id) {
		return nil
	}
	return fmt.Errorf("%s: '%s' is not a name of letters, digits, '_' and '-'", path, id)
}

// networkSwitchError says why a network config cannot be meant with these
// endpoint switches and backend options, or nil: the block is there and the
// network endpoint is off by default (a network that answers nothing), or
// the network endpoint has a cache or snapshot time of its own (its answer
// follows the members' /status).
func networkSwitchError(endpoints map[string]bool, b BackendConfig) error {
	if _, set := endpoints["network"]; !set {
		return errors.New("the network endpoint is off (its default), so the network would answer nothing: enable it (Caddyfile: enable network; JSON: \"endpoints\": {\"network\": true})")
	}
	for _, section := range []struct {
		name string
		m    map[string]caddy.Duration
	}{{"cache", b.Cache}, {"snapshot", b.Snapshot}} {
		if _, set := section.m["network"]; set {
			return fmt.Errorf("%s network: the gateway answers network from the members' /status, which is cached and polled for status's times: set %s status instead", section.name, section.name)
		}
	}
	return nil
}

// parse refuses a network config that is incomplete or cannot be meant,
// naming the option by its JSON path, and parses the members' backends
// (by server); own is the handler's declared backend (nil: the form of
// 1.0), which self must declare too; listen is what the handler's server
// listens on, which no other member may be. on says the network endpoint is
// enabled: a network whose endpoint the config switches off on purpose is
// checked, and not joined.
func (c *NetworkConfig) parse(endpoints map[string]bool, b BackendConfig, own *upstream.Backend, listen []string) (backends []*upstream.Backend, on bool, err error) {
	if err := networkSwitchError(endpoints, b); err != nil {
		return nil, false, fmt.Errorf("network: %v", err)
	}
	switch {
	case c.Cluster == "":
		return nil, false, errors.New("network.cluster: missing: name the network, as the plugin's network.cluster-id (Caddyfile: network <cluster-id> { ... })")
	case len(c.Servers) == 0:
		return nil, false, errors.New("network.servers: none: list the member servers, each with its id and proxy (Caddyfile: server <server-id> <upstream>...)")
	}
	if err := networkIDError("network.cluster", c.Cluster); err != nil {
		return nil, false, err
	}
	ids := map[string]int{}
	byServer := map[string]int{}
	for i, s := range c.Servers {
		path := fmt.Sprintf("network.servers[%d]", i)
		if s.ID == "" {
			return nil, false, fmt.Errorf("%s.id: missing: give each server the name the document shows", path)
		}
		if err := networkIDError(path+".id", s.ID); err != nil {
			return nil, false, err
		}
		if j, dup := ids[s.ID]; dup {
			return nil, false, fmt.Errorf("%s.id: '%s' is network.servers[%d]'s id too: each server once", path, s.ID, j)
		}
		ids[s.ID] = i
		be, err := upstream.Parse(path+" '"+s.ID+"'.proxy", s.ProxyRaw)
		if err != nil {
			return nil, false, err
		}
		if why := memberRefusal(be); why != "" {
			return nil, false, fmt.Errorf("%s '%s'.proxy: %s", path, s.ID, why)
		}
		if j, dup := byServer[be.Server()]; dup {
			return nil, false, fmt.Errorf("%s '%s'.proxy: %s is the server network.servers[%d] '%s' declares as %s: one server under two ids would count its players twice", path, s.ID, be, j, c.Servers[j].ID, backends[j])
		}
		byServer[be.Server()] = i
		if s.ID != c.Self {
			if dial, l, ok := ownListener(be, listen); ok {
				return nil, false, fmt.Errorf("%s '%s'.proxy: %s is this gateway's own listener, %s: a member is a game server, and a gateway that asks itself for a member's status asks itself again", path, s.ID, dial, l)
			}
		}
		backends = append(backends, be)
	}
	if c.Self != "" {
		i, ok := ids[c.Self]
		switch {
		case !ok:
			return nil, false, fmt.Errorf("network.self: '%s' is no server of the network (its servers: %s)", c.Self, strings.Join(slices.Sorted(maps.Keys(ids)), ", "))
		case own != nil && !backends[i].Is(own):
			return nil, false, fmt.Errorf("network.self: '%s' is this handler's own backend, but network.servers[%d] '%s' %s", c.Self, i, c.Self, selfMismatch(backends[i], own))
		}
	}
	return backends, endpoints["network"], nil
}

// memberRefusal says why be cannot be a network member's backend, or "":
// a member is a fixed server, and a placeholder in what picks the server
// (its dials, its Host, a rewrite) would let each caller pick the address
// the gateway asks, on the network's behalf.
func memberRefusal(be *upstream.Backend) string {
	if names := be.Picking(); len(names) > 0 {
		return fmt.Sprintf("{%s} picks the server for each request, so a caller would pick what the gateway asks: a member is a fixed server; name its address", strings.Join(names, "}, {"))
	}
	return ""
}

// selfMismatch says how self, the member a network's self names, is not
// own, the handler's backend, for the Caddyfile's message and the JSON's:
// other upstreams, or the same with a block that picks another server.
func selfMismatch(self, own *upstream.Backend) string {
	if self.SameUpstreams(own) {
		return fmt.Sprintf("declares this statusgate's upstreams, %s, with a block that picks another server than the statusgate's proxy block (a Host, a rewrite, TLS: one address for two servers told apart by Host is two backends): give it no block, or the statusgate's proxy block", self)
	}
	return fmt.Sprintf("declares %s, and this statusgate's backend is %s: give it the same upstreams", self, own)
}

// ownListener finds a dial of the member be that reaches one of listen, the
// addresses the gateway's server listens on (caddyhttp.Server.Listen):
// the same address, or the same port on this machine where the gateway
// listens on every address. It returns the dial and the listener.
func ownListener(be *upstream.Backend, listen []string) (dial, listener string, found bool) {
	for _, l := range listen {
		na, err := caddy.ParseNetworkAddress(l)
		if err != nil || na.IsUnixNetwork() {
			continue
		}
		every := na.Host == "" || isUnspecified(na.Host)
		for port := na.StartPort; ; port++ {
			own := upstream.Address(net.JoinHostPort(na.Host, strconv.FormatUint(uint64(port), 10)))
			for _, d := range be.Dials() {
				if d == own || every && local(d, port) {
					return d, l, true
				}
			}
			if port >= na.EndPort {
				break
			}
		}
	}
	return "", "", false
}

// isUnspecified reports whether host is an address that listens on every
// address of the machine (0.0.0.0, ::).
func isUnspecified(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}

// local reports whether d, an address as upstream.Address reads it,
// reaches this machine on port: loopback, an unspecified address, or one
// of the machine's own.
func local(d string, port uint) bool {
	_, hostport, _ := strings.Cut(d, "/")
	host, p, err := net.SplitHostPort(hostport)
	if err != nil || p != strconv.FormatUint(uint64(port), 10) {
		return false
	}
	if host == "loopback" || isUnspecified(host) {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Unmap() == ip {
			return true
		}
	}
	return false
}
