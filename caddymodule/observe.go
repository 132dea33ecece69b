package caddymodule

// This file is what statusgate tells Caddy about each request it decides:
// the placeholders and the metrics (package metrics), both set from one
// place so that the two always agree.

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
)

// The placeholders statusgate sets on every request it decides, for
// log_append, header, rate_limit keys and the like. Every value comes from
// the config (endpoint and key names, the outcome's word) or from Caddy (the
// client IP), never from the request itself, and never a secret.
const (
	// placeholderEndpoint is the endpoint's name from the endpoint table
	// ("status", "custom/votes"); empty when the path is no enabled endpoint.
	placeholderEndpoint = "http.statusgate.endpoint"
	// placeholderKey is the name of the caller's accepted key, also where
	// its scope does not open the endpoint; empty for a caller without one,
	// and while auth is off.
	placeholderKey = "http.statusgate.key"
	// placeholderClient is the key name for a caller whose accepted key
	// opens the endpoint, and the client IP (Caddy's, after trusted_proxies)
	// for everyone else: one value that tells callers apart, for rate limits.
	placeholderClient = "http.statusgate.client"
	// placeholderOutcome is the request's metrics.Outcome ("served",
	// "not_found", ...).
	placeholderOutcome = "http.statusgate.outcome"
)

// The placeholder values are held as interface values made once, because
// turning a string into an interface on every request would allocate.
var (
	outcomeValues = func() []any {
		v := make([]any, len(metrics.Outcomes()))
		for _, o := range metrics.Outcomes() {
			v[o] = o.String()
		}
		return v
	}()
)

// identify sets who called which endpoint (nil: none) before anything else
// sees the request: the handlers after statusgate, such as rate_limit, and
// the access log.
//
// The key placeholder names the accepted key even where its scope does not
// open the endpoint (the request the scope refused shows which key it was);
// the client placeholder is the key's name only where the key counts, and
// the address, like any caller without a key's, everywhere else.
func identify(repl *caddy.Replacer, r *http.Request, ep *endpoint, who caller) {
	endpoint := noValue
	if ep != nil {
		endpoint = ep.nameValue
	}
	repl.Set(placeholderEndpoint, endpoint)
	repl.Set(placeholderKey, who.name)
	if !who.Keyed {
		// Stored by Caddy as an interface value already: no allocation.
		repl.Set(placeholderClient, caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey))
		return
	}
	repl.Set(placeholderClient, who.name)
}

// settle records the request's outcome, once, from conclude: the
// placeholder, which the access log reads after the response, and the
// endpoint's counter (requests that match no endpoint count under
// metrics.OtherEndpoint, in m).
func settle(repl *caddy.Replacer, ep *endpoint, m *metrics.Metrics, o metrics.Outcome) {
	repl.Set(placeholderOutcome, outcomeValues[o])
	if ep != nil {
		ep.Metrics.Count(o)
	} else {
		m.Other().Count(o)
	}
}

// logFailure logs a backend failure without the request: its headers and query
// may carry a key. A *url.Error would print the upstream URL with its query, so
// only its cause is kept. endpoint is the endpoint's name.
func logFailure(logger *zap.Logger, status int, endpoint string, cause error) {
	var he caddyhttp.HandlerError
	if errors.As(cause, &he) && he.Err != nil {
		cause = he.Err
	}
	var ue *url.Error
	if errors.As(cause, &ue) {
		cause = ue.Err
	}
	logger.Error("backend response refused",
		zap.String("endpoint", endpoint), zap.Int("status", status), zap.Error(cause))
}
