package caddymodule

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// route is a parsed request path: the endpoint it names and its parameter.
// It is the only thing the upstream path is built from.
type route struct {
	ep    *endpoint
	param string // decoded; empty when the endpoint has none
}

// clientPath returns the request path as the client spelled it, escapes and
// all. url.URL.EscapedPath is not enough: when the raw path holds a byte it
// would have escaped ('{', '|', '^', ...), it forgets the raw spelling and
// re-escapes the decoded path, which turns %77orlds back into worlds. RawPath
// is used whenever it is a faithful spelling of Path; a stale one (a handler
// changed Path alone) is ignored.
func clientPath(u *url.URL) string {
	if u.RawPath != "" {
		if p, err := url.PathUnescape(u.RawPath); err == nil && p == u.Path {
			return u.RawPath
		}
	}
	return u.EscapedPath()
}

// underAPI reports whether the escaped request path is /api or below it, and
// returns what follows /api ("", "/", "/v1/status", ...).
func underAPI(escaped string) (rest string, ok bool) {
	rest, ok = strings.CutPrefix(escaped, "/api")
	if !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	return rest, true
}

// maxPathLength bounds what follows /api in the escaped path, in bytes. A
// longer path is refused before it is parsed, so that no path costs the
// gateway more than a bounded amount of work, whether it names an endpoint
// or not (how long a 404 takes must not tell them apart). It is well above
// any real parameter: a UUID is 36 bytes, a world name is a directory name
// of at most 255 bytes (765 escaped), a custom station's name is a few words.
const maxPathLength = 1024

// route parses what follows /api in the escaped path into an enabled endpoint.
//
// It matches exact segments of the path as the client spelled it: structural
// segments (v1, the endpoint name, custom) must be the literal lower-case words,
// so any percent-encoding, case change, ';', trailing dot, backslash or empty
// segment in them is simply an unknown endpoint. Only the parameter segment is
// decoded, once, and then checked. The alias /api/<x> is read as /api/v1/<x>
// before anything else. /api, /api/, /api/v1 and /api/v1/ are the index.
// A path longer than maxPathLength is no endpoint.
func (t *endpointTable) route(rest string) (route, bool) {
	if len(rest) > maxPathLength {
		return route{}, false
	}
	switch rest {
	case "", "/", "/v1", "/v1/":
		ep := t.lookup("index")
		return route{ep: ep}, ep != nil
	}
	rest = rest[1:] // drop the leading '/'
	if r, ok := strings.CutPrefix(rest, "v1/"); ok {
		rest = r
	}
	name, param, hasParam := strings.Cut(rest, "/")
	if name == "custom" {
		// custom/<name> is one endpoint name of two segments, with no parameter.
		station, tail, more := strings.Cut(param, "/")
		if !hasParam || more || tail != "" {
			return route{}, false
		}
		name, param, hasParam = customPrefix+station, "", false
	}
	if name == "index" {
		return route{}, false // the index is only reachable as /api/v1
	}
	ep := t.lookup(name)
	if ep == nil {
		return route{}, false
	}
	switch {
	case !hasParam && ep.rule != paramRequired:
		return route{ep: ep}, true
	case hasParam && ep.rule != paramNone:
		p, ok := decodeParam(param, ep.kind)
		return route{ep: ep, param: p}, ok
	}
	return route{}, false
}

// decodeParam decodes one escaped parameter segment and accepts it only if it is
// a value the endpoint can take. A '/' (raw or %2F) is refused, so the parameter
// is exactly one segment; so are '.' and '..' in any spelling, back slashes and
// control characters, because the backend's JDK server decodes the path before
// routing and would read them as path structure.
func decodeParam(escaped string, kind paramKind) (string, bool) {
	if escaped == "" || strings.IndexByte(escaped, '/') >= 0 {
		return "", false
	}
	p, err := url.PathUnescape(escaped)
	if err != nil || p == "." || p == ".." || !utf8.ValidString(p) {
		return "", false
	}
	if kind == paramUUID {
		// The backend parses with java.util.UUID.fromString, which is lenient
		// about group lengths; the gateway only lets its alphabet through.
		if len(p) > 36 {
			return "", false
		}
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == '-') {
				return "", false
			}
		}
		return p, true
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f || c == '/' || c == '\\' || c == utf8.RuneError {
			return "", false
		}
	}
	return p, true
}

// upstreamPath is the canonical path the backend gets, rebuilt from the parsed
// segments: Path decoded and RawPath escaped (empty when they are the same, as
// net/url expects).
func (rt route) upstreamPath() (path, rawPath string) {
	if rt.param == "" {
		return rt.ep.basePath, ""
	}
	path = rt.ep.basePath + "/" + rt.param
	if esc := url.PathEscape(rt.param); esc != rt.param {
		rawPath = rt.ep.basePath + "/" + esc
	}
	return path, rawPath
}
