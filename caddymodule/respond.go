package caddymodule

import (
	"net/http"
	"strconv"
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/cors"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/jsonfilter"
	"github.com/statusgate/statusgate/internal/apijson"
)

// errorMessages are the messages of the gateway's own error envelopes. They
// carry no path: the path has its own field, and a disguised 404 must read
// exactly like a genuine one.
var errorMessages = map[int]string{
	http.StatusBadRequest:          "Bad request",
	http.StatusNotFound:            "Not found",
	http.StatusUnauthorized:        "A valid API key is required",
	http.StatusMethodNotAllowed:    "Method not allowed",
	http.StatusBadGateway:          "Bad gateway",
	http.StatusGatewayTimeout:      "Gateway timeout",
	http.StatusTooManyRequests:     "Too many requests",
	http.StatusServiceUnavailable:  "Backend busy",
	http.StatusInternalServerError: "Internal server error",
}

// writeError sends the backend's error envelope (see apijson.AppendError),
// without meta.server: the gateway is not a server of the network. path is the
// decoded path the client sent.
func writeError(w http.ResponseWriter, status int, path string) {
	b := apijson.AppendError(make([]byte, 0, 160+len(path)), status, errorMessages[status], path, "", time.Now().UnixMilli())
	cors.Set(w.Header())
	apijson.Write(w, status, b)
}

// allowedMethods is the Allow header of a 405 and the preflight's allowed methods.
const allowedMethods = "GET, HEAD, OPTIONS"

// preflightMaxAge is how long browsers may cache the preflight answer, in seconds.
const preflightMaxAge = "86400"

// writePreflight answers a CORS preflight. It is the same for every path under
// /api, so that it reveals nothing about which endpoints exist. Allowing the
// X-API-Key header is what lets browser clients on other origins send the key
// in a header rather than in the URL.
func writePreflight(w http.ResponseWriter) {
	hdr := w.Header()
	cors.Set(hdr)
	hdr.Set("Access-Control-Allow-Methods", allowedMethods)
	hdr.Set("Access-Control-Allow-Headers", "X-API-Key")
	hdr.Set("Access-Control-Max-Age", preflightMaxAge)
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// refused is the verdict of a refusal the gateway decides before the
// backend step.
func refused(o metrics.Outcome, status int) guard.Verdict {
	return guard.Verdict{Outcome: o, Status: status}
}

// ownAnswer is the body of an answer the gateway makes itself (the index, a
// network's document) for who, to ep: data in the backend's success
// envelope, meta's members that start every envelope, then extra (members
// of meta of the answer's own, each after a comma), then authenticated;
// through the field layer when who gets it, as a backend's answer would go.
func ownAnswer(data, extra []byte, who guard.Caller, ep *endpoint) ([]byte, error) {
	b := make([]byte, 0, len(data)+len(extra)+96)
	b = append(b, apijson.DataHead...)
	b = append(b, data...)
	b = apijson.AppendMeta(b, "", time.Now().UnixMilli())
	b = append(b, extra...)
	b = append(b, `,"authenticated":`...)
	b = strconv.AppendBool(b, who.Authenticated)
	b = append(b, "}}"...)
	if !who.Filtered() || ep.Fields == nil {
		return b, nil
	}
	out, hidden, err := jsonfilter.Apply(make([]byte, 0, len(b)+64), b, ep.Fields, jsonfilter.Options{})
	if err != nil {
		return nil, err
	}
	ep.Metrics.FilterBytes(int64(len(b)), int64(len(out)))
	ep.Metrics.FieldsRemoved(hidden)
	return out, nil
}
