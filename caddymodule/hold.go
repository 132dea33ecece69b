package caddymodule

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/statusgate/statusgate/caddymodule/coalesce"
)

// writeShared sends a response that other callers share (coalesced, or from
// the micro-cache) or that was held whole. Headers it has replace the writer's,
// and clients are told not to store it: a shared response is as fresh as the
// backend's, not fresher.
func writeShared(w http.ResponseWriter, status int, header http.Header, body []byte) {
	hdr := w.Header()
	for k, vs := range header {
		// A copy each: a later handler may append to a caller's header values.
		hdr[k] = slices.Clone(vs)
	}
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// holdWriter sits between the proxy step and the client's writer when the
// response may be shared. It keeps the whole response, up to max bytes of body,
// and writes it to the client only when the exchange is over (release), so that
// what the client gets and what others share are the same bytes. A body that
// grows past max spills: what was kept is written, the rest streams through,
// and the response is not shared.
type holdWriter struct {
	w       http.ResponseWriter
	max     int
	hdr     http.Header
	status  int
	body    []byte
	spilled bool
}

func newHoldWriter(w http.ResponseWriter, max int) *holdWriter {
	return &holdWriter{w: w, max: max, hdr: http.Header{}}
}

func (hw *holdWriter) Header() http.Header {
	if hw.spilled {
		return hw.w.Header()
	}
	return hw.hdr
}

func (hw *holdWriter) WriteHeader(status int) {
	if status < 200 || hw.status != 0 {
		return // informational responses are not kept; the first final status wins
	}
	hw.status = status
}

func (hw *holdWriter) Write(p []byte) (int, error) {
	if hw.status == 0 {
		hw.WriteHeader(http.StatusOK)
	}
	if hw.spilled {
		return hw.w.Write(p)
	}
	if len(hw.body)+len(p) <= hw.max {
		hw.body = append(hw.body, p...)
		return len(p), nil
	}
	if err := hw.spill(); err != nil {
		return 0, err
	}
	return hw.w.Write(p)
}

// spill hands what was kept to the client's writer; from then on writes go
// straight through.
func (hw *holdWriter) spill() error {
	hw.spilled = true
	dst := hw.w.Header()
	for k, vs := range hw.hdr {
		dst[k] = vs
	}
	if hw.status == 0 {
		hw.status = http.StatusOK
	}
	hw.w.WriteHeader(hw.status)
	if len(hw.body) == 0 {
		return nil
	}
	_, err := hw.w.Write(hw.body)
	hw.body = nil
	return err
}

// FlushError keeps flushes from committing a response that is still held.
func (hw *holdWriter) FlushError() error {
	if !hw.spilled {
		return nil
	}
	return http.NewResponseController(hw.w).Flush()
}

// Unwrap lets http.ResponseController reach deadlines and the like.
func (hw *holdWriter) Unwrap() http.ResponseWriter { return hw.w }

// result is what was kept, or nil when the body spilled or nothing was
// written. The leader's client gets it through release; the same bytes go to
// whoever shares them.
func (hw *holdWriter) result() *coalesce.Result {
	if hw.spilled || hw.status == 0 {
		return nil
	}
	return &coalesce.Result{Status: hw.status, Header: hw.hdr, Body: hw.body}
}

// release writes what is still held to the client.
func (hw *holdWriter) release() {
	if !hw.spilled && hw.status != 0 {
		writeShared(hw.w, hw.status, hw.hdr, hw.body)
	}
}
