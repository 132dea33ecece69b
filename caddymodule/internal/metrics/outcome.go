package metrics

// Outcome is how statusgate decided a request: the value of the outcome
// label. Each request gets exactly one.
type Outcome uint8

// The outcomes. The label value of each is its String. This block and
// outcomeNames are the only list of them: the metrics, the handler's
// {http.statusgate.outcome} placeholder and the tests all go by Outcomes, so
// a new outcome is added here and nowhere else.
const (
	// Served: forwarded to the backend, and its response passed to the
	// caller as the backend sent it (a caller with an accepted key, or auth
	// off).
	Served Outcome = iota
	// Filtered: forwarded, and the response went through the field layer
	// (protected fields removed, meta.authenticated set) because the caller
	// had no accepted key while auth is on.
	Filtered
	// Index: the endpoint index, answered by the gateway.
	Index
	// NotFound: a 404 from the gateway for a path that is no enabled
	// endpoint, or an endpoint's parameter that is malformed; nothing is
	// forwarded.
	NotFound
	// Refused: the endpoint requires a key and none was accepted; answered
	// 401, or under hide_protected with the 404 that looks like NotFound
	// (the caller cannot tell them apart, the operator can).
	Refused
	// Method: a method other than GET, HEAD and OPTIONS, answered 405.
	Method
	// Preflight: a CORS preflight (OPTIONS), answered by the gateway.
	Preflight
	// BackendError: forwarded, but the backend failed: unreachable, timed
	// out, or sent a response the field layer could not judge and refused
	// (the gateway fails closed).
	BackendError
	// Busy: the backend was at its limit and the queue full or the wait
	// over, or the config was replaced by a reload; answered 503 Backend
	// busy without reaching the backend.
	Busy
	// RateLimited: a rate limiter after the gateway (rate_limit) refused the
	// caller; answered 429 Too many requests.
	RateLimited
	// Cached: answered from the micro-cache, without reaching the backend.
	Cached
	// Coalesced: answered with the response of an identical request that
	// was at the backend at the same time (the caller did not make a trip).
	Coalesced
	// BadRequest: a request target the access log's query filter would
	// read differently from the gateway (a '#', a ';' or a bad %-escape in
	// the query), answered 400 before the key is read.
	BadRequest
	// ClientGone: the client left while its request waited in the backend
	// step (queued, following an identical request, or at the backend);
	// nothing is written, and the access log shows 499 as for Caddy's
	// reverse_proxy.
	ClientGone
	// Streamed: a live stream (server-sent events) that ended without
	// fault: the client left, its stream_lifetime was over, or a reload
	// closed it.
	Streamed
	// StreamCut: a live stream cut because its client did not take what
	// was written within write_timeout.
	StreamCut

	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	Served:       "served",
	Filtered:     "filtered",
	Index:        "index",
	NotFound:     "not_found",
	Refused:      "refused",
	Method:       "method",
	Preflight:    "preflight",
	BackendError: "backend_error",
	Busy:         "busy",
	RateLimited:  "rate_limited",
	Cached:       "cached",
	Coalesced:    "coalesced",
	BadRequest:   "bad_request",
	ClientGone:   "client_gone",
	Streamed:     "streamed",
	StreamCut:    "stream_cut",
}

// String is the outcome's label value, e.g. "not_found"; the empty string for
// a value that is not an outcome.
func (o Outcome) String() string {
	if o >= numOutcomes {
		return ""
	}
	return outcomeNames[o]
}

// Outcomes lists every outcome in order.
func Outcomes() []Outcome {
	all := make([]Outcome, numOutcomes)
	for i := range all {
		all[i] = Outcome(i)
	}
	return all
}
