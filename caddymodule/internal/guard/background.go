package guard

// This file is the trips that no client waits for: a stale entry's
// refresh, a live stream's poll, a network member's status and the game
// metrics' figures. Each is a request of its own (BackgroundRequest),
// written to a sink of its own (a Capture), and run by Background, which
// answers for what net/http would do for a client.

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// Background runs answer, a trip that no client waits for, and returns
// how it ended. An answer that broke off ends in http.ErrAbortHandler,
// which net/http catches for a client's request and nobody would here: it
// is the trip's 502 (ErrBrokeOff). Any other panic is a bug: it is logged,
// as what failed, with the endpoint's name, and ends the same way, so that
// one trip's panic never takes the process down.
func Background(logger *zap.Logger, what string, st *Station, answer func() Verdict) (v Verdict) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				logger.Error(what+" failed", zap.String("endpoint", st.Name), zap.Any("panic", p))
			}
			v = BadGateway(ErrBrokeOff)
		}
	}()
	return answer()
}

// errOverLimit fails a write past a Capture's limit.
var errOverLimit = errors.New("the answer is larger than max_response")

// Capture is the client of a fetch whose answer the gateway keeps (a
// network member's status, a live topic's answer, the game metrics'
// figures): it keeps the status and up to limit bytes of the answer; a
// write past limit fails, so that the trip ends there.
type Capture struct {
	Status int
	header http.Header
	Body   []byte
	Over   bool // the answer was longer than the limit: the write past it failed
	limit  int
}

// NewCapture is a Capture of at most limit bytes of answer.
func NewCapture(limit int) *Capture { return &Capture{header: http.Header{}, limit: limit} }

func (c *Capture) Header() http.Header { return c.header }

func (c *Capture) WriteHeader(status int) {
	if c.Status == 0 && status >= http.StatusOK {
		c.Status = status
	}
}

func (c *Capture) Write(p []byte) (int, error) {
	if c.Status == 0 {
		c.Status = http.StatusOK
	}
	if len(c.Body)+len(p) > c.limit {
		c.Over = true
		return 0, errOverLimit
	}
	c.Body = append(c.Body, p...)
	return len(p), nil
}

// AcceptJSON asks the backend, in h, for what the gateway reads of an
// answer it keeps (a live stream's event, a network member's status, the
// game metrics' figures): its JSON, unencoded (a gzip body is none of
// them, whatever a client takes).
func AcceptJSON(h http.Header) {
	h.Set("Accept", "application/json")
	h.Set("Accept-Encoding", "identity")
}

// BackgroundRequest is a copy of the canonical upstream request r for a trip
// of its own, under ctx: one nobody waits for (a refresh, a live stream's
// poll, the game metrics' figures), or one of a network's members', asked
// at once. Its answer is
// everyone's who shares its key, so it carries what was decided of r and
// nothing of the one caller whose request r was: its method, target and
// Host (the Host sent, SentHost), and of its headers only what the gateway
// reads, JSON, unencoded; not the caller's other headers, nor its address.
// Its address is the gateway's own, where r came in (none if r's context
// does not say): reverse_proxy writes X-Forwarded-Host and -Proto as it does
// for a caller's trip of the same key, from the Host and the scheme, and
// X-Forwarded-For names the gateway. It has
// its own replacer and variables, because Caddy's are the caller's, which
// the caller's handlers and log still use. The replacer carries the endpoint,
// key and client placeholders of the caller's, so that a rate_limit after
// statusgate charges the trip to the caller whose turn it is, and the values
// t resolved for the declared backend's placeholders, so that the trip
// reaches the backend the caller's would.
func (g *Guard) BackgroundRequest(ctx context.Context, r *http.Request, t *Ticket) *http.Request {
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	bg := r.Clone(ctx)
	bg.Body = http.NoBody
	bg.Header = http.Header{}
	AcceptJSON(bg.Header)
	bg.RemoteAddr = ""
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		bg.RemoteAddr = a.String()
	}
	own := caddy.NewReplacer()
	if repl != nil {
		for _, p := range g.carry {
			v, _ := repl.Get(p)
			own.Set(p, v)
		}
	}
	t.Upstream.Set(own)
	return caddyhttp.PrepareRequest(bg, own, nil, srv)
}
