package caddymodule

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/internal/ident"
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
//		key              [<name>] <secret>|sha256:<hex> [{
//			endpoints     <endpoint>...
//			max_in_flight <n>
//		}]
//		allow_query_key  [on|off]
//		hide_protected   [on|off]
//		require_key      <endpoint> on|off
//		protected_fields <endpoint> [<field>...]
//		enable           <endpoint>...
//		disable          <endpoint>...
//
//		max_in_flight    <n>|off
//		max_main_thread  <n>|off
//		max_per_client   <n>|off
//		queue            <length> [<wait>]
//		queue            off
//		timeout          <duration>|off
//		coalesce         on|off
//		cache            <endpoint> <ttl>|off
//		snapshot         <endpoint> <interval>|off
//		cache_size       <size>|off
//		max_response     <size>
//		max_held         <size>
//		write_timeout    <duration>|off
//		client_prefix_v6 <bits>
//		guard            <name>
//		instances        <k>
//
//		max_streams            <n>|off
//		max_streams_per_client <n>|off
//		stream_lifetime        <duration>|off
//		stream_heartbeat       <duration>
//	}
//
// A key with two arguments is a name and a secret, with one a secret alone
// (named key-<n> by its position); either secret may be its SHA-256 digest
// as sha256:<64 hex digits>, which `caddy statusgate-key` prints. A plain
// secret is written to the JSON as that digest (see sealKey); one with an
// {env.*} or {file.*} placeholder stays as written. A name that looks like a
// secret (the generator's form, a digest, another line's secret) is an error.
// A key's block narrows it: endpoints (repeatable) lists the endpoints it
// opens, the index always among them (default: every endpoint), and for any
// other its caller is a caller without a key; max_in_flight caps its open
// requests, at the backend or queued (default: no cap of its own).
// true and false are accepted wherever on and off are. key, require_key,
// protected_fields, enable and disable repeat; the others may appear once.
// Endpoint names are index, status, player, server, performance, worlds,
// gamerules, entities, spawnlimits, punishments, bans, operators, whitelist,
// plugins, placeholders, network, constants and custom/<name>.
//
// A backend option's off is -1 in the JSON; a line left out gives the
// default. queue off means no queue at all: a request that finds every slot
// busy gets 503 at once, on the main-thread stations too.
// cache_size off means no micro-cache, and cache <endpoint> <ttl> is then an
// error. queue's wait, max_response, max_held, client_prefix_v6, guard and
// instances cannot be off, and off there is an error that says why.
// stream_heartbeat cannot be off (docs/live.md has the live streams).
// instances <k> says this gateway is one of k in front of the backend and
// divides max_in_flight, the queue's length and max_held by k.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	auth := &h.Auth
	var keyLines []keyLine // what sealKey compares a key line with
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
			key, err := keyArgs(d)
			if err != nil {
				return err
			}
			if err := keyBlock(d, &key); err != nil {
				return err
			}
			key, line, err := sealKey(key, d.File()+":"+strconv.Itoa(d.Line()), keyLines)
			if err != nil {
				return d.Errf("%v", err)
			}
			keyLines = append(keyLines, line)
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

		case "max_streams", "max_streams_per_client":
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
			if opt == "max_streams" {
				h.Backend.MaxStreams = n
			} else {
				h.Backend.MaxStreamsPerClient = n
			}

		case "stream_lifetime", "stream_heartbeat":
			if err := once(opt); err != nil {
				return err
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			if opt == "stream_heartbeat" && d.Val() == "off" {
				return d.Errf("%s cannot be off: %s", opt, whyNotOff[opt])
			}
			t, err := durationArg(d, opt, true)
			if err != nil {
				return err
			}
			if opt == "stream_lifetime" {
				h.Backend.StreamLifetime = t
			} else {
				h.Backend.StreamHeartbeat = t
			}
			if d.NextArg() {
				return d.ArgErr()
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
			n, err := limitArg(d, true)
			if err != nil {
				return err
			}
			h.Backend.QueueLength = n
			if d.NextArg() {
				if n == off {
					return d.Errf("%s: '%s' after off: with the queue off nobody waits", opt, d.Val())
				}
				if d.Val() == "off" {
					return d.Errf("%s: the wait cannot be off: %s; write queue off to refuse at once when the backend is busy", opt, whyNotOff["queue_wait"])
				}
				wait, err := durationArg(d, opt, false)
				if err != nil {
					return err
				}
				h.Backend.QueueWait = wait
			}
			if d.NextArg() {
				return d.ArgErr()
			}

		case "timeout", "write_timeout":
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
			if opt == "timeout" {
				h.Backend.Timeout = t
			} else {
				h.Backend.WriteTimeout = t
			}
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
			if opt == "cache" && ttl != off && h.Backend.CacheSize == off {
				return d.Errf("cache: %s %s, but cache_size is off: there is no micro-cache; write cache %s off or leave the line out", name, d.Val(), name)
			}
			if *m == nil {
				*m = map[string]caddy.Duration{}
			}
			(*m)[name] = ttl

		case "cache_size", "max_response", "max_held":
			if err := once(opt); err != nil {
				return err
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := sizeArg(d, opt, opt == "cache_size")
			if err != nil {
				return err
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			if ep := cachedEndpoint(h.Backend.Cache); n == off && ep != "" {
				return d.Errf("%s: off, but cache %s has a time to live: there would be no micro-cache to keep it", opt, ep)
			}
			switch opt {
			case "cache_size":
				h.Backend.CacheSize = n
			case "max_response":
				h.Backend.MaxResponse = n
			default:
				h.Backend.MaxHeld = n
			}

		case "client_prefix_v6", "instances":
			if err := once(opt); err != nil {
				return err
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			if d.Val() == "off" {
				return d.Errf("%s cannot be off: %s", opt, whyNotOff[opt])
			}
			most, want := 128, "a prefix length from 1 to 128"
			if opt == "instances" {
				most, want = math.MaxInt, "a count of gateways: write a whole number of at least 1"
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n < 1 || n > most {
				return d.Errf("%s: '%s' is not %s", opt, d.Val(), want)
			}
			if opt == "instances" {
				h.Backend.Instances = n
			} else {
				h.Backend.ClientPrefix6 = n
			}
			if d.NextArg() {
				return d.ArgErr()
			}

		case "guard":
			if err := once(opt); err != nil {
				return err
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			if d.Val() == "off" {
				return d.Errf("%s cannot be off: %s", opt, whyNotOff[opt])
			}
			if !ident.Valid(d.Val()) {
				return d.Errf("%s: '%s' is not a name of letters, digits, '_' and '-'", opt, d.Val())
			}
			h.Backend.Guard = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}

		default:
			return d.Errf("unrecognized subdirective '%s'", opt)
		}
	}
	return nil
}

// keyBlock reads the optional block of a key line into k: its scope and its
// cap. Every error names the word and the line.
func keyBlock(d *caddyfile.Dispenser, k *apikey.Key) error {
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		switch opt {
		case "endpoints":
			if !d.NextArg() {
				return d.Errf("endpoints: name at least one endpoint (leave the line out for every endpoint)")
			}
			for {
				name := d.Val()
				if !validEndpointName(name) {
					return d.Errf("endpoints: %v", endpointNameError(name))
				}
				if !slices.Contains(k.Endpoints, name) {
					k.Endpoints = append(k.Endpoints, name)
				}
				if !d.NextArg() {
					break
				}
			}

		case "max_in_flight":
			if seen[opt] {
				return d.Errf("'%s' given twice", opt)
			}
			seen[opt] = true
			n, err := limitArg(d, false)
			if err != nil {
				return err
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			k.MaxInFlight = n

		default:
			return d.Errf("unrecognized key subdirective '%s'", opt)
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
		return off, nil
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
		return off, nil
	}
	t, err := caddy.ParseDuration(word)
	if err != nil || t <= 0 {
		want := "a positive duration such as 500ms or 2s"
		if offOK {
			want += ", or off"
		}
		return 0, d.Errf("%s: '%s' is not %s", opt, word, want)
	}
	return caddy.Duration(t), nil
}

// sizeArg reads the current token, an argument of opt, as a size in bytes
// (16MiB, 512KiB), or off (as -1) where allowed; off where it is not says
// why.
func sizeArg(d *caddyfile.Dispenser, opt string, offOK bool) (int64, error) {
	word := d.Val()
	if word == "off" {
		if !offOK {
			return 0, d.Errf("%s cannot be off: %s", opt, whyNotOff[opt])
		}
		return off, nil
	}
	n, err := humanize.ParseBytes(word)
	if err != nil || n == 0 || n > 1<<40 {
		want := "a size such as 16MiB"
		if offOK {
			want += ", or off"
		}
		return 0, d.Errf("%s: '%s' is not %s", opt, word, want)
	}
	return int64(n), nil
}

// cachedEndpoint is an endpoint that m gives a time to live, if any, the
// first by name.
func cachedEndpoint(m map[string]caddy.Duration) string {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if m[name] != off {
			return name
		}
	}
	return ""
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
