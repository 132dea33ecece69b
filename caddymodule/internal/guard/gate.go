package guard

// This file is the gate: the handlers after a declared statusgate (a
// rate_limit), run on a copy of the request statusgate decided, which they
// may refuse but not change, answer or send anywhere; then the decided
// request goes to the declared backend.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// errAnsweredAfter is why a request is refused when, with a declared
// backend, a handler after statusgate answered it: the answer is not the
// declared backend's, which names the guard and everything it shares.
var errAnsweredAfter = errors.New("a handler after statusgate answered the request, but statusgate declares its backend and sends the request there itself: remove the handler that follows statusgate (a leftover reverse_proxy, respond, file_server)")

// errTripAfter is why a request is refused when, with a declared backend, a
// handler after statusgate set out to send it to a backend (a leftover
// reverse_proxy, forward_auth): it is stopped before it connects.
var errTripAfter = errors.New("a handler after statusgate tried to send the request to a backend (a reverse_proxy or forward_auth left after it), but statusgate declares its backend and sends the request there itself: remove that handler (nothing was sent)")

// errUpstreamChanged is why a request is refused when a handler after
// statusgate changed a placeholder of the declared backend: the request
// would reach another backend than the one its answer is shared for, or
// send it other values than statusgate decided on.
var errUpstreamChanged = errors.New("a handler after statusgate changed a placeholder of statusgate's upstreams or proxy block: set it before statusgate (a map or vars before it)")

// changedAfter is why a request is refused when a handler after statusgate
// changed what statusgate decided to send (what names the part).
type changedAfter string

func (c changedAfter) Error() string {
	return "a handler after statusgate changed the request's " + string(c) +
		", but the backend gets the request statusgate decided on: set headers and the Host in statusgate's proxy block (header_up, which is part of what names the backend), and put rewrites before statusgate"
}

// send hands the request r that t describes to the backend, writing its
// answer to pw. The handlers after statusgate (t.next) come first: in the
// 1.0 form they reach the backend themselves (a reverse_proxy); with a
// declared backend they are a gate (gate) and statusgate's own proxy sends
// the decided request to the backend, with the placeholder values the
// client's request picked (t.upstream).
func (g *Guard) send(pw *proxyWriter, r *http.Request, t *Ticket) error {
	if g.backend == nil {
		if err := t.Next(pw, r); err != nil || pw.headerIn {
			return err
		}
		return ErrNothingAfter
	}
	if err := g.gate(pw.Header(), r, t); err != nil {
		return err
	}
	if t.Upstream != nil {
		t.Upstream.Set(r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer))
	}
	return g.backend.ServeHTTP(pw, r)
}

// ErrNothingAfter is why a request is refused when statusgate declares no
// backend and nothing after it answered.
var ErrNothingAfter = errors.New("statusgate declares no upstreams and no handler after it answered: name the game server in statusgate itself, as in statusgate 127.0.0.1:8080")

// gate runs the handlers after statusgate on a copy of the decided request
// r: they may refuse it (a rate_limit, which then counts only the trips
// that reach the backend) and set headers of the answer (its Retry-After,
// into hdr), but not answer it, send it anywhere, or change what is sent:
// the request statusgate decided on is the one the backend gets, and a
// handler that changes its method, target, Host or headers, or a
// placeholder of the declared backend, is an error with the fix.
func (g *Guard) gate(hdr http.Header, r *http.Request, t *Ticket) error {
	ctx := r.Context()
	repl := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	before := g.backend.Sent(repl)
	restore := keepUnhandledMark(ctx)
	gw := gateWriter{hdr: hdr}
	cp := r.Clone(httptrace.WithClientTrace(ctx, noTrips))
	err := gw.run(t.Next, cp)
	restore()
	switch {
	case gw.tripped:
		return errTripAfter
	case gw.answered:
		return errAnsweredAfter
	case err != nil:
		return err
	}
	if what := changed(r, cp); what != "" {
		return changedAfter(what)
	}
	if !slices.Equal(before, g.backend.Sent(repl)) {
		return errUpstreamChanged
	}
	return nil
}

// changed names what of the decided request r differs in after, the copy
// the handlers after statusgate had: "" if nothing.
func changed(r, after *http.Request) string {
	switch {
	case after.Method != r.Method:
		return "method"
	case after.URL.Path != r.URL.Path || after.URL.RawPath != r.URL.RawPath || after.URL.RawQuery != r.URL.RawQuery:
		return "path or query (a rewrite, uri)"
	case after.Host != r.Host:
		return "Host (request_header Host)"
	}
	if len(after.Header) != len(r.Header) {
		for name := range after.Header {
			if _, ok := r.Header[name]; !ok {
				return "header " + name + " (request_header)"
			}
		}
	}
	for name, vs := range r.Header {
		if !slices.Equal(vs, after.Header[name]) {
			return "header " + name + " (request_header)"
		}
	}
	return ""
}

// tripStop is what noTrips panics with when a handler after statusgate asks
// for a connection to a backend: gateWriter.run recovers it.
type tripStop struct{}

// noTrips stops the handlers after statusgate before they connect anywhere:
// http.Transport calls GetConn, in the caller's goroutine, before it takes
// or dials a connection.
var noTrips = &httptrace.ClientTrace{GetConn: func(string) { panic(tripStop{}) }}

// unhandledVar is the variable Caddy sets on a request that reached the end
// of its handlers without an answer (caddyhttp's emptyHandler), and reads
// for its access log's message ("NOP" instead of "handled request").
const unhandledVar = "unhandled"

// keepUnhandledMark saves Caddy's mark of a request that went through
// every handler unanswered, which the handlers after statusgate set when
// they pass the request on (for statusgate, the way to its backend), and
// returns what puts it back as it was. Caddy does not export the name:
// TestAccessLogPlaceholders fails (the access log says NOP of every
// request statusgate answered) if Caddy ever renames it.
func keepUnhandledMark(ctx context.Context) (restore func()) {
	mark := caddyhttp.GetVar(ctx, unhandledVar)
	return func() { caddyhttp.SetVar(ctx, unhandledVar, mark) }
}

// gateWriter is the writer of the handlers after statusgate when statusgate
// sends the request on itself: they may set headers (a rate limiter's
// Retry-After), which the answer keeps, but an answer of theirs is noted
// and refused, and so is a trip of theirs.
type gateWriter struct {
	hdr      http.Header
	answered bool
	tripped  bool
}

// run runs the handlers after statusgate into g. One that answers (a
// reverse_proxy) gives up when its writes fail, as when its client leaves:
// that is no failure of the backend's. One that sets out to connect to a
// backend is stopped there (noTrips).
func (g *gateWriter) run(next caddyhttp.HandlerFunc, r *http.Request) (err error) {
	defer func() {
		if rec := recover(); rec != nil {
			switch {
			case rec == tripStop{}:
				g.tripped = true
			case rec != http.ErrAbortHandler || !g.answered:
				panic(rec)
			}
		}
	}()
	return next(g, r)
}

func (g *gateWriter) Header() http.Header { return g.hdr }
func (g *gateWriter) WriteHeader(status int) {
	if status >= 200 {
		g.answered = true
	}
}
func (g *gateWriter) Write(p []byte) (int, error) {
	g.answered = true
	return 0, errAnsweredAfter
}
