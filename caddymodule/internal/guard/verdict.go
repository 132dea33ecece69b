package guard

// This file is how a request ends, as a value: the verdict each step that
// ends a request returns, the refusals the gateway answers with its own
// envelope, and the log line of a backend failure.

import (
	"errors"
	"net/http"

	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
)

// Verdict is how a request ended, as the step that ended it reports it: the
// outcome, and, unless the step answered the client itself, what the
// gateway answers with (the handler's conclude writes it).
type Verdict struct {
	Outcome metrics.Outcome
	// Status is the gateway's envelope to answer with; 0: the step answered.
	Status     int
	RetryAfter string // of a 429 or 503
	Cause      error  // a backend failure, logged
	// Cut says the answer was under way when it broke off: only a Cut
	// connection tells the client the rest is missing.
	Cut bool
}

// StatusClientClosed is what the access log shows for a request whose client
// left before its answer: nginx's 499, which Caddy's reverse_proxy records
// too.
const StatusClientClosed = 499

// TooMany answers a caller over a limit of its own (its share, its place, its
// key's cap): 429, to ask again in a second.
func TooMany(cause error) Verdict {
	return Verdict{Status: http.StatusTooManyRequests, Outcome: metrics.RateLimited, RetryAfter: "1", Cause: cause}
}

// Busy answers a caller the backend has no room for: 503, to ask again after
// retryAfter seconds.
func Busy(cause error, retryAfter string) Verdict {
	return Verdict{Status: http.StatusServiceUnavailable, Outcome: metrics.Busy, RetryAfter: retryAfter, Cause: cause}
}

// BadGateway answers a caller whose backend answer failed.
func BadGateway(cause error) Verdict {
	return Verdict{Status: http.StatusBadGateway, Outcome: metrics.BackendError, Cause: cause}
}

// ContextRefusal answers a caller whose request context ended while it
// waited: its budget is spent (504). A context also ends when its client
// leaves; the handler's conclude, which knows the client's own context, makes that
// client_gone.
func ContextRefusal(err error) Verdict {
	return Verdict{Status: http.StatusGatewayTimeout, Outcome: metrics.BackendError, Cause: err}
}

// HeldRefusal answers a caller the held-bytes budget turned away.
func HeldRefusal(err error) Verdict {
	if errors.Is(err, hold.ErrClientFull) {
		return TooMany(err)
	}
	return Busy(err, "1")
}

// Refusal reports whether the verdict is the gateway's own refusal, to ask
// again later (429, 503), not a backend failure: its cause, if any, says
// why, and is no failure to log.
func (v Verdict) Refusal() bool {
	return v.Status == http.StatusTooManyRequests || v.Status == http.StatusServiceUnavailable
}

// Failed reports whether the verdict is a backend failure to log: one with
// a cause that is no Refusal; an answer is not one.
func (v Verdict) Failed() bool { return v.Cause != nil && !v.Refusal() }

// errStreamsFull is why an anonymous answer too large to hold is refused
// when half the backend's slots stream such answers already.
var errStreamsFull = errors.New("too many answers too large to hold are streaming")

// errQuota is why a client over max_per_client is refused.
var errQuota = errors.New("too many requests open for this client")

// errKeyQuota is why a key over its own max_in_flight is refused.
var errKeyQuota = errors.New("too many requests open for this key")
