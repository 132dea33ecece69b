package caddymodule

import (
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/internal/onoff"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("statusgate", parseCaddyfile)
	// Just before reverse_proxy: the gateway decides and rewrites the request
	// that reverse_proxy then sends, and it has to see the response first.
	httpcaddyfile.RegisterDirectiveOrder("statusgate", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	sg := new(Handler)
	err := sg.UnmarshalCaddyfile(h.Dispenser)
	return sg, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	statusgate {
//		auth             on|off
//		key              <secret>
//		allow_query_key  [on|off]
//		hide_protected   [on|off]
//		require_key      <endpoint> on|off
//		protected_fields <endpoint> [<field>...]
//		enable           <endpoint>...
//		disable          <endpoint>...
//	}
//
// true and false are accepted wherever on and off are. key, require_key,
// protected_fields, enable and disable repeat; the others may appear once.
// Endpoint names are index, status, player, server, performance, worlds,
// gamerules, entities, spawnlimits, punishments, bans, operators, whitelist,
// plugins, placeholders, network, constants and custom/<name>.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	auth := &h.Auth
	seen := map[string]bool{}
	once := func(what string) error {
		if seen[what] {
			return d.Errf("'%s' given twice", what)
		}
		seen[what] = true
		return nil
	}
	// onceSwitch reads the on|off value of an option that may appear once.
	onceSwitch := func(opt string, optional bool) (bool, error) {
		if err := once(opt); err != nil {
			return false, err
		}
		return onoff.Parse(d, opt, optional)
	}
	for d.NextBlock(0) {
		opt := d.Val()
		switch opt {
		case "auth":
			on, err := onceSwitch(opt, false)
			if err != nil {
				return err
			}
			auth.Enabled = &on

		case "key":
			if !d.NextArg() {
				return d.ArgErr()
			}
			key := d.Val()
			if strings.TrimSpace(key) == "" {
				return d.Errf("key: empty key")
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			auth.Keys = append(auth.Keys, key)

		case "allow_query_key":
			on, err := onceSwitch(opt, true)
			if err != nil {
				return err
			}
			auth.AllowQueryKey = on

		case "hide_protected":
			on, err := onceSwitch(opt, true)
			if err != nil {
				return err
			}
			auth.HideProtected = &on

		case "require_key":
			name, err := endpointArg(d)
			if err != nil {
				return err
			}
			if err := once(opt + " " + name); err != nil {
				return err
			}
			on, err := onoff.Parse(d, opt, false)
			if err != nil {
				return err
			}
			if auth.RequireKey == nil {
				auth.RequireKey = map[string]bool{}
			}
			auth.RequireKey[name] = on

		case "protected_fields":
			name, err := endpointArg(d)
			if err != nil {
				return err
			}
			if err := once(opt + " " + name); err != nil {
				return err
			}
			fields := []string{} // no fields: hide nothing, not "use the default"
			for d.NextArg() {
				if d.Val() == "" {
					return d.Errf("protected_fields: empty field name")
				}
				if !slices.Contains(fields, d.Val()) {
					fields = append(fields, d.Val())
				}
			}
			if auth.ProtectedFields == nil {
				auth.ProtectedFields = map[string][]string{}
			}
			auth.ProtectedFields[name] = fields

		case "enable", "disable":
			if !d.NextArg() {
				return d.ArgErr()
			}
			for {
				name := d.Val()
				if !validEndpointName(name) {
					return d.Errf("%s: %v", opt, endpointNameError(name))
				}
				if err := once("enable/disable " + name); err != nil {
					return err
				}
				if h.Endpoints == nil {
					h.Endpoints = map[string]bool{}
				}
				h.Endpoints[name] = opt == "enable"
				if !d.NextArg() {
					break
				}
			}

		default:
			return d.Errf("unrecognized subdirective '%s'", opt)
		}
	}
	return nil
}

// endpointArg reads the endpoint name argument of the current subdirective.
func endpointArg(d *caddyfile.Dispenser) (string, error) {
	opt := d.Val()
	if !d.NextArg() {
		return "", d.ArgErr()
	}
	name := d.Val()
	if !validEndpointName(name) {
		return "", d.Errf("%s: %v", opt, endpointNameError(name))
	}
	return name, nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
