// Package apijson writes JSON responses with the headers the ServerAPI plugin
// puts on every JSON response. The gateway uses it for the responses it writes
// itself, so that they look like the backend's; the demo backend uses it to be
// the backend.
package apijson

import (
	"net/http"
	"strconv"
)

// SetHeaders sets the plugin's JSON response headers.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Access-Control-Allow-Origin", "*")
}

// Write sends a complete JSON body with the plugin's headers and its length.
func Write(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	SetHeaders(h)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
