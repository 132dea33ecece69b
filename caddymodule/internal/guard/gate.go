package guard

// This file is the gate: the handlers after a declared statusgate (a
// rate_limit), run on a copy of the request statusgate decided, which they
// may refuse but not change, answer or send anywhere; then the decided
// request goes to the declared backend.

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/caddymodule/internal/seal"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
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
// answer to pw. The handlers after statusgate (t.Next) come first: in the
// 1.0 form they reach the backend themselves (a reverse_proxy); with a
// declared backend they are a gate (gate) and statusgate's own proxy sends
// the decided request to the backend, with the placeholder values the
// client's request picked (t.Upstream).
func (g *Guard) send(pw *proxyWriter, r *http.Request, t *Ticket) error {
	if err := t.sealed(r); err != nil {
		return err
	}
	if g.backend == nil {
		if t.Next == nil {
			return errNothingAfter
		}
		if err := t.Next(pw, r); err != nil || pw.headerIn {
			return err
		}
		return errNothingAfter
	}
	// What the handlers after statusgate set on the answer (a rate
	// limiter's headers) is this caller's alone: it goes on the caller's
	// own writer (spool.handOn), never into an answer that is shared or
	// cached, nor into the writer of a caller who left.
	if t.Next != nil {
		if err := g.gate(&pw.w.gate, r, t); err != nil {
			return err
		}
	}
	if t.Upstream != nil {
		t.Upstream.Set(r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer))
	}
	// The caller's secrets are in r's context (dispatch): the declared
	// backend's transport checks what it sends for them (seal.Transport).
	return g.backend.ServeHTTP(pw, r)
}

// sealed refuses the request r made for t when it carries the caller's
// key (t.Secrets): in what statusgate decided to send (its target, Host and
// headers, the original request Caddy keeps) or in the values of the
// declared backend's placeholders it picked, which a later trip for other
// callers (a refresh) would send again.
func (t *Ticket) sealed(r *http.Request) error {
	if len(t.Secrets) == 0 {
		return nil
	}
	if what := seal.InRequest(r, t.Secrets); what != "" {
		return seal.Leak(what)
	}
	for i := 0; i+1 < len(t.Upstream); i += 2 {
		if seal.Holds(t.Upstream[i+1], t.Secrets) {
			return seal.Leak("placeholder {" + t.Upstream[i] + "} of the proxy block")
		}
	}
	return nil
}

// errNothingAfter is why a request is refused when statusgate declares no
// backend and nothing after it answered.
var errNothingAfter = errors.New("statusgate declares no upstreams and no handler after it answered: name the game server in statusgate itself, as in statusgate 127.0.0.1:8080")

// gate runs the handlers after statusgate on a copy of the decided request
// r: they may refuse it (a rate_limit, which then counts only the trips
// that reach the backend) and set headers of the answer (its Retry-After,
// into hdr: the caller's own), but not answer it, send it anywhere, or
// change what is sent:
// the request statusgate decided on is the one the backend gets, and a
// handler that changes its method, target, Host or headers, or a
// placeholder of the declared backend, is an error with the fix.
func (g *Guard) gate(hdr *http.Header, r *http.Request, t *Ticket) error {
	ctx := ownVars(r.Context())
	repl := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	// The placeholders of the declaration as the handlers after statusgate
	// can change them: Caddy's variables are their own copy (the caller's
	// replacer reads the caller's), which a vars after statusgate sets.
	// What is sent is read from the caller's, so a change there would not
	// reach the backend, but it is a config that means to send something
	// else, refused with the fix.
	var view *caddy.Replacer
	var before upstream.Values
	if g.backend.Sent(repl) != nil {
		view = varsView(repl, ctx)
		before = g.backend.Sent(view)
	}
	gw := gateWriter{hdr: hdr}
	// They run on a context already ended, and with a trace that stops
	// http.Transport before it takes a connection: a transport that never
	// calls the trace (FastCGI's, a plugin's) fails to dial, before it
	// connects, as every dial with an ended context does.
	cp := r.Clone(ended{httptrace.WithClientTrace(ctx, noTrips)})
	err := gw.run(t.Next, cp)
	upstreamChanged := view != nil && !slices.Equal(before, g.backend.Sent(view))
	switch {
	case gw.tripped || err != nil && errors.Is(err, context.Canceled):
		return errTripAfter
	case gw.answered:
		return errAnsweredAfter
	case err != nil:
		return err
	}
	if what := changed(r, cp); what != "" {
		return changedAfter(what)
	}
	if upstreamChanged {
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

// varsView is repl with Caddy's variables (http.vars.*) read from the map
// of ctx, the one the handlers after statusgate set theirs in, rather than
// from the request repl was made for.
func varsView(repl *caddy.Replacer, ctx context.Context) *caddy.Replacer {
	vars, _ := ctx.Value(caddyhttp.VarsCtxKey).(map[string]any)
	view := caddy.NewReplacer()
	view.Map(func(key string) (any, bool) {
		if name, ok := strings.CutPrefix(key, "http.vars."); ok {
			v, ok := vars[name]
			return v, ok
		}
		return repl.Get(key)
	})
	return view
}

// ownVars is ctx with a copy of its request's variables (Caddy's vars) of
// its own, for the trip's handlers to set theirs in: the caller's map is
// read by Caddy's access log once the caller is answered, perhaps before
// the trip ends (dispatch); and the handlers after statusgate have a copy
// of their own (gate), so that a `vars trusted_proxy true` after
// statusgate does not make the declared backend's proxy trust the client's
// X-Forwarded-For, nor a vars change a value the trip reads, and Caddy's
// mark of a request that went through every handler unanswered
// ("unhandled", which they set when they pass the request on) stays
// theirs. Every request the guard is given has the map
// (caddyhttp.PrepareRequest, BackgroundRequest's too).
func ownVars(ctx context.Context) context.Context {
	vars, _ := ctx.Value(caddyhttp.VarsCtxKey).(map[string]any)
	if vars == nil {
		return ctx
	}
	return context.WithValue(ctx, caddyhttp.VarsCtxKey, maps.Clone(vars))
}

// ended is a context that has ended, with its parent's values: what the
// handlers after statusgate run under. Every context made from it is
// ended at once, with no goroutine to wait for it (context.WithCancel
// sees its Done closed); it costs one allocation, where an ended
// context.WithCancel made its own channel and an entry among its parent's
// children.
type ended struct{ context.Context }

func (ended) Done() <-chan struct{} { return closedChan }
func (ended) Err() error            { return context.Canceled }

// closedChan is every ended context's Done.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// gateWriter is the writer of the handlers after statusgate when statusgate
// sends the request on itself: they may set headers (a rate limiter's
// Retry-After), which the answer keeps, but an answer of theirs is noted
// and refused, and so is a trip of theirs.
type gateWriter struct {
	hdr      *http.Header
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

func (g *gateWriter) Header() http.Header {
	if *g.hdr == nil {
		*g.hdr = http.Header{}
	}
	return *g.hdr
}
func (g *gateWriter) WriteHeader(status int) {
	if status >= 200 {
		g.answered = true
	}
}
func (g *gateWriter) Write(p []byte) (int, error) {
	g.answered = true
	return 0, errAnsweredAfter
}
