package caddymodule

// This file is a network's configuration (network <cluster-id> { ... }):
// its servers, each a fixed server, and what is checked of them before the
// handler joins their guards (joinNetwork).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

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
	// ProxyRaw (JSON "proxy") was left out for it (Handler.adopt): the member is counted with
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
		return nil, false, errors.New("network.cluster: missing: name the network, as the plugin's network.cluster-id (Caddyfile: network CLUSTER-ID { ... })")
	case len(c.Servers) == 0:
		return nil, false, errors.New("network.servers: none: list the member servers, each with its id and proxy (Caddyfile: server SERVER-ID UPSTREAM...)")
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
			if dial, l, how, ok := ownListener(be, listen); ok {
				return nil, false, fmt.Errorf("%s '%s'.proxy: %s: %s is this gateway's own listener, %s%s: a member is another game server, and a gateway that asks itself for a member's status gets its own server's again, whose players count twice", path, s.ID, be, dial, l, how)
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
// addresses the gateway's server listens on (caddyhttp.Server.Listen), and
// says how (how, "" for the same address): the same address in any
// spelling, the same Unix socket by any path, or, where the server listens
// on every address, its port at any address of this machine (any loopback
// address, the machine's own, their IPv4-mapped forms). A host name is
// resolved (lookupIP, within resolveTimeout for the member), only when its
// port is the listener's; one that does not resolve is compared by name.
func ownListener(be *upstream.Backend, listen []string) (dial, listener, how string, found bool) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	names := hostAddrs{ctx: ctx, known: map[string][]netip.Addr{}}
	for _, l := range listen {
		ln, err := caddy.ParseNetworkAddress(l)
		if err != nil || ln.IsFdNetwork() {
			continue // a socket Caddy is handed: its address is not written
		}
		for _, d := range be.Dials() {
			dn, err := caddy.ParseNetworkAddress(d)
			if err != nil {
				continue
			}
			if how, ok := names.reaches(dn, ln); ok {
				return d, l, how, true
			}
		}
	}
	return "", "", "", false
}

// resolveTimeout bounds the resolving of the host names ownListener
// compares, for one member: a load waits no longer for a DNS that does not
// answer, and a name it could not resolve is compared by name.
const resolveTimeout = 2 * time.Second

// lookupIP resolves a host name; a variable, for tests.
var lookupIP = net.DefaultResolver.LookupNetIP

// hostAddrs are the addresses of the hosts ownListener compares, each
// resolved once, under ctx.
type hostAddrs struct {
	ctx   context.Context
	known map[string][]netip.Addr
}

// reaches reports whether the dial d reaches the listener l, and how.
func (h hostAddrs) reaches(d, l caddy.NetworkAddress) (how string, ok bool) {
	if d.IsUnixNetwork() || l.IsUnixNetwork() {
		if d.IsUnixNetwork() && l.IsUnixNetwork() && sameSocket(d.Host, l.Host) {
			return " (the same Unix socket)", true
		}
		return "", false
	}
	if d.StartPort < l.StartPort || d.StartPort > l.EndPort {
		return "", false
	}
	dh, lh := upstream.Host(d.Host), upstream.Host(l.Host)
	if dh == lh {
		return "", true
	}
	ips := h.addrs(dh)
	if lh == "" || isUnspecified(lh) {
		for _, ip := range ips {
			if onThisMachine(ip) {
				return fmt.Sprintf(" (%s, an address of this machine, on the port of a server that listens on every address)", reachedAs(dh, ip)), true
			}
		}
		return "", false
	}
	for _, ip := range ips {
		if slices.Contains(h.addrs(lh), ip) {
			return fmt.Sprintf(" (%s)", reachedAs(dh, ip)), true
		}
	}
	return "", false
}

// reachedAs is ip, the address the host is or resolved to, for a message.
func reachedAs(host string, ip netip.Addr) string {
	switch _, err := netip.ParseAddr(host); {
	case err == nil:
		return host
	case host == "loopback" || host == "":
		return ip.String()
	}
	return fmt.Sprintf("%s resolves to %s", host, ip)
}

// addrs are the addresses a connection to host (as upstream.Host spells
// it) reaches: loopback's two, which an unspecified address or none
// (0.0.0.0, ::, "") reaches too; an IP address itself; a name's as it
// resolves now (none when it does not), each IPv4-mapped address as IPv4.
func (h hostAddrs) addrs(host string) []netip.Addr {
	switch ip, err := netip.ParseAddr(host); {
	case err == nil && !ip.IsUnspecified():
		return []netip.Addr{ip}
	case err == nil, host == "loopback", host == "":
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
	}
	if ips, ok := h.known[host]; ok {
		return ips
	}
	ips, _ := lookupIP(h.ctx, "ip", host)
	for i, ip := range ips {
		ips[i] = ip.Unmap().WithZone("")
	}
	h.known[host] = ips
	return ips
}

// isUnspecified reports whether host is an address that listens on every
// address of the machine (0.0.0.0, ::).
func isUnspecified(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}

// onThisMachine reports whether ip reaches this machine: any loopback
// address (all of 127.0.0.0/8), an unspecified one, or one of the
// machine's own.
func onThisMachine(ip netip.Addr) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Unmap().WithZone("") == ip {
			return true
		}
	}
	return false
}

// sameSocket reports whether the Unix socket paths dial and listen (a
// listener's, which may end in |<permission bits>) name one socket: the
// same path once made absolute, with the links of its directory followed,
// or one file (os.SameFile) where both exist. An abstract socket (@name)
// is only itself.
func sameSocket(dial, listen string) bool {
	listen, _, _ = strings.Cut(listen, "|")
	if dial == listen {
		return true
	}
	if strings.HasPrefix(dial, "@") || strings.HasPrefix(listen, "@") {
		return false
	}
	a, b := socketPath(dial), socketPath(listen)
	if a == b {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// socketPath is the path p of a Unix socket, absolute, with the links of
// its directory followed where it exists.
func socketPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	dir, file := filepath.Split(p)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(real, file)
	}
	return filepath.Clean(p)
}
