package caddymodule

import (
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/statusgate/statusgate/caddymodule/apikey"
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
//		key              [<name>] <secret>|sha256:<hex>
//		allow_query_key  [on|off]
//		hide_protected   [on|off]
//		require_key      <endpoint> on|off
//		protected_fields <endpoint> [<field>...]
//		enable           <endpoint>...
//		disable          <endpoint>...
//	}
//
// A key with two arguments is a name and a secret, with one a secret alone
// (named key-<n> by its position); either secret may be its SHA-256 digest
// as sha256:<64 hex digits>, which `caddy statusgate-key` prints.
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
			key, err := apikey.FromCaddyfile(d.RemainingArgs())
			if err != nil {
				return d.Errf("%v", err)
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

		case "max_in_flight", "max_main_thread", "max_per_client":
			if err := once(opt); err != nil {
				return err
			}
			n, err := limitArg(d, true)
			if err != nil {
				return err
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			switch opt {
			case "max_in_flight":
				h.Backend.MaxInFlight = n
			case "max_main_thread":
				h.Backend.MaxMainThread = n
			default:
				h.Backend.MaxPerClient = n
			}

		case "queue":
			if err := once(opt); err != nil {
				return err
			}
			n, err := limitArg(d, false)
			if err != nil {
				return err
			}
			h.Backend.QueueLength = n
			if d.NextArg() {
				wait, err := durationArg(d, opt, false)
				if err != nil {
					return err
				}
				h.Backend.QueueWait = wait
			}
			if d.NextArg() {
				return d.ArgErr()
			}

		case "timeout":
			if err := once(opt); err != nil {
				return err
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			t, err := durationArg(d, opt, true)
			if err != nil {
				return err
			}
			h.Backend.Timeout = t
			if d.NextArg() {
				return d.ArgErr()
			}

		case "coalesce":
			on, err := onceSwitch(opt, false)
			if err != nil {
				return err
			}
			h.Backend.Coalesce = &on

		case "cache", "snapshot":
			name, err := endpointArg(d)
			if err != nil {
				return err
			}
			if err := once(opt + " " + name); err != nil {
				return err
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			ttl, err := durationArg(d, opt, true)
			if err != nil {
				return err
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			m := &h.Backend.Cache
			if opt == "snapshot" {
				m = &h.Backend.Snapshot
			}
			if *m == nil {
				*m = map[string]caddy.Duration{}
			}
			(*m)[name] = max(ttl, 0) // off is 0

		case "cache_size":
			if err := once(opt); err != nil {
				return err
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(d.Val())
			if err != nil || n == 0 || n > 1<<40 {
				return d.Errf("%s: '%s' is not a size such as 16MiB", opt, d.Val())
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			h.Backend.CacheSize = int64(n)

		default:
			return d.Errf("unrecognized subdirective '%s'", opt)
		}
	}
	return nil
}

// limitArg reads the next argument of the current subdirective as a positive
// whole number, or off (as -1) where off is allowed.
func limitArg(d *caddyfile.Dispenser, offOK bool) (int, error) {
	opt := d.Val()
	if !d.NextArg() {
		return 0, d.ArgErr()
	}
	word := d.Val()
	if offOK && word == "off" {
		return -1, nil
	}
	n, err := strconv.Atoi(word)
	if err != nil || n < 1 {
		want := "a whole number of at least 1"
		if offOK {
			want += " or off"
		}
		return 0, d.Errf("%s: '%s' is not %s", opt, word, want)
	}
	return n, nil
}

// durationArg reads the current token, an argument of opt, as a positive
// duration in Caddy's syntax (500ms, 2s, 1m30s), or off (as -1) where allowed.
func durationArg(d *caddyfile.Dispenser, opt string, offOK bool) (caddy.Duration, error) {
	word := d.Val()
	if offOK && word == "off" {
		return -1, nil
	}
	t, err := caddy.ParseDuration(word)
	if err != nil || t <= 0 {
		return 0, d.Errf("%s: '%s' is not a positive duration such as 500ms or 2s", opt, word)
	}
	return caddy.Duration(t), nil
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
