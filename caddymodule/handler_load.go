package caddymodule

// This file is a handler's part in its config load: what the load's app
// (App) asks of the handlers that register with it, its tenants.

import "github.com/caddyserver/caddy/v2"

// retire ends the handler's part in its load, which is stopping (App.Handle):
// its live streams end, so that their clients reconnect to the config that
// replaces this one (or to another gateway, when the process stops), and,
// unless the process is stopping, the handler refuses from now on: a
// request its server still accepts (during shutdown_delay, on a listener
// the new config shares) is the new config's to answer (handOver). While
// the process stops, with no config after it, plain requests are served
// until the servers close, as shutdown_delay means.
func (h *Handler) retire() {
	if !caddy.Exiting() {
		h.superseded.Store(true)
	}
	h.live.end()
}

// needsNext reports whether h needs a handler after it to reach its
// backend: it declares none (the form of 1.0: no upstreams, no server
// <name>), and one of its enabled endpoints goes there, one other than the
// index and a network it answers itself without a member of its own (self,
// which it reaches through the handlers after it).
func (h *Handler) needsNext() bool {
	if h.ProxyRaw != nil {
		return false
	}
	if h.table == nil {
		return true
	}
	for _, ep := range h.table.ordered {
		switch {
		case !ep.enabled || ep.Name == "index":
		case ep.Name == "network" && h.network != nil && h.Network.Self == "":
		default:
			return true
		}
	}
	return false
}

// Interface guards
var _ tenant = (*Handler)(nil)
