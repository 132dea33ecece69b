package caddymodule

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
)

// exchange is one request on its way through the gateway: what the steps
// after routing and conclude need to know about it. There is one per
// request, never copied: the steps below forward take the writer and the
// request they act on as arguments (forward.go).
type exchange struct {
	w           http.ResponseWriter // the client's writer; under the progress deadline once forwarded
	r           *http.Request       // the client's, rewritten for the backend once routed
	repl        *caddy.Replacer     // the request's, for the placeholders
	ep          *endpoint           // nil until routed
	who         caller              // who the caller is for ep
	decodedPath string              // what the gateway's error envelopes show

	forwarded bool    // the request went to the backend step
	ended     bool    // a step said how the request ended: verdict holds it
	verdict   verdict // how it ended
}

// filtered reports whether the response goes through the field layer.
func (x *exchange) filtered() bool { return x.who.filtered() }

// end records how the request ended, for conclude.
func (x *exchange) end(v verdict) { x.verdict, x.ended = v, true }

// verdict is how a request ended, as the step that ended it reports it: the
// outcome, and, unless the step answered the client itself, what conclude
// answers with.
type verdict struct {
	outcome metrics.Outcome
	// status is the gateway's envelope to answer with; 0: the step answered.
	status     int
	retryAfter string // of a 429 or 503
	cause      error  // a backend failure, logged
	// cut says the answer was under way when it broke off: only a cut
	// connection tells the client the rest is missing.
	cut bool
}

// statusClientClosed is what the access log shows for a request whose client
// left before its answer: nginx's 499, which Caddy's reverse_proxy records
// too.
const statusClientClosed = 499

// refused is the verdict of a refusal the gateway decides before the
// backend step.
func refused(o metrics.Outcome, status int) verdict { return verdict{outcome: o, status: status} }

// refusal is a request the gateway answers with its own envelope instead of
// the backend's answer: what the backend step found, carried as an error
// through the paths that speak errors (coalesce.Do) for conclude to write.
type refusal struct{ verdict }

func (r *refusal) Error() string { return r.cause.Error() }

// streamed is the verdict on an answer too large to hold, which went to the
// client as it came: nothing is left to write, or, when it broke off, the
// connection to cut.
type streamed struct{ verdict }

func (s *streamed) Error() string { return "streamed to the client: " + s.outcome.String() }

// tooMany answers a caller over a limit of its own (its share, its place, its
// key's cap): 429, to ask again in a second.
func tooMany(cause error) *refusal {
	return &refusal{verdict{status: http.StatusTooManyRequests, outcome: metrics.RateLimited, retryAfter: "1", cause: cause}}
}

// busy answers a caller the backend has no room for: 503, to ask again after
// retryAfter seconds.
func busy(cause error, retryAfter string) *refusal {
	return &refusal{verdict{status: http.StatusServiceUnavailable, outcome: metrics.Busy, retryAfter: retryAfter, cause: cause}}
}

// badGateway answers a caller whose backend answer failed.
func badGateway(cause error) *refusal {
	return &refusal{verdict{status: http.StatusBadGateway, outcome: metrics.BackendError, cause: cause}}
}

// contextRefusal answers a caller whose request context ended while it
// waited: its budget is spent (504). A context also ends when its client
// leaves; conclude, which knows the client's own context, makes that
// client_gone.
func contextRefusal(err error) *refusal {
	return &refusal{verdict{status: http.StatusGatewayTimeout, outcome: metrics.BackendError, cause: err}}
}

// heldRefusal answers a caller the held-bytes budget turned away.
func heldRefusal(err error) *refusal {
	if errors.Is(err, hold.ErrClientFull) {
		return tooMany(err)
	}
	return busy(err, "1")
}

// errStreamsFull is why an anonymous answer too large to hold is refused
// when half the backend's slots stream such answers already.
var errStreamsFull = errors.New("too many answers too large to hold are streaming")

// errQuota is why a client over max_per_client is refused.
var errQuota = errors.New("too many requests open for this client")

// errKeyQuota is why a key over its own max_in_flight is refused.
var errKeyQuota = errors.New("too many requests open for this key")

// conclude ends every request, deferred by ServeHTTP: it answers a refusal in
// the gateway's envelope, and sets the placeholders and counts the outcome
// (observe.go), once. A request whose step panicked, as reverse_proxy does
// when an answer under way breaks off, is counted too, and the panic goes on
// unrecovered, with its stack.
//
// A client that left while its request was in the backend step (queued,
// following an identical request, at the backend) ends the same way
// wherever it waited: client_gone, and nothing written but the status for
// the access log; not the busy queue, the timeout or the broken answer its
// leaving caused, and nothing logged as a backend failure.
func (h *Handler) conclude(x *exchange) {
	if !x.forwarded {
		h.identify(x.repl, x.r, x.ep, x.who)
	}
	v := x.verdict
	if !x.ended {
		// Panicking: the answer, if any, broke off.
		v = verdict{outcome: metrics.BackendError}
	}
	if x.forwarded && (v.status != 0 || v.cut || !x.ended) && x.r.Context().Err() != nil {
		v = verdict{outcome: metrics.ClientGone, status: statusClientClosed, cut: v.cut}
	}
	h.settle(x.repl, x.ep, v.outcome)
	switch {
	case !x.ended:
		return // the panic goes on
	case v.cut:
		if v.cause != nil {
			h.logFailure(http.StatusBadGateway, x.ep, v.cause)
		}
		panic(http.ErrAbortHandler) // net/http cuts the connection and logs nothing
	case v.status == 0:
		return
	}
	// The header holds what the site's handlers before the gateway set (HSTS,
	// Alt-Svc, Server), which every refusal keeps, and nothing of a backend
	// answer: that stays in the spool's own header until the answer is
	// written, after which nothing is refused any more, only cut.
	hdr := x.w.Header()
	switch v.status {
	case statusClientClosed:
		x.w.WriteHeader(v.status) // for the access log; nobody reads it
		return
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if v.retryAfter != "" {
			hdr.Set("Retry-After", v.retryAfter)
		}
	default:
		if v.cause != nil {
			h.logFailure(v.status, x.ep, v.cause)
		}
	}
	writeError(x.w, v.status, x.decodedPath)
}

// logFailure logs a backend failure without the request: its headers and query
// may carry a key. A *url.Error would print the upstream URL with its query, so
// only its cause is kept.
func (h *Handler) logFailure(status int, ep *endpoint, cause error) {
	var he caddyhttp.HandlerError
	if errors.As(cause, &he) && he.Err != nil {
		cause = he.Err
	}
	var ue *url.Error
	if errors.As(cause, &ue) {
		cause = ue.Err
	}
	h.logger.Error("backend response refused",
		zap.String("endpoint", ep.name), zap.Int("status", status), zap.Error(cause))
}
