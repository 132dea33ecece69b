package caddymodule

// This file keeps the caller's key out of everything a handler after
// statusgate, or its declared backend, can send: what the caller presented
// (the checks are internal/seal's), and the copies of the client's request
// Caddy keeps beside the one statusgate decided.

import (
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/caddymodule/internal/seal"
)

// presented is what the caller of r presented as its key, trimmed as
// authenticate reads it: the X-API-Key header's value and the ?key=
// value, whether or not allow_query_key lets it count. The one that
// authenticated (accepted) is kept whatever its length; another only from
// seal.MinUnknown bytes. Read before prepareUpstream drops them.
func (a *access) presented(r *http.Request, accepted bool) []string {
	var secrets []string
	add := func(v string, deciding bool) {
		v = strings.Trim(v, " \t")
		if v != "" && (accepted && deciding || len(v) >= seal.MinUnknown) {
			secrets = append(secrets, v)
		}
	}
	vals, inHeader := r.Header["X-Api-Key"]
	if inHeader {
		add(vals[0], true)
	}
	if v, ok := queryKey(r.URL.RawQuery); ok {
		add(v, !inHeader && a.qkey)
	}
	return secrets
}

// sealDecided takes the client's key out of what Caddy keeps of the
// request beside the one statusgate decided (r, rewritten by
// prepareUpstream): the original request (FastCGI's REQUEST_URI, the
// {http.request.orig_uri.*} placeholders) loses its key pair as r did, and
// the variables that hold one of secrets (a vars or map of the key before
// statusgate) are emptied, so that no handler after statusgate, and no
// placeholder of the declared backend's, reads the key from them.
func sealDecided(r *http.Request, repl *caddy.Replacer, secrets []string) {
	ctx := r.Context()
	if or, ok := ctx.Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && or.URL != nil {
		if q := stripQueryKey(or.URL.RawQuery); q != or.URL.RawQuery {
			// The URL is the copy Caddy keeps for this request alone; its
			// target, a string of the kept request, is read as a
			// placeholder, which a value of the replacer's own shadows.
			or.URL.RawQuery = q
			repl.Set("http.request.orig_uri", or.URL.RequestURI())
		}
	}
	if len(secrets) == 0 {
		return
	}
	vars, _ := ctx.Value(caddyhttp.VarsCtxKey).(map[string]any)
	for name, v := range vars {
		// A vars or map of a placeholder sets a string; other values
		// (Caddy's own: the client's IP, trusted_proxy) are no copy of a key.
		if s, ok := v.(string); ok && seal.Holds(s, secrets) {
			vars[name] = ""
		}
	}
}
