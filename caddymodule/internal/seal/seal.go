// Package seal keeps the secret a caller presented (its API key, from the
// X-API-Key header or ?key=) off every request the gateway makes for that
// caller, whatever the config says: the request statusgate hands on is
// checked before it goes (InRequest), and the declared backend's transport
// checks what it actually sends, its FastCGI parameters included
// (Transport). A request that would carry the secret is refused (Leak),
// never sent.
//
// The load-time refusals of placeholders that can carry the key
// (internal/upstream) name the mistake early; this is the check that holds
// when a config reaches the key some other way (a vars or map of it, an
// escaped form, a plugin's placeholder).
package seal

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy/fastcgi"
)

// MinUnknown is the shortest secret checked that the keyring did not
// accept: a caller's junk ?key=1 would otherwise refuse every request of
// its own (every address holds a 1), and a secret that short is nobody's.
// A secret the keyring accepted is checked whatever its length.
const MinUnknown = 12

type ctxKey struct{}

// With is ctx carrying secrets, the values the caller presented as its key
// (trimmed, none empty): what the requests made for it must not carry.
func With(ctx context.Context, secrets []string) context.Context {
	if len(secrets) == 0 {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, secrets)
}

// From is the secrets ctx carries (With): none for a request that no caller
// presented a key for (a background refresh, a caller without one).
func From(ctx context.Context) []string {
	s, _ := ctx.Value(ctxKey{}).([]string)
	return s
}

// Holds reports whether v holds one of secrets: as written, or once its
// percent-escapes are decoded, once or twice, with a '+' read as itself or
// as a space (a {%query} or a rewrite of an escaped target writes the key
// escaped; an escaped query escaped again).
func Holds(v string, secrets []string) bool {
	if holdsAsWritten(v, secrets) {
		return true
	}
	if strings.IndexByte(v, '%') < 0 && strings.IndexByte(v, '+') < 0 {
		return false // nothing to decode: no allocation on the common path (and no ContainsAny, which builds its set per call)
	}
	forms := []string{v}
	for round := 0; len(forms) > 0; round++ {
		var next []string
		for _, f := range forms {
			if holdsAsWritten(f, secrets) {
				return true
			}
			if round == 2 {
				continue
			}
			for _, plus := range []bool{false, true} {
				if dec, ok := unescape(f, plus); ok {
					next = append(next, dec)
				}
			}
		}
		forms = next
	}
	return false
}

func holdsAsWritten(v string, secrets []string) bool {
	for _, s := range secrets {
		if strings.Contains(v, s) {
			return true
		}
	}
	return false
}

// unescape is v with its percent-escapes decoded, a stray '%' kept as it
// is, and a '+' read as a space if plus (as a query is read): ok is false,
// and nothing allocated, when there is nothing to decode.
func unescape(v string, plus bool) (string, bool) {
	if !decodable(v, plus) {
		return v, false
	}
	var b strings.Builder
	b.Grow(len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '%' && i+2 < len(v) && ishex(v[i+1]) && ishex(v[i+2]):
			c = unhex(v[i+1])<<4 | unhex(v[i+2])
			i += 2
		case c == '+' && plus:
			c = ' '
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// decodable reports whether unescape would change v.
func decodable(v string, plus bool) bool {
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == '%' && i+2 < len(v) && ishex(v[i+1]) && ishex(v[i+2]):
			return true
		case v[i] == '+' && plus:
			return true
		}
	}
	return false
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// InRequest names the part of r that holds one of secrets (Holds): its
// target (path and query), its Host, a header's name or value, or the
// target of the original request Caddy keeps beside it (what FastCGI sends
// as REQUEST_URI); "" when none does.
func InRequest(r *http.Request, secrets []string) string {
	if len(secrets) == 0 {
		return ""
	}
	if u := r.URL; u != nil {
		switch {
		case Holds(u.Path, secrets) || Holds(u.RawPath, secrets):
			return "path"
		case Holds(u.RawQuery, secrets):
			return "query"
		case Holds(u.Host, secrets) || Holds(u.User.String(), secrets):
			return "target's host"
		}
	}
	if Holds(r.Host, secrets) {
		return "Host header"
	}
	for name, vs := range r.Header {
		if Holds(name, secrets) {
			return "header names"
		}
		for _, v := range vs {
			if Holds(v, secrets) {
				return "header " + name
			}
		}
	}
	// FastCGI sends the kept request's URL; its RequestURI, a string of the
	// kept copy that nothing can change, is read only as a placeholder,
	// which statusgate shadows.
	if or, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && or.URL != nil {
		if Holds(or.URL.RawQuery, secrets) || Holds(or.URL.Path, secrets) {
			return "original request's target (FastCGI's REQUEST_URI)"
		}
	}
	return ""
}

// Leak is why a request that would carry the caller's key is refused: what
// names the part. It never holds the key.
type Leak string

func (l Leak) Error() string {
	return "the request to the backend would carry the caller's API key in its " + string(l) +
		", so statusgate refused to send it (nothing was sent): the backend must never see a key; remove what copies it there " +
		"(a vars, map, request_header or header_up of {http.request.header.X-API-Key}, {http.request.orig_uri}, {%query} or {http.request.uri_escaped}, " +
		"an env of a FastCGI transport) and name what the backend needs instead ({http.request.uri.path}, {http.request.uri.query.<name>}); " +
		"if the config copies nothing, the client sent its key a second time (another header, a cookie) and must send it once"
}

// Transport is a reverse_proxy's transport that refuses a trip holding
// the secrets of its request's context (From) in what it sends: the
// request (InRequest) and, for FastCGI, the parameters its config adds
// (env, root). Whatever the transport, the check is on the request it is
// given, before it connects.
type Transport struct {
	http.RoundTripper
}

// Wrap puts the check in front of rp's provisioned transport. It must run
// before rp serves anything: reverse_proxy reads its Transport unlocked.
func Wrap(rp *reverseproxy.Handler) {
	if rp.Transport == nil {
		return
	}
	if _, ok := rp.Transport.(Transport); ok {
		return
	}
	rp.Transport = Transport{rp.Transport}
}

// RoundTrip refuses a request that carries its caller's secret, and sends
// any other with the wrapped transport.
func (t Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if secrets := From(r.Context()); len(secrets) > 0 {
		if what := InRequest(r, secrets); what != "" {
			return nil, Leak(what)
		}
		if what := t.inParams(r, secrets); what != "" {
			return nil, Leak(what)
		}
	}
	return t.RoundTripper.RoundTrip(r)
}

// inParams names the FastCGI parameter of the config (env, root) that
// holds one of secrets once its placeholders are replaced, as the FastCGI
// transport replaces them; "" for none, or for another transport. The
// others it sends are made of the request, which InRequest checked.
func (t Transport) inParams(r *http.Request, secrets []string) string {
	var ft *fastcgi.Transport
	switch x := t.RoundTripper.(type) {
	case *fastcgi.Transport:
		ft = x
	case fastcgi.Transport:
		ft = &x
	default:
		return ""
	}
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	for name, v := range ft.EnvVars {
		if Holds(repl.ReplaceAll(v, ""), secrets) {
			return "FastCGI parameter " + name
		}
	}
	if Holds(repl.ReplaceAll(ft.Root, "."), secrets) {
		return "FastCGI root"
	}
	return ""
}

// The interfaces reverse_proxy asks its transport for while it serves: a
// Transport answers them as the transport it wraps, or as a transport
// without them would.

func (t Transport) ProxyProtocolEnabled() bool {
	p, ok := t.RoundTripper.(reverseproxy.ProxyProtocolTransport)
	return ok && p.ProxyProtocolEnabled()
}

func (t Transport) RequiresContentLength() bool {
	c, ok := t.RoundTripper.(reverseproxy.ContentLengthRequiredTransport)
	return ok && c.RequiresContentLength()
}

func (t Transport) OverrideHealthCheckScheme(base *url.URL, port string) {
	if o, ok := t.RoundTripper.(reverseproxy.HealthCheckSchemeOverriderTransport); ok {
		o.OverrideHealthCheckScheme(base, port)
	}
}

func (t Transport) TLSEnabled() bool {
	tt, ok := t.RoundTripper.(reverseproxy.TLSTransport)
	return ok && tt.TLSEnabled()
}

func (t Transport) EnableTLS(base *reverseproxy.TLSConfig) error {
	if tt, ok := t.RoundTripper.(reverseproxy.TLSTransport); ok {
		return tt.EnableTLS(base)
	}
	return nil
}

var (
	_ reverseproxy.ProxyProtocolTransport              = Transport{}
	_ reverseproxy.ContentLengthRequiredTransport      = Transport{}
	_ reverseproxy.HealthCheckSchemeOverriderTransport = Transport{}
	_ reverseproxy.TLSTransport                        = Transport{}
)
