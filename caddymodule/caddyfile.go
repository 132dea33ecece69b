package caddymodule

import (
	"math"
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
//		max_topics             <n>|off
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
	auth, b := &h.Auth, &h.Backend
	var keyLines []keyLine // what sealKey compares a key line with
	seen := map[string]bool{}
	once := func(what string) error {
		if seen[what] {
			return d.Errf("'%s' given twice", what)
		}
		seen[what] = true
		return nil
	}
	for d.NextBlock(0) {
		opt := d.Val()
		if !repeatable[opt] {
			if err := once(opt); err != nil {
				return err
			}
		}
		var err error
		switch opt {
		case "auth":
			auth.Enabled, err = switchArg(d, opt, false)
		case "key":
			var key apikey.Key
			var line keyLine
			if key, err = keyArgs(d); err != nil {
				return err
			}
			if err = keyBlock(d, &key); err != nil {
				return err
			}
			if key, line, err = sealKey(key, d.File()+":"+strconv.Itoa(d.Line()), keyLines); err != nil {
				return d.Errf("%v", err)
			}
			keyLines = append(keyLines, line)
			auth.Keys = append(auth.Keys, key)
		case "allow_query_key":
			var on *bool
			on, err = switchArg(d, opt, true)
			auth.AllowQueryKey = on != nil && *on
		case "hide_protected":
			auth.HideProtected, err = switchArg(d, opt, true)
		case "require_key":
			err = perEndpoint(d, once, &auth.RequireKey, func() (bool, error) { return onoff.Parse(d, opt, false) })
		case "protected_fields":
			err = perEndpoint(d, once, &auth.ProtectedFields, func() ([]string, error) { return fieldArgs(d) })
		case "enable":
			err = switchEndpoints(d, once, &h.Endpoints, true)
		case "disable":
			err = switchEndpoints(d, once, &h.Endpoints, false)

		case "max_in_flight":
			b.MaxInFlight, err = oneArg(d, opt, limitWord)
		case "max_main_thread":
			b.MaxMainThread, err = oneArg(d, opt, limitWord)
		case "max_per_client":
			b.MaxPerClient, err = oneArg(d, opt, limitWord)
		case "queue":
			err = queueArgs(d, b)
		case "timeout":
			b.Timeout, err = oneArg(d, opt, durationWord)
		case "coalesce":
			b.Coalesce, err = switchArg(d, opt, false)
		case "cache":
			err = perEndpoint(d, once, &b.Cache, func() (caddy.Duration, error) { return oneArg(d, opt, durationWord) })
			if ep, ok := b.cachedWithoutCache(); ok && err == nil {
				return d.Errf("cache: %s %s, but cache_size is off: there is no micro-cache; write cache %s off or leave the line out", ep, d.Val(), ep)
			}
		case "snapshot":
			err = perEndpoint(d, once, &b.Snapshot, func() (caddy.Duration, error) { return oneArg(d, opt, durationWord) })
		case "cache_size":
			b.CacheSize, err = oneArg(d, opt, sizeWord)
			if ep, ok := b.cachedWithoutCache(); ok && err == nil {
				return d.Errf("cache_size: off, but cache %s has a time to live: there would be no micro-cache to keep it", ep)
			}
		case "max_response":
			b.MaxResponse, err = oneArg(d, opt, sizeWord)
		case "max_held":
			b.MaxHeld, err = oneArg(d, opt, sizeWord)
		case "write_timeout":
			b.WriteTimeout, err = oneArg(d, opt, durationWord)
		case "client_prefix_v6":
			b.ClientPrefix6, err = oneArg(d, opt, countWord(128, "a prefix length from 1 to 128"))
		case "guard":
			b.Guard, err = oneArg(d, opt, func(d *caddyfile.Dispenser, opt string) (string, error) {
				if _, ok, err := offWord(d, opt); ok {
					return "", err
				}
				if err := guardNameError(opt, d.Val()); err != nil {
					return "", d.Errf("%v", err)
				}
				return d.Val(), nil
			})
		case "instances":
			b.Instances, err = oneArg(d, opt, countWord(math.MaxInt, "a count of gateways: write a whole number of at least 1"))

		case "max_streams":
			b.MaxStreams, err = oneArg(d, opt, limitWord)
		case "max_streams_per_client":
			b.MaxStreamsPerClient, err = oneArg(d, opt, limitWord)
		case "max_topics":
			b.MaxTopics, err = oneArg(d, opt, limitWord)
		case "stream_lifetime":
			b.StreamLifetime, err = oneArg(d, opt, durationWord)
		case "stream_heartbeat":
			b.StreamHeartbeat, err = oneArg(d, opt, durationWord)

		default:
			return d.Errf("unrecognized subdirective '%s'", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// repeatable are the options that may appear more than once: key, and those
// that name an endpoint, once per endpoint.
var repeatable = map[string]bool{
	"key": true, "require_key": true, "protected_fields": true, "enable": true, "disable": true,
	"cache": true, "snapshot": true,
}

// switchArg reads an option's on|off (or true|false) as a pointer, the way
// the JSON spells a switch whose absence means its default; optional says a
// bare option means on.
func switchArg(d *caddyfile.Dispenser, opt string, optional bool) (*bool, error) {
	on, err := onoff.Parse(d, opt, optional)
	return &on, err
}

// perEndpoint reads an option that names an endpoint and then its value for
// it, read by value, into the map m, once per endpoint.
func perEndpoint[T any](d *caddyfile.Dispenser, once func(string) error, m *map[string]T, value func() (T, error)) error {
	opt := d.Val()
	name, err := endpointArg(d)
	if err != nil {
		return err
	}
	if err := once(opt + " " + name); err != nil {
		return err
	}
	v, err := value()
	if err != nil {
		return err
	}
	if *m == nil {
		*m = map[string]T{}
	}
	(*m)[name] = v
	return nil
}

// fieldArgs reads the rest of a protected_fields line: the member names,
// each once; none means hide nothing, not the default.
func fieldArgs(d *caddyfile.Dispenser) ([]string, error) {
	fields := []string{}
	for d.NextArg() {
		if d.Val() == "" {
			return nil, d.Errf("protected_fields: empty field name")
		}
		if !slices.Contains(fields, d.Val()) {
			fields = append(fields, d.Val())
		}
	}
	return fields, nil
}

// switchEndpoints reads an enable or disable line: at least one endpoint,
// each switched at most once in the block, whichever line names it.
func switchEndpoints(d *caddyfile.Dispenser, once func(string) error, m *map[string]bool, on bool) error {
	opt := d.Val()
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
		if *m == nil {
			*m = map[string]bool{}
		}
		(*m)[name] = on
		if !d.NextArg() {
			return nil
		}
	}
}

// queueArgs reads a queue line: its length or off, and an optional wait,
// which cannot be off and means nothing after off.
func queueArgs(d *caddyfile.Dispenser, b *BackendConfig) error {
	opt := d.Val()
	if !d.NextArg() {
		return d.ArgErr()
	}
	n, err := limitWord(d, opt)
	if err != nil {
		return err
	}
	b.QueueLength = n
	if d.NextArg() {
		if n == off {
			return d.Errf("%s: '%s' after off: with the queue off nobody waits", opt, d.Val())
		}
		if d.Val() == "off" {
			return d.Errf("%s: the wait cannot be off: %s; write queue off to refuse at once when the backend is busy", opt, whyNotOff["queue_wait"])
		}
		if b.QueueWait, err = positiveDuration(d, opt, false); err != nil {
			return err
		}
	}
	if d.NextArg() {
		return d.ArgErr()
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
			n, err := oneArg(d, opt, func(d *caddyfile.Dispenser, opt string) (int, error) { return positiveInt(d, opt, false) })
			if err != nil {
				return err
			}
			k.MaxInFlight = n

		default:
			return d.Errf("unrecognized key subdirective '%s'", opt)
		}
	}
	return nil
}

// oneArg reads the one argument left on the line of the option opt with
// word, which reads the current token, and refuses a second.
func oneArg[T any](d *caddyfile.Dispenser, opt string, word func(d *caddyfile.Dispenser, opt string) (T, error)) (T, error) {
	var zero T
	if !d.NextArg() {
		return zero, d.ArgErr()
	}
	v, err := word(d, opt)
	if err != nil {
		return zero, err
	}
	if d.NextArg() {
		return zero, d.ArgErr()
	}
	return v, nil
}

// offWord reads the current token, an argument of opt, when it is off: as
// -1 where opt can be off, and where it cannot (whyNotOff), as the error that
// says why. ok is false for any other word.
func offWord(d *caddyfile.Dispenser, opt string) (v int, ok bool, err error) {
	if d.Val() != "off" {
		return 0, false, nil
	}
	if why, cannot := whyNotOff[opt]; cannot {
		return 0, true, d.Errf("%s cannot be off: %s", opt, why)
	}
	return off, true, nil
}

// canBeOff reports whether the option opt can be off: whyNotOff names those
// that cannot, for the Caddyfile and the JSON alike.
func canBeOff(opt string) bool {
	_, cannot := whyNotOff[opt]
	return !cannot
}

// limitWord reads the current token, an argument of opt, as a whole number
// of at least 1, or off (as -1).
func limitWord(d *caddyfile.Dispenser, opt string) (int, error) {
	if v, ok, err := offWord(d, opt); ok {
		return v, err
	}
	return positiveInt(d, opt, canBeOff(opt))
}

// positiveInt reads the current token, an argument of opt, as a whole number
// of at least 1; orOff says the error offers off too.
func positiveInt(d *caddyfile.Dispenser, opt string, orOff bool) (int, error) {
	n, err := strconv.Atoi(d.Val())
	if err != nil || n < 1 {
		return 0, d.Errf("%s: '%s' is not %s", opt, d.Val(), orOffWant("a whole number of at least 1", " or off", orOff))
	}
	return n, nil
}

// durationWord reads the current token, an argument of opt, as a positive
// duration, or off (as -1) where opt can be off.
func durationWord(d *caddyfile.Dispenser, opt string) (caddy.Duration, error) {
	if v, ok, err := offWord(d, opt); ok {
		return caddy.Duration(v), err
	}
	return positiveDuration(d, opt, canBeOff(opt))
}

// positiveDuration reads the current token, an argument of opt, as a
// positive duration in Caddy's syntax (500ms, 2s, 1m30s); orOff says the
// error offers off too.
func positiveDuration(d *caddyfile.Dispenser, opt string, orOff bool) (caddy.Duration, error) {
	t, err := caddy.ParseDuration(d.Val())
	if err != nil || t <= 0 {
		return 0, d.Errf("%s: '%s' is not %s", opt, d.Val(), orOffWant("a positive duration such as 500ms or 2s", ", or off", orOff))
	}
	return caddy.Duration(t), nil
}

// sizeWord reads the current token, an argument of opt, as a size in bytes
// (16MiB, 512KiB), or off (as -1) where opt can be off.
func sizeWord(d *caddyfile.Dispenser, opt string) (int64, error) {
	if v, ok, err := offWord(d, opt); ok {
		return int64(v), err
	}
	n, err := humanize.ParseBytes(d.Val())
	if err != nil || n == 0 || n > 1<<40 {
		return 0, d.Errf("%s: '%s' is not %s", opt, d.Val(), orOffWant("a size such as 16MiB", ", or off", canBeOff(opt)))
	}
	return int64(n), nil
}

// orOffWant is what an option takes, want, and orOff's words when it can be
// off.
func orOffWant(want, orOff string, offers bool) string {
	if offers {
		return want + orOff
	}
	return want
}

// countWord is the reader of a whole number from 1 to most, which cannot be
// off; want says what the option takes.
func countWord(most int, want string) func(*caddyfile.Dispenser, string) (int, error) {
	return func(d *caddyfile.Dispenser, opt string) (int, error) {
		if _, ok, err := offWord(d, opt); ok {
			return 0, err
		}
		n, err := strconv.Atoi(d.Val())
		if err != nil || n < 1 || n > most {
			return 0, d.Errf("%s: '%s' is not %s", opt, d.Val(), want)
		}
		return n, nil
	}
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
