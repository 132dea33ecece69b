package caddymodule

import (
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/statusgate/statusgate/internal/apijson"
)

// errorMessages are the messages of the gateway's own error envelopes. They
// carry no path: the path has its own field, and a disguised 404 must read
// exactly like a genuine one.
var errorMessages = map[int]string{
	http.StatusNotFound:            "Not found",
	http.StatusUnauthorized:        "A valid API key is required",
	http.StatusMethodNotAllowed:    "Method not allowed",
	http.StatusBadGateway:          "Bad gateway",
	http.StatusGatewayTimeout:      "Gateway timeout",
	http.StatusInternalServerError: "Internal server error",
}

// writeError sends the backend's error envelope:
//
//	{"ok":false,"error":{"status":404,"message":"Not found","path":"/api/v1/bans"},"meta":{"version":"v1","updatedAt":1784300000000}}
//
// path is the decoded path the client sent.
func writeError(w http.ResponseWriter, status int, path string) {
	b := make([]byte, 0, 160+len(path))
	b = append(b, `{"ok":false,"error":{"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, errorMessages[status])
	b = append(b, `,"path":`...)
	b = appendJSONString(b, path)
	b = append(b, `},"meta":{"version":"v1","updatedAt":`...)
	b = strconv.AppendInt(b, time.Now().UnixMilli(), 10)
	b = append(b, "}}"...)
	apijson.Write(w, status, b)
}

// preflightMaxAge is how long browsers may cache the preflight answer, in seconds.
const preflightMaxAge = "86400"

// writePreflight answers a CORS preflight. It is the same for every path under
// /api, so that it reveals nothing about which endpoints exist. Allowing the
// X-API-Key header is what lets browser clients on other origins send the key
// in a header rather than in the URL.
func writePreflight(w http.ResponseWriter) {
	hdr := w.Header()
	hdr.Set("Access-Control-Allow-Origin", "*")
	hdr.Set("Access-Control-Allow-Methods", allowedMethods)
	hdr.Set("Access-Control-Allow-Headers", "X-API-Key")
	hdr.Set("Access-Control-Max-Age", preflightMaxAge)
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD and
// control characters are escaped; '<', '>' and '&' are kept, as the backend does.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c >= 0x20:
				b = append(b, c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
