package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
)

// prepareUpstream rewrites r into the request the backend gets: the canonical
// path that was authorised, of the query only what the endpoint reads
// (upstreamQuery: never the key), no key header, no client-supplied
// real-IP, X-Forwarded-Host or X-Forwarded-Proto headers (nor
// X-Forwarded-For from a client Caddy does not trust), GET for HEAD, no
// body and no trailers, and an identity body when the response is going to be filtered or shared
// (identity is the one encoding every caller can be given).
func prepareUpstream(r *http.Request, rt route, identity bool) {
	path, rawPath := rt.upstreamPath()
	r.URL.Path = path
	r.URL.RawPath = rawPath
	r.URL.RawQuery = upstreamQuery(rt.ep, r.URL.RawQuery)
	r.RequestURI = r.URL.RequestURI()
	r.Method = http.MethodGet
	// A GET has no body for the backend. A chunked one may end in trailers,
	// which reverse_proxy forwards as they came (X-API-Key, X-Real-IP, ...)
	// past every check the headers get. With no body and no length it sends
	// neither body nor trailers.
	r.Body = http.NoBody
	r.ContentLength = 0
	r.TransferEncoding = nil
	r.Trailer = nil

	hdr := r.Header
	delete(hdr, "Content-Length")
	delete(hdr, "Trailer")
	delete(hdr, "X-Api-Key")
	// The backend's real-ip option trusts these ahead of X-Forwarded-For
	// and takes a single value verbatim; reverse_proxy manages X-Forwarded-For.
	delete(hdr, "Cf-Connecting-Ip")
	delete(hdr, "True-Client-Ip")
	delete(hdr, "X-Real-Ip")
	// What reverse_proxy writes in these (when its client is a trusted
	// proxy, it keeps what came) is made of what the share key has: the
	// Host sent and the scheme of the connection, whose port the key names.
	delete(hdr, "X-Forwarded-Host")
	delete(hdr, "X-Forwarded-Proto")
	if trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool); !trusted {
		// The proxy writes this itself for a client it does not trust,
		// which a `vars trusted_proxy true` after statusgate would change.
		delete(hdr, "X-Forwarded-For")
	}
	// No connection upgrades: a tunnel would carry bytes past the gateway.
	delete(hdr, "Upgrade")
	// The gateway always asks for the whole answer: a part (206) or a "not
	// modified" (304) that one caller's Range or validator asked for would
	// reach, coalesced or cached, callers who asked for no such thing.
	for _, name := range conditionalHeaders {
		delete(hdr, name)
	}
	if identity {
		hdr.Set("Accept-Encoding", "identity")
	}
}

// conditionalHeaders are the request headers that ask the backend for part
// of an answer, or for none if the caller's copy is current.
var conditionalHeaders = []string{"Range", "If-Range", "If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since"}

// headWriter answers HEAD like GET without a body. It does not embed
// caddyhttp.ResponseWriterWrapper, whose ReadFrom would copy around Write.
type headWriter struct{ http.ResponseWriter }

func (hw headWriter) Write(p []byte) (int, error) { return len(p), nil }
func (hw headWriter) Unwrap() http.ResponseWriter { return hw.ResponseWriter }

// answerFunc answers the request r that t describes, writing the answer to
// pw, or returns the refusal: the guard's Fetch, from the backend, or a
// network's, from its members; ServeHTTP says which, for a plain GET and a
// live stream's polls alike.
type answerFunc func(pw *progress.Writer, r *http.Request, t *guard.Ticket) guard.Verdict
