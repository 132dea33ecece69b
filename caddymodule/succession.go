package caddymodule

// This file is what ends a handler's config: the moment a newer config takes
// over (a reload) or the process stops, the handler's live streams end and,
// on a reload, the handler hands what still reaches it to the config in
// force (docs/live.md, "On reload"). Caddy cleans a config's modules up only
// after its servers have stopped, and a server stops only after
// shutdown_delay (when a listener closes) and after its handlers have
// returned: so Cleanup alone let the old policy serve for the whole delay on
// a listener both configs share, and let a stream hold a graceful stop until
// its stream_lifetime.

import (
	"errors"
	"net"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
)

// errSuperseded is why a request that reached a config a newer one has
// replaced is refused.
var errSuperseded = errors.New("the config has been replaced")

// supersededRefusal answers a request that reached a config a newer one has
// replaced and that no server of the config in force would have received
// (handOver): the 503 of a busy backend, with Retry-After, as a stream that
// reaches a closing config gets.
func supersededRefusal() guard.Verdict { return guard.Busy(errSuperseded, "1") }

// handOver serves r, which reached a handler whose config a newer one has
// replaced, with the server of the config in force that listens where r
// arrived, as if r had come on a new connection: its routes, its keys, its
// policy and its access log. It reports false, having written nothing, when
// there is no such server (the new config dropped the address).
//
// Refusing instead fails clients: Caddy keeps the old server's connections
// open until its shutdown (kept-alive HTTP/1.1 and HTTP/2 connections send
// their next requests to it, for the whole shutdown_delay when there is
// one), and keeps its listener accepting until then, beside the new one's
// (SO_REUSEPORT: about half of the new connections reach it). A 503 is a
// failure to most clients, and so is a connection closed on a client's
// first request, which none retries; only a request the new config answers
// is invisible, and a key the reload removed is refused by it at once.
func handOver(w http.ResponseWriter, r *http.Request) bool {
	next := successor(r)
	if next == nil {
		return false
	}
	// The new server logs the request, as it would a request on a
	// connection of its own; the old one must not log it a second time.
	caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
	next.ServeHTTP(w, asReceived(r))
	return true
}

// successor is the server of the config in force that listens on the
// address r arrived at, which the server r reached (superseded) listens on
// too; nil: none, or r's server is the one in force.
func successor(r *http.Request) *caddyhttp.Server {
	old, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if old == nil {
		return nil
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	at, ok := listenAddress(old.Listen, local)
	if !ok {
		return nil
	}
	v, err := caddy.ActiveContext().AppIfConfigured("http")
	if err != nil {
		return nil
	}
	app, ok := v.(*caddyhttp.App)
	if !ok {
		return nil
	}
	for _, s := range app.Servers {
		if s == old {
			return nil // not superseded after all: never serve r twice
		}
		if a, ok := listenAddress(s.Listen, local); ok && a.Network == at.Network && a.Host == at.Host {
			if (r.TLS != nil) != (len(s.TLSConnPolicies) > 0) {
				// The new config serves the address over TLS where the
				// old did not, or the other way round: its routes are not
				// for what came this way.
				return nil
			}
			return s
		}
	}
	return nil
}

// listenAddress is the address among listen (a server's) that takes the
// connections local is the local end of: its port in the address's range.
// Without local (a listener that gives none), a server with one address
// is read as that address.
func listenAddress(listen []string, local net.Addr) (caddy.NetworkAddress, bool) {
	port := -1
	if tcp, ok := local.(*net.TCPAddr); ok {
		port = tcp.Port
	} else if udp, ok := local.(*net.UDPAddr); ok {
		port = udp.Port
	}
	for _, l := range listen {
		na, err := caddy.ParseNetworkAddress(l)
		if err != nil {
			continue
		}
		if port < 0 && len(listen) == 1 || port >= 0 && uint(port) >= na.StartPort && uint(port) <= na.EndPort {
			return na, true
		}
	}
	return caddy.NetworkAddress{}, false
}

// asReceived is r as the client sent it, before the old config's routes
// rewrote its target (a handle_path, a rewrite): what the new server's
// routes must match.
func asReceived(r *http.Request) *http.Request {
	r2 := r.Clone(r.Context())
	if or, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && or.URL != nil {
		u := *or.URL
		r2.URL, r2.RequestURI, r2.Method = &u, or.RequestURI, or.Method
	}
	return r2
}
