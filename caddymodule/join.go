package caddymodule

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
)

// handlerAt describes a handler for an error message: its server's addresses,
// the only thing of its place that Caddy tells a handler, and the backend
// it declares.
func handlerAt(ctx caddy.Context, b *upstream.Backend) string {
	s := "a statusgate handler"
	if srv := serverOf(ctx); srv != nil && len(srv.Listen) > 0 {
		s += " on " + strings.Join(slices.Sorted(slices.Values(srv.Listen)), " ")
	}
	if b != nil {
		return s + " in front of " + b.String()
	}
	return s + " without upstreams"
}

// policyOf fingerprints the field lists: what a filtered answer's bytes
// depend on besides the request.
func policyOf(authOn bool, t *endpointTable) string {
	f := fnv.New64a()
	fmt.Fprintf(f, "auth=%v\n", authOn)
	for _, ep := range t.ordered {
		fmt.Fprintf(f, "%s=%q\n", ep.Name, ep.fieldList)
	}
	return strconv.FormatUint(f.Sum64(), 36)
}

// joinGuard joins the handler to the guard its config names (guard.Name),
// for the handler of the config load app, once the load's handlers that
// share it agree on its server limits (App.agree). c is the handler's
// backend options, l its limits, b its declared backend (nil: none),
// policy the field lists' fingerprint (policyOf); member, when the guard
// is a network's server's, describes it for error messages (else the
// handler is described by its place).
func joinGuard(app *App, ctx caddy.Context, c BackendConfig, l guard.Limits, b *upstream.Backend, policy string, logger *zap.Logger, member string) (*guard.Guard, error) {
	name := guard.Name(c.Guard, b)
	where := member
	if where == "" {
		where = handlerAt(ctx, b)
	}
	if err := app.agree(name, l, where, member != ""); err != nil {
		return nil, err
	}
	gc := guard.Config{
		Name: name, Load: app.seq, Limits: l, Backend: b,
		Policy: policy,
		Carry:  []string{placeholderEndpoint, placeholderKey, placeholderClient},
		Logger: logger,
	}
	switch {
	case b != nil:
		gc.Scope = "backend " + b.Answers()
	case c.Guard != "":
		// The 1.0 form, but the operator named the backend: one game
		// server, whatever the handlers after each statusgate say.
		gc.Scope = "guard " + c.Guard
	}
	return guard.Join(gc)
}

// writeTimeout is the progress deadline of the handler's client writes
// (write_timeout); 0: none.
func (c BackendConfig) writeTimeout() time.Duration {
	return durationOr(c.WriteTimeout, defaultWriteTimeout)
}

// prefix6 is how many leading bits of an IPv6 address name one client
// (client_prefix_v6).
func (c BackendConfig) prefix6() int { return cmp.Or(c.ClientPrefix6, defaultClientPrefix6) }
