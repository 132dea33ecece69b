// Package upstream is the backend a statusgate handler declares in its own
// config (statusgate <upstream>... { proxy { ... } }): the reverse_proxy that
// reaches it, what names it, and what of each request decides which backend
// the request reaches.
//
// A guard (the counts, the queue, the cache and the shared trips in front of
// one game server) must never serve one server's answers as another's. What
// tells two backends apart is in the declaration, and only some of it picks
// the server that answers: the upstreams' dials (or the dynamic upstreams'
// source), the Host header (a header_up Host that picks a server behind a
// panel), a rewrite, and the transport's protocol and TLS server name. So a
// Backend is named by those parts, read in a canonical form (ID): two
// handlers that declare the same backend get the same name, whatever else
// their configs say, a reload that keeps them keeps the name, and one that
// changes only a timeout, a health check or another header keeps the
// backend's counts and answers. A declaration whose picking parts hold
// placeholders (an upstream given as {game}, set by a map) reaches a backend
// that each request decides: Resolve gives their values for a request, which
// are part of what its answer is shared under; placeholders elsewhere pick
// nothing, and split nothing (Unsplit names them). No placeholder may carry
// the client's API key to the backend.
package upstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/statusgate/statusgate/caddymodule/internal/seal"
)

// Backend is a declared backend: a provisioned reverse_proxy and what names
// it. Its methods are safe for concurrent use.
type Backend struct {
	path     string          // of the declaration, for messages
	raw      json.RawMessage // the declaration as written
	id       string
	answers  string
	server   string   // id, whatever the spelling of the dials (Server)
	dials    []string // the upstreams' addresses, as Address reads them, sorted, each once
	describe string
	// names are the placeholders of the parts that pick the server (names),
	// sorted, each once; unsplit the others.
	names, unsplit []string
	// bare says the declaration is its upstreams and nothing else.
	bare  bool
	proxy *reverseproxy.Handler // nil until Provision
}

// refused are the reverse_proxy options a statusgate backend cannot have,
// with the reason: statusgate reads the backend's answer itself.
var refused = map[string]string{
	"handle_response": "statusgate reads the backend's answer itself (the field layer, the cache, shared trips), so no route may answer in its place",
}

// Parse reads raw, the JSON of a reverse_proxy handler (Caddy's reverse_proxy
// without "handler"): what names the backend, without sending anything
// anywhere yet (Provision). path names raw in error messages ("proxy").
func Parse(path string, raw json.RawMessage) (*Backend, error) {
	canon, err := canonical(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if why, ok := refused[name]; ok {
			return nil, fmt.Errorf("%s.%s: not allowed here: %s", path, name, why)
		}
	}
	if isNull(fields["upstreams"]) && isNull(fields["dynamic_upstreams"]) {
		return nil, fmt.Errorf("%s: no upstreams: name the game server, as in statusgate 127.0.0.1:8080 (JSON: \"upstreams\": [{\"dial\": \"127.0.0.1:8080\"}])", path)
	}
	var rp reverseproxy.Handler
	if err := json.Unmarshal(raw, &rp); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for i, u := range rp.Upstreams {
		for _, name := range placeholdersIn(u.Dial) {
			if volatile(name) {
				return nil, fmt.Errorf("%s.upstreams[%d].dial: {%s} has a new value for every request and cannot pick the backend", path, i, name)
			}
		}
	}
	all := placeholders(canon)
	for _, name := range all {
		if full := shorthand(name); full != "" {
			return nil, fmt.Errorf("%s: {%s} is a Caddyfile shorthand, which JSON does not expand (the backend would get the text itself): write {%s}", path, name, full)
		}
	}
	for _, name := range all {
		if carriesKey(name) {
			return nil, fmt.Errorf("%s: {%s} can carry the client's API key (X-API-Key, or ?key= with allow_query_key) to the backend, which must never see it: name what the backend needs instead ({http.request.uri.path}, {http.request.uri.query.NAME}, {http.request.header.NAME})", path, name)
		}
	}
	sel, err := selecting(canon, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	sum := sha256.Sum256(sel)
	answers := sha256.Sum256(append(append(sel, '\n'), requestHeaders(fields)...))
	dials := make([]string, 0, len(rp.Upstreams))
	for _, u := range rp.Upstreams {
		dials = append(dials, Address(u.Dial))
	}
	slices.Sort(dials)
	dials = slices.Compact(dials)
	server, err := selecting(canon, dials)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	serverSum := sha256.Sum256(server)
	names := slices.DeleteFunc(placeholders(sel), func(name string) bool { return volatile(name) || decided(name) })
	return &Backend{
		path:     path,
		raw:      raw,
		id:       hex.EncodeToString(sum[:12]),
		answers:  hex.EncodeToString(answers[:12]),
		server:   hex.EncodeToString(serverSum[:12]),
		dials:    dials,
		describe: describe(&rp),
		names:    names,
		unsplit: slices.DeleteFunc(all, func(name string) bool {
			return volatile(name) || decided(name) || slices.Contains(names, name)
		}),
		bare: !slices.ContainsFunc(slices.Collect(maps.Keys(fields)), func(name string) bool {
			return name != "upstreams" && name != "dynamic_upstreams"
		}),
	}, nil
}

// shorthand is the placeholder the Caddyfile shorthand name ({remote_host},
// {header.X-API-Key}, {orig_uri}) stands for, or "" for a placeholder that
// is none: the Caddyfile adapter expands shorthands in the sites' blocks,
// and JSON never does.
func shorthand(name string) string {
	if strings.HasPrefix(name, "file.") {
		return "" // Caddy's own {file.<path>} too: JSON reads it so
	}
	seg := caddyfile.Segment{{Text: "{" + name + "}"}}
	httpcaddyfile.NewShorthandReplacer().ApplyToSegment(&seg)
	if full := seg[0].Text; full != "{"+name+"}" && strings.HasPrefix(full, "{") && strings.HasSuffix(full, "}") {
		return full[1 : len(full)-1]
	}
	return ""
}

// volatile reports whether the placeholder name has a value of its own for
// every request, or one that only the trip sets: the time, the request's ID
// and duration, the proxy's and the response's own (a header_up
// X-Request-ID {http.request.uuid}, a header_down from
// {http.reverse_proxy.upstream.address}). Such a value picks no backend
// (Parse refuses it in a dial), and as part of the backend's name it would
// make every request's answer its own, or, read again before the trip,
// another backend's.
func volatile(name string) bool {
	return strings.HasPrefix(name, "time.") || name == "http.request.uuid" ||
		strings.HasPrefix(name, "http.request.duration") ||
		strings.HasPrefix(name, "http.reverse_proxy.") || strings.HasPrefix(name, "http.response.")
}

// carriesKey reports whether the placeholder name can hold the client's API
// key: the key header, the key parameter, or the client's original target
// or query, which keep ?key= (the request's own target and query are the
// canonical ones by the time the trip reads them: decided).
func carriesKey(name string) bool {
	if rest, ok := strings.CutPrefix(name, "http.request.orig_uri"); ok {
		return !(rest == ".path" || strings.HasPrefix(rest, ".path."))
	}
	return name == "http.request.uri.query.key" || strings.EqualFold(name, "http.request.header."+keyHeader)
}

// decided reports whether the placeholder name is a part of the request
// statusgate decided on and sends (its method, canonical path and query):
// read when the trip is made, and already part of what an answer is shared
// under, it picks no server of its own (a rewrite /s{http.request.uri}).
// A parameter of the query is the client's (a map of {query.server}).
func decided(name string) bool {
	switch name {
	case "http.request.method", "http.request.uri", "http.request.uri.path", "http.request.uri.query", "http.request.uri.prefixed_query",
		// Their escaped forms ({%uri}, {%query}): read before the rewrite,
		// they would hold the client's ?key=.
		"http.request.uri_escaped", "http.request.uri.path_escaped", "http.request.uri.query_escaped":
		return true
	}
	return strings.HasPrefix(name, "http.request.uri.path.")
}

// keyHeader is the request header that carries the API key.
const keyHeader = "X-API-Key"

// selecting is the part of the canonical declaration canon that picks the
// server that answers, canonical too: the upstreams' dials in their order
// (or, if dials is not nil, dials in their place),
// the dynamic upstreams, the rewrite, what header_up does to Host, and the
// transport's protocol, TLS and TLS server name. Everything else (timeouts,
// health checks, load balancing among replicas, other headers) changes how
// the same server is reached, never which.
func selecting(canon []byte, dials []string) ([]byte, error) {
	var v map[string]any
	d := json.NewDecoder(bytes.NewReader(canon))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	sel := map[string]any{}
	if ups, ok := v["upstreams"].([]any); ok {
		written := make([]any, 0, len(ups))
		for _, u := range ups {
			if m, ok := u.(map[string]any); ok {
				written = append(written, m["dial"])
			}
		}
		sel["upstreams"] = written
	}
	if dials != nil {
		sel["upstreams"] = dials
	}
	for _, k := range []string{"dynamic_upstreams", "rewrite"} {
		if x, ok := v[k]; ok {
			sel[k] = x
		}
	}
	if hdrs, ok := v["headers"].(map[string]any); ok {
		if req, ok := hdrs["request"].(map[string]any); ok {
			host := map[string]any{}
			for op, x := range req {
				switch x := x.(type) {
				case map[string]any: // set, add, replace: by header name
					for name, val := range x {
						if strings.EqualFold(name, "Host") {
							host[op] = val
						}
					}
				case []any: // delete: header names
					for _, name := range x {
						if s, ok := name.(string); ok && strings.EqualFold(s, "Host") {
							host[op] = true
						}
					}
				}
			}
			if len(host) > 0 {
				sel["host"] = host
			}
		}
	}
	if tr, ok := v["transport"].(map[string]any); ok {
		t := map[string]any{}
		if p := tr["protocol"]; p != "http" { // the default
			t["protocol"] = p
		}
		if tls, ok := tr["tls"].(map[string]any); ok {
			t["tls"] = true
			t["server_name"] = tls["server_name"]
		}
		if len(t) > 0 {
			sel["transport"] = t
		}
	}
	return json.Marshal(sel)
}

// Unsplit names the placeholders of the declaration outside the parts that
// pick the server: they split no answer, so callers who share one get the
// values of the request that made its trip (a header_up X-Real-IP
// {http.request.remote}). The handler warns of them at load.
func (b *Backend) Unsplit() []string { return b.unsplit }

// Provision sets up the reverse_proxy that reaches the backend, in ctx,
// which cleans it up when the config stops.
func (b *Backend) Provision(ctx caddy.Context) error {
	mod, err := ctx.LoadModuleByID("http.handlers.reverse_proxy", b.raw)
	if err != nil {
		return fmt.Errorf("%s: %v", b.path, err)
	}
	rp, ok := mod.(*reverseproxy.Handler)
	if !ok {
		return fmt.Errorf("%s: http.handlers.reverse_proxy is %T, not Caddy's reverse_proxy", b.path, mod)
	}
	// Before it serves: the check of what it sends, whatever the transport
	// (FastCGI's parameters too), for the caller's key.
	seal.Wrap(rp)
	b.proxy = rp
	return nil
}

// isNull reports whether a JSON member is absent, null or empty.
func isNull(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == "" || s == "null" || s == "[]" || s == "{}"
}

// canonical is raw in one form for every spelling of the same declaration:
// members sorted by name at every depth, no white space, numbers as written.
func canonical(raw json.RawMessage) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("not a JSON object")
	}
	return json.Marshal(v) // maps are written with sorted keys
}

// placeholders lists the placeholders in the string values of the canonical
// JSON, sorted, each once: found the way Caddy's replacer finds them.
func placeholders(canon []byte) []string {
	var v any
	_ = json.Unmarshal(canon, &v)
	seen := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(k)
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case string:
			for _, name := range placeholdersIn(v) {
				seen[name] = true
			}
		}
	}
	walk(v)
	names := make([]string, 0, len(seen))
	for k := range seen {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// placeholdersIn lists the placeholders in s, found the way Caddy's
// replacer finds them.
func placeholdersIn(s string) []string {
	if !strings.Contains(s, "{") {
		return nil
	}
	var names []string
	_, _ = caddy.NewEmptyReplacer().ReplaceFunc(s, func(key string, val any) (any, error) {
		names = append(names, key)
		return val, nil
	})
	return names
}

// describe is the upstreams as an operator wrote them, for messages.
func describe(rp *reverseproxy.Handler) string {
	var dials []string
	for _, u := range rp.Upstreams {
		dials = append(dials, u.Dial)
	}
	if rp.DynamicUpstreamsRaw != nil {
		var src struct {
			Source string `json:"source"`
		}
		_ = json.Unmarshal(rp.DynamicUpstreamsRaw, &src)
		dials = append(dials, "dynamic upstreams ("+src.Source+")")
	}
	return strings.Join(dials, " ")
}

// ID names the declaration: equal for two backends exactly when the parts
// of their declarations that pick the server are the same (in canonical
// form).
func (b *Backend) ID() string { return b.id }

// Answers names what the backend's answers are: ID, and the headers the
// proxy sends. Two declarations of one server that send other headers (a
// header_up X-Server that a multiplexer behind the dial routes by, the
// plugin's own key on a staff path) are counted at one guard (ID) but never
// share an answer, a trip or a stream.
func (b *Backend) Answers() string { return b.answers }

// requestHeaders is the canonical JSON of the declaration's request header
// operations (header_up), fields being its members: nothing when it has
// none.
func requestHeaders(fields map[string]json.RawMessage) []byte {
	var h struct {
		Request json.RawMessage `json:"request"`
	}
	if raw, ok := fields["headers"]; !ok || json.Unmarshal(raw, &h) != nil || isNull(h.Request) {
		return nil
	}
	canon, err := canonical(h.Request)
	if err != nil {
		return nil
	}
	return canon
}

// Is reports whether b declares the backend other declares: the same
// server (Server: whatever the spelling of the dials), or, where b is its
// upstreams alone (a network's server line without a block), the same
// upstreams.
func (b *Backend) Is(other *Backend) bool {
	return b.server == other.server || b.bare && b.SameUpstreams(other)
}

// SameUpstreams reports whether b and other declare the same upstreams,
// whatever their spelling: then what tells them apart is the rest of the
// declaration (a Host, a rewrite, TLS).
func (b *Backend) SameUpstreams(other *Backend) bool {
	return b.describe == other.describe || len(b.dials) > 0 && slices.Equal(b.dials, other.dials)
}

// Server names the server the declaration reaches as ID does, but
// whatever the spelling and the order of its upstreams' dials (Address):
// equal for localhost:8080 and 127.0.0.1:8080, for [::ffff:10.0.0.3]:8080
// and 10.0.0.3:8080, for two upstreams in either order. Two network members
// of one Server are one game server.
func (b *Backend) Server() string { return b.server }

// Dials are the addresses of the declaration's upstreams, as Address reads
// them, sorted, each once; none for dynamic upstreams.
func (b *Backend) Dials() []string { return b.dials }

// Picking names the placeholders of the parts of the declaration that pick
// the server (its dials, its Host, a rewrite, its TLS server name): the
// values each request gives them decide which server it reaches.
func (b *Backend) Picking() []string { return b.names }

// Address is the dial address d as the server it reaches: its network, and
// its host and port with an IP address in its shortest form (an IPv4-mapped
// IPv6 address as IPv4, no zone), localhost, 127.0.0.1 and ::1 as
// "loopback", and a name in lower case without a trailing dot. A dial that
// is no address (a placeholder, a Unix socket's path) is itself.
func Address(d string) string {
	na, err := caddy.ParseNetworkAddress(d)
	if err != nil || na.IsUnixNetwork() || strings.Contains(d, "{") {
		return d
	}
	host := Host(na.Host)
	port := strconv.FormatUint(uint64(na.StartPort), 10)
	if na.EndPort != na.StartPort {
		port += "-" + strconv.FormatUint(uint64(na.EndPort), 10)
	}
	return na.Network + "/" + net.JoinHostPort(host, port)
}

// Host is a dial's host as Address spells it: an IP address in its
// shortest form (an IPv4-mapped IPv6 address as IPv4, no zone), localhost,
// 127.0.0.1 and ::1 as "loopback", a name in lower case without a trailing
// dot.
func Host(host string) string {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap().WithZone("")
		if ip == netip.IPv6Loopback() || ip == netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
			return "loopback" // what localhost is
		}
		return ip.String()
	}
	if host == "localhost" {
		return "loopback"
	}
	return host
}

// String is the backend's upstreams, for messages and logs.
func (b *Backend) String() string { return b.describe }

// Placeholders reports whether the declaration holds placeholders, whose
// values each request decides.
func (b *Backend) Placeholders() bool { return len(b.names) > 0 }

// Values are the values of a declaration's placeholders for one request,
// by name: what decides which backend the request reaches. nil for a
// declaration without placeholders.
type Values []string // name, value, name, value, ...

// Resolve is the values of the declaration's placeholders in repl, the
// request's replacer: an unknown placeholder is empty, as reverse_proxy
// reads it.
func (b *Backend) Resolve(repl *caddy.Replacer) Values {
	if len(b.names) == 0 {
		return nil
	}
	v := make(Values, 0, 2*len(b.names))
	for _, name := range b.names {
		val, _ := repl.Get(name)
		v = append(v, name, caddy.ToString(val))
	}
	return v
}

// Key is v as one string, for a share key: the same for two requests
// exactly when every value is the same.
func (v Values) Key() string {
	if len(v) == 0 {
		return ""
	}
	var b []byte
	for i := 0; i+1 < len(v); i += 2 {
		b = strconv.AppendQuote(b, v[i])
		b = append(b, '=')
		b = strconv.AppendQuote(b, v[i+1])
		b = append(b, ' ')
	}
	return string(b)
}

// Set puts v into repl, so that a request made later with repl (a cache
// refresh, a live stream's poll) reaches the backend that the request v
// was resolved for.
func (v Values) Set(repl *caddy.Replacer) {
	for i := 0; i+1 < len(v); i += 2 {
		repl.Set(v[i], v[i+1])
	}
}

// Sent is the values, in repl, of every placeholder of the declaration that
// the trip reads (those that pick the server and the others, but for those
// new every request): what the backend is sent besides the request. A
// handler after statusgate that changes one (a map, vars) changes what the
// backend gets: compared before and after it, they must be equal. nil for a
// declaration without such placeholders.
func (b *Backend) Sent(repl *caddy.Replacer) Values {
	if len(b.names)+len(b.unsplit) == 0 {
		return nil
	}
	v := make(Values, 0, 2*(len(b.names)+len(b.unsplit)))
	for _, names := range [][]string{b.names, b.unsplit} {
		for _, name := range names {
			val, _ := repl.Get(name)
			v = append(v, name, caddy.ToString(val))
		}
	}
	return v
}

// ServeHTTP sends r to the backend and writes its answer to w.
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	return b.proxy.ServeHTTP(w, r, noNext)
}

// noNext is what follows the proxy: nothing. reverse_proxy calls it only
// from handle_response routes, which a Backend cannot have.
var noNext = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
