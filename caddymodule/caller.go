package caddymodule

// This file is the caller: who sent a request, as far as one endpoint is
// concerned, and the name the per-client limits count it by.

import (
	"net/http"
	"net/netip"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
)

// caller is who sent the request, as far as one endpoint is concerned: worked
// out once per request after routing, from the accepted key and its scope.
// A key outside its scope counts for nothing: its caller is, in everything
// the client can see or the limits count, a caller without a key.
type caller struct {
	// key is the accepted key's keyring position, or noKey. It is kept when
	// the key does not count here, for the key placeholder alone.
	key int
	// name is the accepted key's name, as the key placeholder's value: the
	// empty string without one.
	name any
	// Caller is what the guard is told: whether the key counts here,
	// the name the per-client limits count the caller by (worked out only
	// for a request that goes to the backend step, withAddress, so that a
	// refusal costs the same whoever asks), its cap and its share.
	guard.Caller
}

// noValue is the empty placeholder value, made an interface value once:
// turning a string into one on every request would allocate.
var noValue any = ""

// anonymous is the caller of a request decided before its endpoint is known.
var anonymous = caller{key: noKey, name: noValue}

// callerFor is the caller of a request to ep that presented key (a keyring
// position, or noKey).
func (a *access) callerFor(key int, ep *endpoint) caller {
	c := caller{key: key, name: noValue, Caller: guard.Caller{Authenticated: !a.authOn}}
	if key == noKey {
		return c
	}
	k := &a.keyInfo[key]
	c.name = k.name
	if k.opens(ep.Name) {
		c.Keyed, c.Authenticated = true, true
		c.Holder, c.KeyCap, c.Held = k.holder, k.maxInFlight, k.held
	}
	return c
}

// withAddress names a caller whose key does not count by its address (an
// IPv6 address by its prefix of prefix6 bits), for the per-client limits.
func (c caller) withAddress(r *http.Request, prefix6 int) caller {
	if !c.Keyed {
		c.Holder = clientAddress(r, prefix6)
	}
	return c
}

// clientAddress is the caller's address as Caddy determined it (after
// trusted_proxies), or the connection's; an IPv6 address stands for its
// prefix of prefix6 bits, because one host commonly has a whole /64 to pick
// addresses from.
func clientAddress(r *http.Request, prefix6 int) string {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			return r.RemoteAddr
		}
		addr = ap.Addr()
	}
	addr = addr.Unmap()
	if addr.Is4() || prefix6 >= 128 {
		return addr.String()
	}
	p, _ := addr.WithZone("").Prefix(prefix6)
	return p.String()
}
