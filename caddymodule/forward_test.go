package caddymodule

import (
	"errors"
	"net/http"
	"testing"

	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
)

// TestAnswerWithoutVerdictIs502: a trip that ends in an error of no kind
// the gateway knows (neither a refusal nor a streamed answer) is the
// backend's failure, answered 502 and logged, never a panic that would take
// the request's answer with it.
func TestAnswerWithoutVerdictIs502(t *testing.T) {
	cause := errors.New("a failure the trip has no verdict for")
	var h Handler
	v := h.answer(nil, &exchange{}, nil, cause)
	if v.status != http.StatusBadGateway || v.outcome != metrics.BackendError || v.cause != cause {
		t.Errorf("verdict %+v, want 502, backend_error, the cause kept for the log", v)
	}
}
