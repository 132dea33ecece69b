// Package cors is the gateway's CORS headers: the same on every answer,
// the gateway's own envelopes and the backend's answers alike.
package cors

import "net/http"

// exposedHeaders are the response headers, beyond the CORS-safelisted ones
// (Content-Type, Content-Length, Cache-Control and a few more), that a script
// on another origin may read. Retry-After comes with 429 and 503 and says when
// to ask again; without this a browser hides it from the page.
const exposedHeaders = "Retry-After"

// Set gives a response the gateway's CORS headers, replacing whatever the
// backend sent. The origin is always "*", never the caller's Origin echoed
// back: the key travels in a header a script sets, not in a cookie, so no
// request needs credentials mode, and "*" makes a browser refuse credentialed
// requests outright. For the same reason Access-Control-Allow-Credentials is
// never sent, and the answer does not depend on Origin, so no Vary: Origin.
//
// The keys are written in canonical form directly, without Header.Set's
// canonicalization: this runs on every answer. Each value is
// a slice of its own, because later handlers (Caddy's header directive) may
// edit header values in place.
func Set(hdr http.Header) {
	hdr["Access-Control-Allow-Origin"] = []string{"*"}
	hdr["Access-Control-Expose-Headers"] = []string{exposedHeaders}
	delete(hdr, "Access-Control-Allow-Credentials")
}
