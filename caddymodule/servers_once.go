package caddymodule

// This file keeps a declared server declared once: a handler or a network
// member that names a declared server's upstreams itself, instead of
// `server <name>`, would front it at a guard of its own, outside the limits
// the declaration gives it (6 requests at the backend against its 2), so
// it is refused; and a declared server that nothing fronts is warned of.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
)

// declaredServer is the name of the server of servers whose upstreams the
// backend declaration raw reaches (one dial in common, whatever its
// spelling: upstream.Address), or "". A declaration that does not parse is
// left to the check that names its error.
func declaredServer(raw json.RawMessage, servers map[string]*Server) string {
	if len(raw) == 0 || len(servers) == 0 {
		return ""
	}
	b, err := upstream.Parse("proxy", raw)
	if err != nil {
		return ""
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s := servers[name]
		if s == nil {
			continue
		}
		d, err := upstream.Parse("servers."+name+".proxy", s.ProxyRaw)
		if err != nil {
			continue
		}
		for _, dial := range b.Dials() {
			if slices.Contains(d.Dials(), dial) {
				return name
			}
		}
	}
	return ""
}

// declaredTwice is the error for the backend at path (the handler's proxy,
// or a network's server) that reaches the declared server name, written
// with fix (what to write instead), or nil when it reaches none of
// servers.
func declaredTwice(raw json.RawMessage, servers map[string]*Server, what, fix string) error {
	name := declaredServer(raw, servers)
	if name == "" {
		return nil
	}
	return fmt.Errorf("%s reach server %s, which the global statusgate option declares with its limits: %s, so that every request to it counts at one guard, under those limits", what, name, fmt.Sprintf(fix, name))
}

// checkDeclaredOnce refuses a handler h, read from the Caddyfile or JSON
// and not yet given its server's backend, whose own upstreams or network
// members reach a server of servers: errors name the JSON paths.
func (h *Handler) checkDeclaredOnce(servers map[string]*Server) error {
	if h.Server == "" {
		if err := declaredTwice(h.ProxyRaw, servers, "proxy: its upstreams", `write "server": "%s" in place of "proxy"`); err != nil {
			return err
		}
	}
	if h.Network != nil {
		for i, m := range h.Network.Servers {
			if err := declaredTwice(m.ProxyRaw, servers, fmt.Sprintf("network.servers[%d] '%s': its upstreams", i, m.ID), `list it as {"id": "%s"} without "proxy"`); err != nil {
				return err
			}
		}
	}
	return nil
}

// reference records that a handler or network of the load fronts the
// declared server name.
func (a *App) reference(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.referenced == nil {
		a.referenced = map[string]bool{}
	}
	a.referenced[name] = true
}

// warnUnreferenced warns, once the load's handlers are provisioned, of
// each declared server that no handler and no network fronts: most often
// a migration left half done (a handler still naming its upstreams is
// refused; one naming another server is not).
func (a *App) warnUnreferenced(logger *zap.Logger) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(a.Servers)) {
		if !a.referenced[name] {
			logger.Warn("a server declared in the global statusgate option is fronted by no statusgate handler and listed by no network: write server "+name+" in the handler that fronts it, or delete its declaration",
				zap.String("server", name))
		}
	}
}
