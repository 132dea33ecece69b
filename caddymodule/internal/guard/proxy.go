package guard

import (
	"bufio"
	"errors"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/caddymodule/internal/cors"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/jsonfilter"
)

// outChunk is the size of the filter's output buffer: output is gathered into
// writes of this size, because the filter hands over a piece per kept run,
// and every write costs the spool an append, and a streaming response's client
// connection a chunk header and a syscall or two. Holding answers whole is the
// spool's work (max_response).
const outChunk = 32 << 10

// Reasons a filtered response is refused before any of it is sent.
var (
	errNotJSON = errors.New("backend response is not application/json in UTF-8")
	errEncoded = errors.New("backend response has a content encoding the gateway cannot read")
	errNoBody  = errors.New("backend response has no body")
	errHijack  = errors.New("statusgate: connection upgrades are not proxied")
)

// ErrBrokeOff is the cause logged when next aborts without a reason of the gateway's.
var ErrBrokeOff = errors.New("backend response broke off")

// proxy sends the request r that t describes to the backend (send), which
// writes its answer through the field layer, where it applies, into sp. The
// verdict's outcome is that of an answer that came whole or streamed; a
// backend failure while nothing has reached the client is a 502 or 504 (or
// the 429 of a rate limiter after the gateway). When the answer was already
// streaming to the client, only a cut connection tells the client that the
// rest is missing: the verdict then says so.
func (g *Guard) proxy(sp *spool, r *http.Request, t *Ticket) Verdict {
	filtered := t.Caller.Filtered()
	pw := writers.get(sp, filtered, t.Station.Fields)
	err := pw.run(func() error { return g.send(pw, r, t) })
	if ctxErr := r.Context().Err(); ctxErr != nil && pw.status == StatusClientClosed && !sp.spilled {
		// reverse_proxy answers a request whose context was cancelled with a
		// bare 499 and no error: no answer from the backend, but the wait's end.
		writers.put(pw)
		return ContextRefusal(ctxErr)
	}
	if filtered && err == nil {
		t.Station.Metrics.FilterBytes(pw.inBytes, pw.outBytes)
		t.Station.Metrics.FieldsRemoved(pw.filter.Hidden())
	}
	writers.put(pw)
	switch {
	case err == nil && filtered:
		return Verdict{Outcome: metrics.Filtered}
	case err == nil:
		return Verdict{Outcome: metrics.Served}
	case sp.spilled:
		return Verdict{Outcome: metrics.BackendError, Cause: err, Cut: true}
	}
	v := BadGateway(err)
	var he caddyhttp.HandlerError
	if errors.As(err, &he) {
		switch he.StatusCode {
		case http.StatusGatewayTimeout:
			v.Status = http.StatusGatewayTimeout
		case http.StatusTooManyRequests:
			// A rate limiter after the gateway (rate_limit) refused the
			// caller; it left Retry-After in the header (the caller's own
			// writer's when it ran before a declared backend: gate).
			v.Status, v.Outcome = http.StatusTooManyRequests, metrics.RateLimited
			v.RetryAfter = sp.Header().Get("Retry-After")
			if v.RetryAfter == "" {
				v.RetryAfter = sp.gate.Get("Retry-After")
			}
		}
	}
	return v
}

// run runs send, which writes the answer into pw, and finishes the body.
// reverse_proxy panics with http.ErrAbortHandler when the body breaks off
// or the filter refuses it mid-copy; while nothing has been sent that
// becomes an error the gateway can still answer. Once the client has part
// of the response, and for any other panic, the panic goes on: pw is then
// not reused.
func (pw *proxyWriter) run(send func() error) (err error) {
	defer func() {
		if rec := recover(); rec != nil {
			if rec != http.ErrAbortHandler || pw.sent() {
				panic(rec)
			}
			err = pw.cause(ErrBrokeOff)
		}
	}()
	if err = send(); err == nil {
		err = pw.finish()
	}
	return err
}

// proxyWriter is the ResponseWriter next writes the backend's response to. In
// pass-through mode it only notes whether anything was written. In filter mode
// it checks the response head, feeds the body through a jsonfilter.Filter and
// gathers the output into writes of outChunk bytes to the spool.
type proxyWriter struct {
	w        *spool
	filtered bool
	filter   *jsonfilter.Filter
	out      clientSink // the filter's destination
	buf      []byte     // output not yet written, gathered; cap outChunk

	status    int   // status next asked for
	headerIn  bool  // next called WriteHeader or Write
	committed bool  // the client has the status line
	failed    error // why the response is refused; sticky

	inBytes, outBytes int64 // filter mode: body bytes taken from next, and produced by the filter
}

// clientSink is the filter's output: it goes to proxyWriter.emit.
type clientSink struct{ pw *proxyWriter }

func (s clientSink) Write(p []byte) (int, error) { return s.pw.emit(p) }

// filterPool recycles proxyWriters with their filters and buffers, so that a
// filtered request allocates nothing in steady state.
type filterPool struct{ p sync.Pool }

// writers is shared by every statusgate handler: a proxyWriter holds no config.
var writers filterPool

func (fp *filterPool) get(w *spool, filtered bool, fields *jsonfilter.Names) *proxyWriter {
	pw, _ := fp.p.Get().(*proxyWriter)
	if pw == nil {
		pw = &proxyWriter{buf: make([]byte, 0, outChunk)}
		pw.out.pw = pw
	}
	pw.w, pw.filtered = w, filtered
	if filtered {
		opts := jsonfilter.Options{Authenticated: false}
		if pw.filter == nil {
			pw.filter = jsonfilter.New(pw.out, fields, opts)
		} else {
			pw.filter.Reset(pw.out, fields, opts)
		}
	}
	return pw
}

func (fp *filterPool) put(pw *proxyWriter) {
	pw.w = nil
	pw.buf = pw.buf[:0]
	pw.status, pw.headerIn, pw.committed, pw.failed = 0, false, false, nil
	pw.inBytes, pw.outBytes = 0, 0
	fp.p.Put(pw)
}

// sent reports whether the client may have received any part of the response.
func (pw *proxyWriter) sent() bool { return pw.w.spilled }

// cause is the recorded refusal, or fallback.
func (pw *proxyWriter) cause(fallback error) error {
	if pw.failed != nil {
		return pw.failed
	}
	return fallback
}

func (pw *proxyWriter) Header() http.Header { return pw.w.Header() }

func (pw *proxyWriter) WriteHeader(status int) {
	if pw.headerIn {
		return
	}
	if status < 200 {
		// Informational responses carry no body; a filtered response passes
		// none of them, as it cannot vouch for their headers.
		if !pw.filtered {
			pw.w.WriteHeader(status)
		}
		return
	}
	pw.headerIn = true
	pw.status = status
	// reverse_proxy adds the backend's headers to the gateway's: one
	// Access-Control-Allow-Origin each, and a browser refuses two.
	cors.Set(pw.w.Header())
	if n, err := strconv.Atoi(pw.w.Header().Get("Content-Length")); err == nil {
		// What the field layer adds to a body (meta's two members) is small.
		pw.w.expect(n + 256)
	}
	if !pw.filtered {
		pw.w.WriteHeader(status)
		return
	}
	hdr := pw.w.Header()
	switch {
	case !isJSON(hdr["Content-Type"]):
		pw.failed = errNotJSON
	case !identityEncoding(hdr["Content-Encoding"]):
		pw.failed = errEncoded
	}
	// What the field layer sends is JSON and nothing else; no browser may
	// guess otherwise, whatever the backend said.
	hdr.Set("X-Content-Type-Options", "nosniff")
	// The body is going to change: its length and validators no longer hold.
	delete(hdr, "Content-Length")
	delete(hdr, "Etag")
	delete(hdr, "Last-Modified")
}

func (pw *proxyWriter) Write(p []byte) (int, error) {
	if !pw.headerIn {
		pw.WriteHeader(http.StatusOK)
	}
	if !pw.filtered {
		return pw.w.Write(p)
	}
	if pw.failed != nil {
		return 0, pw.failed
	}
	n, err := pw.filter.Write(p)
	pw.inBytes += int64(n)
	if err != nil && pw.failed == nil {
		pw.failed = err
	}
	return n, err
}

// emit takes the filter's output, gathered into writes of a full buffer.
func (pw *proxyWriter) emit(p []byte) (int, error) {
	pw.outBytes += int64(len(p))
	if len(pw.buf)+len(p) <= cap(pw.buf) {
		pw.buf = append(pw.buf, p...)
		return len(p), nil
	}
	if err := pw.send(); err != nil {
		return 0, err
	}
	if len(p) >= cap(pw.buf) {
		return pw.w.Write(p)
	}
	pw.buf = append(pw.buf, p...)
	return len(p), nil
}

// send commits the response if it is not yet, and writes what is buffered.
func (pw *proxyWriter) send() error {
	if !pw.committed {
		pw.committed = true
		pw.w.WriteHeader(pw.status)
	}
	if len(pw.buf) == 0 {
		return nil
	}
	_, err := pw.w.Write(pw.buf)
	pw.buf = pw.buf[:0]
	return err
}

// finish ends a filtered body after next returned without error: the filter
// closes the document, and a body that fit in the output buffer is sent with
// its exact length.
func (pw *proxyWriter) finish() error {
	if !pw.filtered {
		return nil
	}
	if pw.failed != nil {
		return pw.failed
	}
	if !pw.headerIn {
		pw.failed = errNoBody
		return pw.failed
	}
	if err := pw.filter.Close(); err != nil {
		pw.failed = err
		return err
	}
	if !pw.committed {
		pw.w.Header().Set("Content-Length", strconv.Itoa(len(pw.buf)))
	}
	return pw.send()
}

// FlushError is what http.ResponseController and reverse_proxy's flushes call.
// It must not reach the client while output is held back: a flush would commit
// a status the filter may still have to take back.
func (pw *proxyWriter) FlushError() error {
	if pw.filtered {
		if !pw.committed {
			return nil
		}
		if err := pw.send(); err != nil {
			return err
		}
	}
	return http.NewResponseController(pw.w).Flush()
}

// Flush implements http.Flusher.
func (pw *proxyWriter) Flush() { _ = pw.FlushError() }

// Hijack refuses: a hijacked connection would carry the backend's bytes past the
// gateway. ResponseController looks for this method before it unwraps.
func (pw *proxyWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) { return nil, nil, errHijack }

// Unwrap lets http.ResponseController reach deadlines and the like.
func (pw *proxyWriter) Unwrap() http.ResponseWriter { return pw.w }

// proxyWriter must keep these methods: without them http.ResponseController
// and reverse_proxy would unwrap it and flush or hijack the client's writer,
// past the spool and past the field layer.
var (
	_ http.Hijacker                   = (*proxyWriter)(nil)
	_ http.Flusher                    = (*proxyWriter)(nil)
	_ interface{ FlushError() error } = (*proxyWriter)(nil)
)

// isJSON reports whether the Content-Type values are a body the field layer
// can read: exactly one, application/json, with no parameter but an optional
// charset=utf-8 (any case). The filter reads UTF-8 only, so a body in another
// charset (utf-7, utf-16, latin1) is not one it can vouch for; two values
// leave the client to choose. +json types are refused too: the backend sends
// application/json, and anything else is not the backend's answer.
func isJSON(values []string) bool {
	if len(values) != 1 {
		return false
	}
	if values[0] == "application/json; charset=utf-8" {
		return true // what the backend sends, without ParseMediaType's map
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil || mt != "application/json" {
		return false
	}
	for name, v := range params {
		if name != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}

// identityEncoding reports whether Content-Encoding leaves the body readable.
func identityEncoding(values []string) bool {
	switch len(values) {
	case 0:
		return true
	case 1:
		v := strings.TrimSpace(values[0])
		return v == "" || strings.EqualFold(v, "identity")
	}
	return false
}
