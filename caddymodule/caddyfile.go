package caddymodule

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/dustin/go-humanize"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
	"github.com/statusgate/statusgate/internal/nearest"
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
// handler's config. Without upstreams or proxy, statusgate is in the form of
// 1.0 and relies on a reverse_proxy after it.
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
			keyHeld = append(keyHeld, held)
			if key, line, err = sealKey(key, keyAt.File()+":"+strconv.Itoa(keyAt.Line()), keyLines); err != nil {
				return keyAt.Errf("%v", err)
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
			err = perEndpoint(d, once, &auth.RequireKey, func() (bool, error) { return onoffArg(d, opt, false) })
		case "protected_fields":
			err = perEndpoint(d, once, &auth.ProtectedFields, func() ([]string, error) {
				fields, at, err := fieldArgs(d, opt)
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
	if err := checkFieldLines(fieldLines, auth.ExtraFields); err != nil {
		return err
	}
	if err := heldFits(b, written); err != nil {
		return err
	}
	if why := b.instancesTooMany(); why != "" {
		at := written["instances"]
		return at.d.Errf("instances: %d %s", b.Instances, why)
	}
	if err := checkKeyHeld(auth.Keys, keyHeld, *b); err != nil {
		return err
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
	if h.Network != nil {
		return networkAfter(h.Network, netLines, h)
	}
	return nil
}

// An option is a subdirective and its arguments as the syntax writes them.
type option struct{ name, args string }

// caddyfileSyntax is the syntax of the statusgate directive's block, in the
// order the documentation gives it: the source of the suggestion for an
// unrecognized subdirective and of the syntax an argument error shows.
// TestSyntaxListsEveryOption keeps it equal to the parser's cases, and to
// the syntax blocks of UnmarshalCaddyfile's comment, the README and
// docs/configuration.md.
var caddyfileSyntax = []option{
	{"auth", "on|off"},
	{"key", "[<name>] <secret>|sha256:<hex>"},
	{"allow_query_key", "[on|off]"},
	{"hide_protected", "[on|off]"},
	{"require_key", "<endpoint> on|off"},
	{"protected_fields", "<endpoint> [<field>...]"},
	{"extra_fields", "<endpoint> <field>..."},
	{"enable", "<endpoint>..."},
	{"disable", "<endpoint>..."},
	{"max_in_flight", "<n>|off"},
	{"max_main_thread", "<n>|off"},
	{"max_per_client", "<n>|off"},
	{"queue", "<length> [<wait>]|off"},
	{"timeout", "<duration>|off"},
	{"coalesce", "on|off"},
	{"cache", "<endpoint> <duration>|off"},
	{"snapshot", "<endpoint> <duration>|off"},
	{"cache_size", "<size>|off"},
	{"max_response", "<size>"},
	{"max_held", "<size>"},
	{"write_timeout", "<duration>|off"},
	{"client_prefix_v6", "<bits>"},
	{"guard", "<name>"},
	{"instances", "<k>"},
	{"max_streams", "<n>|off"},
	{"max_streams_per_client", "<n>|off"},
	{"max_topics", "<n>|off"},
	{"stream_lifetime", "<duration>|off"},
	{"stream_heartbeat", "<duration>"},
	{"server", "<name>"},
	{"proxy", ""},               // a block of reverse_proxy's subdirectives
	{"network", "<cluster-id>"}, // a block of servers and self
}

// keySyntax is the syntax of a key's block, as caddyfileSyntax.
var keySyntax = []option{
	{"endpoints", "<endpoint>..."},
	{"max_in_flight", "<n>"},
	{"max_held", "<size>"},
}

// optionNames are the options' names, in order.
func optionNames(syntax []option) []string {
	out := make([]string, len(syntax))
	for i, o := range syntax {
		out[i] = o.name
	}
	return out
}

// argErr is the error for a line of the option opt with too few or too many
// arguments (the dispenser's current token is the last read): Caddy's
// ArgErr, and the option's syntax.
func argErr(d *caddyfile.Dispenser, opt string, syntax []option) error {
	args := "…"
	for _, o := range syntax {
		if o.name == opt {
			args = o.args
		}
	}
	return d.Errf("%s: wrong argument count or unexpected line ending after '%s'; write %s %s", opt, d.Val(), opt, args)
}

// checkKeyHeld checks each key's max_held, held[i] as written, against the
// block's limits b, once the block is read (max_held and max_response may
// come after the key): keyHeldError, with the key's max_held line. Limits
// that do not resolve are left to Provision, which names them.
func checkKeyHeld(keys []apikey.Key, held []asWritten, b BackendConfig) error {
	l, err := resolveLimits(b)
	if err != nil {
		return nil
	}
	for i, k := range keys {
		if held[i].word == "" {
			continue
		}
		if err := keyHeldError(k.MaxHeld, "'"+held[i].word+"'", l); err != nil {
			return held[i].d.Errf("%v", err)
		}
	}
	return nil
}

// proxySegment reads a proxy block: its tokens, braces included, checked
// for what a statusgate backend cannot have.
func proxySegment(d *caddyfile.Dispenser) (caddyfile.Segment, error) {
	if d.CountRemainingArgs() > 0 {
		d.NextArg()
		return nil, d.Errf("proxy: '%s': the upstreams go on the statusgate line (statusgate <upstream>... {), or in proxy's block as to <upstream>...", d.Val())
	}
	seg := d.NextSegment()
	if err := refuseAnswering(seg); err != nil {
		return nil, err
	}
	return seg, nil
}

// refuseAnswering checks the block of the segment seg (a word, then a
// block of reverse_proxy subdirectives) for what a statusgate backend
// cannot have: what would answer in the backend's place.
func refuseAnswering(seg caddyfile.Segment) error {
	pd := caddyfile.NewDispenser(seg)
	pd.Next()
	for pd.NextBlock(0) {
		opt := pd.Val()
		switch {
		case opt == "handle_response", opt == "replace_status", strings.HasPrefix(opt, "@"):
			return pd.Errf("%s: '%s' is not allowed here: statusgate reads the backend's answer itself (the field layer, the cache, shared trips), so nothing may answer in its place", seg[0].Text, opt)
		}
	}
	return nil
}

// parseProxy reads the backend a statusgate line declares, its upstreams
// and its proxy block, with reverse_proxy's own parser, into the JSON of
// the reverse_proxy handler (without "handler"). directive is the
// statusgate token, which errors about the upstreams point to.
func parseProxy(directive caddyfile.Token, upstreams []caddyfile.Token, block caddyfile.Segment) (json.RawMessage, error) {
	head := directive
	head.Text = "reverse_proxy"
	tokens := append([]caddyfile.Token{head}, upstreams...)
	if len(block) > 1 {
		// The block without the word proxy, opened on the line of the
		// upstreams, where reverse_proxy's parser looks for it.
		open := block[1]
		open.File, open.Line = head.File, head.Line
		tokens = append(append(tokens, open), block[2:]...)
	}
	rp := new(reverseproxy.Handler)
	if err := rp.UnmarshalCaddyfile(caddyfile.NewDispenser(tokens)); err != nil {
		return nil, err
	}
	if len(rp.Upstreams) == 0 && rp.DynamicUpstreamsRaw == nil {
		return nil, errAt(directive, "statusgate: a proxy block without upstreams: name the game server, as in statusgate 127.0.0.1:8080 { ... }, or with to or dynamic in the proxy block")
	}
	return json.Marshal(rp)
}

// optionWord reports whether w is a word of statusgate's block, or a
// switch's on or off, which no upstream is called: written on the
// directive's line by mistake, it would be read as a host name.
func optionWord(w string) bool {
	switch w {
	case "on", "off", "true", "false":
		return true
	}
	return slices.Contains(optionNames(caddyfileSyntax), w)
}

// repeatable are the options that may appear more than once: key, and those
// that name an endpoint, once per endpoint.
var repeatable = map[string]bool{
	"key": true, "require_key": true, "protected_fields": true, "extra_fields": true, "enable": true, "disable": true,
	"cache": true, "snapshot": true,
}

// switchArg reads an option's on|off (or true|false) as a pointer, the way
// the JSON spells a switch whose absence means its default; optional says a
// bare option means on.
func switchArg(d *caddyfile.Dispenser, opt string, optional bool) (*bool, error) {
	on, err := onoffArg(d, opt, optional)
	return &on, err
}

// onoffArg is onoff.Parse, whose argument errors give opt's syntax.
func onoffArg(d *caddyfile.Dispenser, opt string, optional bool) (bool, error) {
	on, err := onoff.Parse(d, opt, optional)
	if errors.Is(err, onoff.ErrArgCount) {
		err = argErr(d, opt, caddyfileSyntax)
	}
	return on, err
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

// fieldWord is a field name of a protected_fields line, for
// checkFieldLines: its endpoint and its token (the word, its file and line).
type fieldWord struct {
	endpoint string
	at       caddyfile.Token
}

// fieldArgs reads the rest of a protected_fields or extra_fields line, the
// dispenser at its endpoint: the member names, each once (none means hide
// nothing, not the default), and where each is written.
func fieldArgs(d *caddyfile.Dispenser, opt string) ([]string, []fieldWord, error) {
	endpoint := d.Val()
	fields := []string{}
	var at []fieldWord
	for d.NextArg() {
		if d.Val() == "" {
			return nil, nil, d.Errf("%s: empty field name", opt)
		}
		if !slices.Contains(fields, d.Val()) {
			fields = append(fields, d.Val())
			at = append(at, fieldWord{endpoint, d.Token()})
		}
	}
	return fields, at, nil
}

// checkFieldLines checks the names of the protected_fields lines with
// fieldError against extra, the names extra_fields gives each endpoint: an
// error names the word and its line.
func checkFieldLines(words []fieldWord, extra map[string][]string) error {
	for _, w := range words {
		if err := fieldError(w.endpoint, w.at.Text, extra[w.endpoint], fmt.Sprintf("write extra_fields %s %s too", w.endpoint, w.at.Text)); err != nil {
			return errAt(w.at, "protected_fields: %v", err)
		}
	}
	return nil
}

// switchEndpoints reads an enable or disable line: at least one endpoint,
// each switched at most once in the block, whichever line names it.
func switchEndpoints(d *caddyfile.Dispenser, once func(string) error, m *map[string]bool, on bool) error {
	opt := d.Val()
	if !d.NextArg() {
		return argErr(d, opt, caddyfileSyntax)
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
		return argErr(d, opt, caddyfileSyntax)
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
		return argErr(d, opt, caddyfileSyntax)
	}
	return nil
}

// heldFits checks, once the block is read, that no answer max_response lets
// the gateway hold is larger than max_held, the default of either where it
// is not written. The error is at max_response's line (max_held's when only
// that is written), shows each size as written and the other's line. Within
// this gateway's share of max_held (instances) is Provision's check.
func heldFits(b *BackendConfig, written map[string]asWritten) error {
	if len(written) == 0 || cmp.Or(b.MaxResponse, defaultMaxResponse) <= cmp.Or(b.MaxHeld, defaultMaxHeld) {
		return nil
	}
	at, ok := written["max_response"]
	if !ok {
		at = written["max_held"]
	}
	shown := func(name string, def int64) string {
		w, ok := written[name]
		switch {
		case !ok:
			return sizeText(def) + ", its default"
		case w.d.Line() == at.d.Line():
			return w.word
		}
		return fmt.Sprintf("%s (at %s:%d)", w.word, w.d.File(), w.d.Line())
	}
	response, held := shown("max_response", defaultMaxResponse), shown("max_held", defaultMaxHeld)
	need := sizeText(defaultMaxResponse)
	if w, ok := written["max_response"]; ok {
		need = w.word
	}
	if _, ok := written["max_response"]; ok {
		return at.d.Errf("max_response: %s is more than max_held, %s: no answer that large could be held; write max_held %s or more, or a smaller max_response", response, held, need)
	}
	return at.d.Errf("max_held: %s is less than max_response, %s: no answer that large could be held; write max_held %s or more, or a smaller max_response", held, response, need)
}

// asWritten is an option's value as a Caddyfile line wrote it, and the line
// (the dispenser at the value) for errors: for a check that needs the whole
// block, which an option written later may change.
type asWritten struct {
	word string
	d    caddyfile.Dispenser
}

// keyBlock reads the optional block of a key line into k: its scope, its cap
// and its share of the held bytes, whose word and line it writes to held.
// Every error names the word and the line.
func keyBlock(d *caddyfile.Dispenser, k *apikey.Key, held *asWritten) error {
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
			if !d.NextArg() {
				return argErr(d, opt, keySyntax)
			}
			n, err := positiveInt(d, opt, false)
			if err != nil {
				return err
			}
			if d.NextArg() {
				return argErr(d, opt, keySyntax)
			}
			k.MaxInFlight = n

		case "max_held":
			if seen[opt] {
				return d.Errf("'%s' given twice", opt)
			}
			seen[opt] = true
			n, err := oneArg(d, opt, keyHeldWord)
			if err != nil {
				return err
			}
			k.MaxHeld = n
			*held = asWritten{word: d.Val(), d: *d}

		default:
			return d.Errf("unrecognized key subdirective '%s'%s", opt, nearest.Suggest(opt, optionNames(keySyntax)))
		}
	}
	return nil
}

// keyHeldWord reads the current token, the argument of a key's max_held, as
// a size; off is no size: every key has a share.
func keyHeldWord(d *caddyfile.Dispenser, opt string) (int64, error) {
	if d.Val() == "off" {
		return 0, d.Errf("%s: 'off' is not a size: a key's share of the held bytes cannot be off; write a size such as 16MiB, or leave %s out for the key's default share", opt, opt)
	}
	return sizeWord(d, opt)
}

// oneArg reads the one argument left on the line of the option opt with
// word, which reads the current token, and refuses a second.
func oneArg[T any](d *caddyfile.Dispenser, opt string, word func(d *caddyfile.Dispenser, opt string) (T, error)) (T, error) {
	var zero T
	if !d.NextArg() {
		return zero, argErr(d, opt, caddyfileSyntax)
	}
	v, err := word(d, opt)
	if err != nil {
		return zero, err
	}
	if d.NextArg() {
		return zero, argErr(d, opt, caddyfileSyntax)
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
		return "", argErr(d, opt, caddyfileSyntax)
	}
	name := d.Val()
	if !validEndpointName(name) {
		return "", d.Errf("%s: %v", opt, endpointNameError(name))
	}
	return name, nil
}

// networkLines is where a network block's words are, for the errors that
// can only be told once the whole statusgate block is read.
type networkLines struct {
	network caddyfile.Token // the word network
	self    caddyfile.Token // the word self; zero without one
}

// networkBlock reads the network block at d's current token:
//
//	network <cluster-id> {
//		server <server-id> <upstream>... [{
//			<reverse_proxy subdirectives>
//		}]
//		self   <server-id>
//	}
//
// Each server is declared as statusgate <upstream>... { proxy { ... } }
// declares a backend, into the same JSON, so that both name the same guard.
// Every error names the word and the line.
func networkBlock(d *caddyfile.Dispenser) (*NetworkConfig, networkLines, error) {
	lines := networkLines{network: d.Token()}
	if !d.NextArg() {
		return nil, lines, d.Errf("network: name the network: network <cluster-id> { server <server-id> <upstream>... }")
	}
	c := &NetworkConfig{Cluster: d.Val()}
	if err := networkIDError("network", c.Cluster); err != nil {
		return nil, lines, d.Errf("%v", err)
	}
	if d.NextArg() {
		return nil, lines, d.ArgErr()
	}
	var proxies [][]byte // by server, to tell two ids of one backend
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "server":
			s, proxy, err := networkServer(d, c, proxies)
			if err != nil {
				return nil, lines, err
			}
			c.Servers = append(c.Servers, s)
			proxies = append(proxies, proxy)

		case "self":
			if c.Self != "" {
				return nil, lines, d.Errf("'self' given twice")
			}
			lines.self = d.Token()
			if !d.NextArg() {
				return nil, lines, d.Errf("self: name the server that is this statusgate's own backend: self <server-id>")
			}
			c.Self = d.Val()
			if err := networkIDError("self", c.Self); err != nil {
				return nil, lines, d.Errf("%v", err)
			}
			if d.NextArg() {
				return nil, lines, d.ArgErr()
			}

		default:
			return nil, lines, d.Errf("unrecognized network subdirective '%s'", opt)
		}
	}
	if len(c.Servers) == 0 {
		return nil, lines, errAt(lines.network, "network %s: no servers: list each member as server <server-id> <upstream>...", c.Cluster)
	}
	if c.Self != "" && !slices.ContainsFunc(c.Servers, func(s NetworkServer) bool { return s.ID == c.Self }) {
		return nil, lines, errAt(lines.self, "self: '%s' is no server of network %s", c.Self, c.Cluster)
	}
	return c, lines, nil
}

// networkServer reads a server line of the network block c, whose servers
// so far declare proxies: its id, its upstreams and its optional block of
// reverse_proxy subdirectives, read as a statusgate line and its proxy
// block are.
func networkServer(d *caddyfile.Dispenser, c *NetworkConfig, proxies [][]byte) (NetworkServer, []byte, error) {
	seg := d.NextSegment()
	sd := caddyfile.NewDispenser(seg)
	sd.Next() // server
	if !sd.NextArg() {
		return NetworkServer{}, nil, sd.Errf("server: name the server and its upstream(s): server <server-id> <upstream>...")
	}
	s := NetworkServer{ID: sd.Val()}
	if err := networkIDError("server", s.ID); err != nil {
		return s, nil, sd.Errf("%v", err)
	}
	if i := slices.IndexFunc(c.Servers, func(o NetworkServer) bool { return o.ID == s.ID }); i >= 0 {
		return s, nil, sd.Errf("server %s: given twice: each server once", s.ID)
	}
	upstreams := sd.RemainingArgsAsTokens()
	if len(upstreams) == 0 {
		if len(seg) > 2 {
			return s, nil, sd.Errf("server %s: a block without upstreams: write server %s <upstream>... { ... }, or declare %s once in the global statusgate option and write server %s alone", s.ID, s.ID, s.ID, s.ID)
		}
		// A server declared once in the global statusgate option
		// (Handler.adopt finds it when the handler is provisioned).
		return s, nil, nil
	}
	var block caddyfile.Segment
	if rest := seg[2+len(upstreams):]; len(rest) > 0 {
		block = append(caddyfile.Segment{seg[0]}, rest...)
		if err := refuseAnswering(block); err != nil {
			return s, nil, err
		}
	}
	proxy, err := parseProxy(seg[0], upstreams, block)
	if err != nil {
		return s, nil, err
	}
	be, err := upstream.Parse("server "+s.ID, proxy)
	if err != nil {
		return s, nil, sd.Errf("%v", err)
	}
	if why := memberRefusal(be); why != "" {
		return s, nil, sd.Errf("server %s: %s", s.ID, why)
	}
	for i, p := range proxies {
		if other, err := upstream.Parse("server", p); err == nil && other.Server() == be.Server() {
			return s, nil, sd.Errf("server %s: %s is the server that server %s declares as %s: one server under two ids would count its players twice", s.ID, be, c.Servers[i].ID, other)
		}
	}
	s.ProxyRaw = proxy
	return s, proxy, nil
}

// networkAfter checks, once the whole statusgate block is read, what a
// network block c at lines cannot be with the rest of it: the network
// endpoint left off (or given a cache time of its own), or self declared
// with other upstreams than the statusgate line's proxy.
func networkAfter(c *NetworkConfig, lines networkLines, h *Handler) error {
	if err := networkSwitchError(h.Endpoints, h.Backend); err != nil {
		return errAt(lines.network, "network %s: %v", c.Cluster, err)
	}
	if c.Self == "" || h.ProxyRaw == nil {
		return nil
	}
	if i := slices.IndexFunc(c.Servers, func(s NetworkServer) bool { return s.ID == c.Self }); c.Servers[i].ProxyRaw == nil {
		return nil // a declared server: checked when the handler is provisioned
	}
	own, err := upstream.Parse("proxy", h.ProxyRaw)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(c.Servers, func(s NetworkServer) bool { return s.ID == c.Self })
	self, err := upstream.Parse("server "+c.Self, c.Servers[i].ProxyRaw)
	if err != nil {
		return err
	}
	if !self.Is(own) {
		return errAt(lines.self, "self %s: self names the server the statusgate line fronts, and server %s %s", c.Self, c.Self, selfMismatch(self, own))
	}
	return nil
}

// errAt is an error at the word tok, read earlier, with its file and line.
func errAt(tok caddyfile.Token, format string, args ...any) error {
	d := caddyfile.NewDispenser([]caddyfile.Token{tok})
	d.Next()
	return d.Errf(format, args...)
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
