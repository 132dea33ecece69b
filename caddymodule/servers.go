package caddymodule

// This file is the servers written once: the game servers the config's
// handlers and networks front, each declared once by name with its limits
// (Server), and how a handler takes a declaration's options (setOption,
// takeOptions, withServer). They are the statusgate app's config, beside
// its Defaults (docs/network.md): the Caddyfile's global statusgate option
// writes them.

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	"github.com/statusgate/statusgate/caddymodule/internal/confjson"
)

// Server is a game server declared once, by name, in the statusgate app:
// its backend and its limits. Every handler whose `server` names it, and
// every network that lists it, fronts it with these limits and counts it at
// one guard.
type Server struct {
	// ProxyRaw is the server's backend, as a handler's proxy declares one:
	// the JSON of Caddy's reverse_proxy handler without "handler", at least
	// {"upstreams": [{"dial": "10.0.0.3:8080"}]}. Required.
	ProxyRaw json.RawMessage `json:"proxy"`

	// Backend holds the server's limits: the backend options declared
	// statusgate:"server". The front door's choices are each handler's, or
	// the defaults'.
	// Absent: the defaults, every limit on.
	Backend BackendConfig `json:"backend,omitzero"`
}

// UnmarshalJSON reads a server, refusing what it does not know.
func (s *Server) UnmarshalJSON(b []byte) error {
	type plain Server
	_, err := confjson.Object(b, "", (*plain)(s), nil)
	return err
}

// setOption is the first option of c, in name order, that is set and that
// pick says is one to look at, or "".
func setOption(c *BackendConfig, pick func(name string) bool) string {
	opts := backendOptions(c)
	for _, name := range slices.Sorted(maps.Keys(opts)) {
		if pick(name) && !opts[name].IsZero() {
			return name
		}
	}
	return ""
}

// takeOptions sets each option of dst that pick says to take and dst leaves
// out to src's; a map of endpoints (cache, snapshot) takes src's entries
// for the endpoints dst leaves out.
func takeOptions(dst, src *BackendConfig, pick func(name string) bool) {
	d, s := backendOptions(dst), backendOptions(src)
	for name, sv := range s {
		if !pick(name) || sv.IsZero() {
			continue
		}
		dv := d[name]
		switch {
		case dv.Kind() == reflect.Map && !dv.IsNil():
			for _, k := range sv.MapKeys() {
				if !dv.MapIndex(k).IsValid() {
					dv.SetMapIndex(k, sv.MapIndex(k))
				}
			}
		case dv.Kind() == reflect.Map:
			// A map of its own: the defaults' stays theirs, whatever a
			// handler later does with its options.
			m := reflect.MakeMapWithSize(sv.Type(), sv.Len())
			for _, k := range sv.MapKeys() {
				m.SetMapIndex(k, sv.MapIndex(k))
			}
			dv.Set(m)
		case dv.IsZero():
			dv.Set(sv)
		}
	}
}

// withServer is c, a handler's options, with the server limits of s in
// place of its own: the limits a handler's network counts a declared
// server with.
func withServer(c BackendConfig, s *Server) BackendConfig {
	opts := backendOptions(&c)
	for name, v := range opts {
		if serverOptions[name] {
			v.SetZero()
		}
	}
	takeOptions(&c, &s.Backend, isServerOption)
	return c
}
