package caddymodule

// This file is a network of game servers written once: the servers the
// config's handlers and networks front, each declared once by name with its
// limits, and the keys, policy and front-door choices every handler takes
// unless it says otherwise (docs/network.md). They are the statusgate app's
// config (app.go): the Caddyfile's global statusgate option writes them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/statusgate/statusgate/caddymodule/internal/confjson"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
	"github.com/statusgate/statusgate/internal/ident"
	"github.com/statusgate/statusgate/internal/nearest"
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

	// Backend holds the server's limits (serverOptions): max_in_flight,
	// max_main_thread, the queue, cache_size, max_response, max_held,
	// instances, guard, max_streams and max_topics.
	// The front door's choices are each handler's, or the defaults'.
	// Absent: the defaults, every limit on.
	Backend BackendConfig `json:"backend,omitzero"`
}

// UnmarshalJSON reads a server, refusing what it does not know.
func (s *Server) UnmarshalJSON(b []byte) error {
	type plain Server
	_, err := confjson.Object(b, "", (*plain)(s), nil)
	return err
}

// serverOptions are the backend options that count a server's work, shared
// by every handler in front of it (guard.Limits.Server); every other backend
// option is the front door's.
var serverOptions = map[string]bool{
	"max_in_flight": true, "max_main_thread": true, "queue_length": true, "queue_wait": true,
	"cache_size": true, "max_response": true, "max_held": true, "instances": true, "guard": true,
	"max_streams": true, "max_topics": true,
}

// backendOptions are c's options by their JSON name, as settable values.
func backendOptions(c *BackendConfig) map[string]reflect.Value {
	opts := map[string]reflect.Value{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			f, ft := v.Field(i), v.Type().Field(i)
			if ft.Anonymous {
				walk(f)
				continue
			}
			name, _, _ := strings.Cut(ft.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				opts[name] = f
			}
		}
	}
	walk(reflect.ValueOf(c).Elem())
	return opts
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

func isServerOption(name string) bool { return serverOptions[name] }
func isDoorOption(name string) bool   { return !serverOptions[name] }

// checkServers checks the app's servers and defaults: each server's name
// and declaration, limits of a server's own only, and defaults that are
// the front door's only. Errors name the JSON path under the app.
func (a *App) checkServers() error {
	for _, name := range slices.Sorted(maps.Keys(a.Servers)) {
		s, path := a.Servers[name], "servers."+name
		if !ident.Valid(name) {
			return fmt.Errorf("servers: '%s' is not a name of letters, digits, '_' and '-'", name)
		}
		if s == nil {
			return fmt.Errorf("%s: null: declare the server, at least {\"proxy\": {\"upstreams\": [{\"dial\": \"10.0.0.3:8080\"}]}}", path)
		}
		if len(s.ProxyRaw) == 0 {
			return fmt.Errorf("%s.proxy: missing: no upstreams: declare the server's backend, at least {\"upstreams\": [{\"dial\": \"10.0.0.3:8080\"}]}", path)
		}
		if _, err := upstream.Parse(path+".proxy", s.ProxyRaw); err != nil {
			return err
		}
		if opt := setOption(&s.Backend, isDoorOption); opt != "" {
			return fmt.Errorf("%s.backend.%s: the front door's choice, not the server's: set it in the statusgate handlers in front of it (or in the defaults)", path, opt)
		}
		if _, err := resolveLimits(s.Backend); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
	}
	if d := a.Defaults; d != nil {
		switch {
		case d.ProxyRaw != nil:
			return errors.New("defaults.proxy: a backend is a server's or a handler's: declare it under servers, or in the handler")
		case d.Network != nil:
			return errors.New("defaults.network: a network is a handler's: write it in the statusgate handler that answers /network")
		case d.Server != "":
			return errors.New("defaults.server: which server a handler fronts is the handler's to say")
		}
		if opt := setOption(&d.Backend, isServerOption); opt != "" {
			return fmt.Errorf("defaults.backend.%s: a server's limit: set it in each server's declaration (servers.<name>.backend.%s)", opt, opt)
		}
	}
	return nil
}

// adopt takes what the config load's app says for this handler before
// anything else is read: the defaults it leaves out (its keys come first,
// then the defaults'; a require_key, protected_fields, endpoint switch,
// cache or snapshot entry of its own wins over the defaults' for that
// endpoint; every other option it leaves out is the defaults'), and the
// declared servers it names, its own or its network's.
func (h *Handler) adopt(a *App) error {
	if d := a.Defaults; d != nil {
		h.Auth.adopt(d.Auth)
		h.Endpoints = mergeEndpoints(h.Endpoints, d.Endpoints)
		takeOptions(&h.Backend, &d.Backend, isDoorOption)
	}
	if h.Server != "" {
		s, err := a.server(h.Server, "server")
		if err != nil {
			return err
		}
		if h.ProxyRaw != nil {
			return fmt.Errorf("server: %s, and upstreams or a proxy block of its own: a handler fronts a declared server or declares its backend, not both", h.Server)
		}
		if opt := setOption(&h.Backend, isServerOption); opt != "" {
			return fmt.Errorf("backend.%s: server %s's limit: set it in server %s's declaration, once for every handler in front of it", opt, h.Server, h.Server)
		}
		h.ProxyRaw = s.ProxyRaw
		takeOptions(&h.Backend, &s.Backend, isServerOption)
	}
	if h.Network != nil {
		for i, m := range h.Network.Servers {
			if m.ProxyRaw != nil {
				continue
			}
			s, err := a.server(m.ID, fmt.Sprintf("network.servers[%d]", i))
			if err != nil {
				return err
			}
			h.Network.Servers[i].ProxyRaw = s.ProxyRaw
			h.Network.Servers[i].declared = s
		}
	}
	return nil
}

// server is the server the app declares as name, for the option at path.
func (a *App) server(name, path string) (*Server, error) {
	if s := a.Servers[name]; s != nil {
		return s, nil
	}
	if len(a.Servers) == 0 {
		return nil, fmt.Errorf("%s: %s is not declared: declare it in the global statusgate option (server %s <upstream>...), or give its upstreams here", path, name, name)
	}
	return nil, fmt.Errorf("%s: %s is not a declared server%s (declared: %s)", path, name,
		nearest.Suggest(name, slices.Collect(maps.Keys(a.Servers))), strings.Join(slices.Sorted(maps.Keys(a.Servers)), ", "))
}

// adopt takes the defaults' auth where c leaves it out: its keys after c's
// (but those c names itself), the entries of require_key and
// protected_fields for the endpoints c leaves out, and its extra_fields
// beside c's.
func (c *AuthConfig) adopt(d AuthConfig) {
	if c.Enabled == nil {
		c.Enabled = d.Enabled
	}
	if c.HideProtected == nil {
		c.HideProtected = d.HideProtected
	}
	if c.AllowQueryKey == nil {
		c.AllowQueryKey = d.AllowQueryKey
	}
	// A key of the handler's own replaces the defaults' key of its name
	// (a secret rotated on one handler), rather than adding a second
	// secret to it.
	own := map[string]bool{}
	for _, k := range c.Keys {
		if k.Name != "" {
			own[k.Name] = true
		}
	}
	c.Keys = slices.Clip(c.Keys)
	for _, k := range d.Keys {
		if k.Name == "" || !own[k.Name] {
			c.Keys = append(c.Keys, k)
		}
	}
	c.RequireKey = mergeEndpoints(c.RequireKey, d.RequireKey)
	c.ProtectedFields = mergeEndpoints(c.ProtectedFields, d.ProtectedFields)
	// The fields the defaults name are known to every handler.
	for ep, fields := range d.ExtraFields {
		if c.ExtraFields == nil {
			c.ExtraFields = map[string][]string{}
		}
		c.ExtraFields[ep] = append(slices.Clip(c.ExtraFields[ep]), slices.DeleteFunc(slices.Clone(fields), func(f string) bool { return slices.Contains(c.ExtraFields[ep], f) })...)
	}
}

// mergeEndpoints is own with def's entries for the endpoints own leaves
// out; def is not changed.
func mergeEndpoints[V any](own, def map[string]V) map[string]V {
	if len(def) == 0 {
		return own
	}
	out := maps.Clone(def)
	maps.Copy(out, own)
	return out
}
