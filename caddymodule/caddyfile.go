package caddymodule

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/internal/nearest"
)

func init() {
	httpcaddyfile.RegisterDirective("statusgate", parseDirective)
	// Just before reverse_proxy: in the form of 1.0 the gateway decides and
	// rewrites the request that reverse_proxy then sends, and it has to see
	// the response first (a declared backend's statusgate sends it itself).
	httpcaddyfile.RegisterDirectiveOrder("statusgate", httpcaddyfile.Before, "reverse_proxy")
}

// parseDirective is what httpcaddyfile.RegisterHandlerDirective registers
// (the matcher token, then the handler, then the route), with one check
// between the two: a path matcher that lets no /api path through is a
// config mistake, since statusgate answers nothing else.
func parseDirective(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
	if !h.Next() {
		return nil, h.ArgErr()
	}
	directive := h.Token()
	matcherSet, err := h.ExtractMatcherSet()
	if err != nil {
		return nil, err
	}
	if err := checkDirectiveMatcher(directive, matcherSet); err != nil {
		return nil, err
	}
	val, err := parseCaddyfile(h)
	if err != nil {
		return nil, err
	}
	return h.NewRoute(matcherSet, val), nil
}

// checkDirectiveMatcher refuses a matcher on the statusgate directive
// whose path patterns all miss /api and every path below it
// (`statusgate /lobby/* { … }`): every request it let through would be a
// 404, which loads in silence and reads as a broken gateway. The fix it
// names is the one that was meant: handle_path strips the prefix before
// statusgate sees the path.
func checkDirectiveMatcher(directive caddyfile.Token, matcherSet caddy.ModuleMap) error {
	raw, ok := matcherSet["path"]
	if !ok {
		return nil
	}
	var patterns []string
	if err := json.Unmarshal(raw, &patterns); err != nil || len(patterns) == 0 || slices.ContainsFunc(patterns, mayMatchAPI) {
		return nil
	}
	prefix := strings.TrimSuffix(strings.TrimSuffix(patterns[0], "*"), "/")
	return errAt(directive, "statusgate %s: statusgate answers /api and the paths below it, and this matcher lets none of them through, so every request it gets would be a 404; "+
		"to serve a game server's API under %s, write handle_path %s/* { statusgate … } (which takes %s off the path before statusgate reads it), "+
		"or give statusgate no matcher, or /api/*", strings.Join(patterns, " "), prefix, prefix, prefix)
}

// mayMatchAPI reports whether the path pattern of a path matcher (Caddy's
// MatchPath: case-insensitive, with * wildcards) may match /api or a path
// below it. It is conservative: what it cannot read (a pattern that starts
// with *, or holds an escape) may match.
func mayMatchAPI(pattern string) bool {
	p := strings.ToLower(pattern)
	if p == "" || p[0] != '/' || strings.Contains(p, "%") {
		return true
	}
	literal, _, wild := strings.Cut(p, "*")
	if !wild {
		_, under := underAPI(literal)
		return under
	}
	// The paths it matches start with literal: /api or below it, or a
	// literal that /api/ itself starts with ("/", "/ap").
	return strings.HasPrefix("/api/", literal) || literal == "/api" || strings.HasPrefix(literal, "/api/")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	sg := new(Handler)
	global, err := globalOption(h)
	if err != nil {
		return sg, err
	}
	if err := sg.unmarshalCaddyfile(h.Dispenser, false, global); err != nil {
		return sg, err
	}
	var defaults *AuthConfig
	if global != nil && global.Defaults != nil {
		defaults = &global.Defaults.Auth
	}
	return sg, sg.Auth.writeEffective(defaults)
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	statusgate [<upstream>...] {
//		auth             on|off
//		key              [<name>] <secret>|sha256:<hex> [{
//			endpoints     <endpoint>...
//			max_in_flight <n>
//			max_held      <size>
//		}]
//		allow_query_key  [on|off]
//		hide_protected   [on|off]
//		require_key      <endpoint> on|off
//		protected_fields <endpoint> [<field>...]
//		publish_fields   <endpoint> <field>...
//		extra_fields     <endpoint> <field>...
//		enable           <endpoint>...
//		disable          <endpoint>...
//
//		max_in_flight    <n>|off
//		max_main_thread  <n>|off
//		max_per_client   <n>|off
//		queue            <length> [<wait>]|off
//		timeout          <duration>|off
//		coalesce         on|off
//		cache            <endpoint> <duration>|off
//		snapshot         <endpoint> <duration>|off
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
//
//		server <name>
//		proxy {
//			<reverse_proxy subdirectives>
//		}
//
//		network <cluster-id> {
//			server <server-id> [<upstream>... [{
//				<reverse_proxy subdirectives>
//			}]]
//			self   <server-id>
//		}
//	}
//
// The upstreams are the game server(s) statusgate sends the requests it lets
// through to, as reverse_proxy takes them; proxy holds reverse_proxy's
// subdirectives (header_up, transport, lb_policy, to, ...) but
// handle_response, replace_status and response matchers, which would answer
// in the backend's place. Both go to the JSON's "proxy", the reverse_proxy
// handler's config. Without upstreams, proxy or server, statusgate is in the
// form of 1.0 and relies on a reverse_proxy after it.
//
// A key with two arguments is a name and a secret, with one a secret alone
// (named key-<n> by its position); either secret may be its SHA-256 digest
// as sha256:<64 hex digits>, which `caddy statusgate-key` prints. A plain
// secret is written to the JSON as that digest (see sealKey); one with an
// {env.*} or {file.*} placeholder stays as written. A name that looks like a
// secret (the generator's form, a digest, another line's secret) is an error,
// and so is a secret alone that reads like a name (`key website`, the secret
// forgotten; apikey.ReadsLikeName). Lines of one name are one key with
// several secrets, a key being rotated, and give it the same block.
// A key's block narrows it: endpoints (repeatable) lists the endpoints it
// opens, the index always among them (default: every endpoint), and for any
// other its caller is a caller without a key; max_in_flight caps its open
// requests, at the backend or queued (default: no cap of its own); max_held
// is its share of the held bytes, at most max_held (this gateway's share of
// it with instances) and at least max_response (default: keyShare).
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
// network makes the gateway answer /api/v1/network itself from the member
// servers' /api/v1/status (docs/network.md); each server is declared as
// the statusgate line declares a backend, and self names the one this
// statusgate fronts. It needs enable network.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return h.unmarshalCaddyfile(d, false, nil)
}

// unmarshalCaddyfile is UnmarshalCaddyfile of a handler's block, or, with
// defaults, of the global option's defaults. A key's max_held is checked
// here, at its word and line, against the limits of a block that sets its
// guard's own; under server <name>, and among the defaults, the limits are
// a declared server's, and the handler's Provision checks it against them
// (keyShares). global is the config's global statusgate option, as the
// Caddyfile adapter read it before the sites (nil: none, or not known):
// its defaults count in the checks of the handler's lines.
func (h *Handler) unmarshalCaddyfile(d *caddyfile.Dispenser, defaults bool, global *App) error {
	d.Next() // the directive name
	directive := d.Token()
	upstreams := d.RemainingArgsAsTokens()
	for _, u := range upstreams {
		if optionWord(u.Text) {
			return d.Errf("statusgate: '%s' is an option, not an upstream: options go in the block (statusgate <upstream>... {\n\t%s ...\n}); the line itself names the game server(s), as in statusgate 127.0.0.1:8080", u.Text, u.Text)
		}
	}
	var proxyBlock caddyfile.Segment
	var netLines networkLines
	auth, b := &h.Auth, &h.Backend
	var keyLines []keyLine            // what sealKey compares a key line with
	written := map[string]asWritten{} // max_response's, max_held's and instances' words, checked once the block is read
	seen := map[string]bool{}
	once := func(what string) error {
		if seen[what] {
			return d.Errf("'%s' given twice", what)
		}
		seen[what] = true
		return nil
	}
	var keyHeld []asWritten // each key's max_held as written, for checkKeyHeld
	// fieldLines are protected_fields' names, checked once the block is
	// read: an extra_fields line may come after.
	var fieldLines []fieldWord
	publishAt := map[string]caddyfile.Token{} // each publish_fields line's endpoint
	var globalAuth *AuthConfig
	if global != nil && global.Defaults != nil {
		globalAuth = &global.Defaults.Auth
	}
	var serverAt caddyfile.Dispenser // the server line's, for cacheOverNoCacheCaddyfile's error
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
			keyAt := *d // the key's line, which its errors name, also after its block
			if key, err = keyArgs(d); err != nil {
				return err
			}
			var held asWritten
			if err = keyBlock(d, &key, &held); err != nil {
				return err
			}
			if globalAuth != nil {
				for _, g := range globalAuth.Keys {
					if err := sameKeyError(key, g); err != nil {
						return keyAt.Errf("key: %v", err)
					}
				}
			}
			keyHeld = append(keyHeld, held)
			if key, line, err = sealKey(key, keyAt.File()+":"+strconv.Itoa(keyAt.Line()), keyLines); err != nil {
				return keyAt.Errf("%v", err)
			}
			keyLines = append(keyLines, line)
			auth.Keys = append(auth.Keys, key)
		case "allow_query_key":
			auth.AllowQueryKey, err = switchArg(d, opt, true)
		case "hide_protected":
			auth.HideProtected, err = switchArg(d, opt, true)
		case "require_key":
			err = perEndpoint(d, once, &auth.RequireKey, func() (bool, error) { return onoffArg(d, opt, false) })
		case "protected_fields":
			err = perEndpoint(d, once, &auth.ProtectedFields, func() ([]string, error) {
				fields, at, err := fieldArgs(d, opt)
				fieldLines = append(fieldLines, at...)
				return fields, err
			})
		case "publish_fields":
			err = perEndpoint(d, once, &auth.PublishFields, func() ([]string, error) {
				publishAt[d.Val()] = d.Token()
				fields, at, err := fieldArgs(d, opt)
				if err == nil && len(fields) == 0 {
					err = argErr(d, opt, caddyfileSyntax)
				}
				fieldLines = append(fieldLines, at...)
				return fields, err
			})
		case "extra_fields":
			err = perEndpoint(d, once, &auth.ExtraFields, func() ([]string, error) {
				fields, _, err := fieldArgs(d, opt)
				if err == nil && len(fields) == 0 {
					err = argErr(d, opt, caddyfileSyntax)
				}
				return fields, err
			})
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
			written[opt] = asWritten{word: d.Val(), d: *d}
		case "max_held":
			b.MaxHeld, err = oneArg(d, opt, sizeWord)
			written[opt] = asWritten{word: d.Val(), d: *d}
		case "write_timeout":
			b.WriteTimeout, err = oneArg(d, opt, durationWord)
		case "client_prefix_v6":
			b.ClientPrefix6, err = oneArg(d, opt, countWord)
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
			b.Instances, err = oneArg(d, opt, countWord)
			written[opt] = asWritten{word: d.Val(), d: *d}

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

		case "server":
			serverAt = *d
			h.Server, err = oneArg(d, opt, serverNameWord)
		case "proxy":
			proxyBlock, err = proxySegment(d)
		case "network":
			h.Network, netLines, err = networkBlock(d)

		default:
			return d.Errf("unrecognized subdirective '%s'%s", opt, nearest.Suggest(opt, optionNames(caddyfileSyntax)))
		}
		if err != nil {
			return err
		}
	}
	// The global option's extra_fields count for every handler, as they do
	// when the config loads (AuthConfig.adopt).
	if err := checkFieldLines(fieldLines, withGlobalExtra(auth, globalAuth)); err != nil {
		return err
	}
	if err := checkPublishLines(auth, globalAuth, defaults, publishAt); err != nil {
		return err
	}
	if err := heldFits(b, written); err != nil {
		return err
	}
	if why := b.instancesTooMany(); why != "" {
		at := written["instances"]
		return at.d.Errf("instances: %d %s", b.Instances, why)
	}
	if h.Server == "" && !defaults {
		if err := checkKeyHeld(auth.Keys, keyHeld, *b); err != nil {
			return err
		}
	}
	if h.Server != "" && (len(upstreams) > 0 || proxyBlock != nil) {
		return errAt(directive, "statusgate: server %s, and upstreams or a proxy block of its own: a handler fronts a server declared in the global statusgate option, or declares its backend, not both", h.Server)
	}
	if len(upstreams) > 0 || proxyBlock != nil {
		proxy, err := parseProxy(directive, upstreams, proxyBlock)
		if err != nil {
			return err
		}
		h.ProxyRaw = proxy
	} // else the form of 1.0: Provision warns
	if global != nil && !defaults {
		// One server, one declaration (declaredTwice), with the line.
		if err := declaredTwice(h.ProxyRaw, global.Servers, "statusgate: its upstreams", "write server %s in the block in place of the upstreams (and their proxy block)"); err != nil {
			return errAt(directive, "%v", err)
		}
		if h.Network != nil {
			for _, m := range h.Network.Servers {
				if err := declaredTwice(m.ProxyRaw, global.Servers, "network: server "+m.ID+": its upstreams", "write server %s alone on the line"); err != nil {
					return errAt(netLines.network, "%v", err)
				}
			}
		}
	}
	if global != nil && !defaults && h.Server != "" {
		if ep, ttl, fromDefaults := cacheOverNoCache(h.Backend.Cache, global.Defaults, global.Servers[h.Server]); ep != "" {
			return serverAt.Errf("%s", cacheOverNoCacheCaddyfile(h.Server, ep, ttl, fromDefaults))
		}
	}
	if h.Network != nil {
		return networkAfter(h.Network, netLines, h, global)
	}
	return nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
