// Package apijson writes JSON responses the way the ServerAPI plugin writes
// them: its headers, its {ok,data,meta} and {ok,error,meta} envelopes, and its
// string escaping. The gateway uses it for the responses it writes itself, so
// that they look like the backend's; the demo backend uses it to be the
// backend.
package apijson

import (
	"net/http"
	"strconv"
	"unicode/utf8"
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

// DataHead starts a success envelope. The data follows, then AppendMeta, the
// meta members that vary, and "}}".
const DataHead = `{"ok":true,"data":`

// AppendMeta appends `,"meta":{` with the members every envelope starts its
// meta with, in the plugin's order: version, server (left out when empty: the
// gateway's own answers come from no server) and updatedAt, in epoch
// milliseconds. The object is left open for the members that vary
// (cachedAt, authenticated).
func AppendMeta(b []byte, server string, updatedAt int64) []byte {
	b = append(b, `,"meta":{"version":"v1"`...)
	if server != "" {
		b = append(b, `,"server":`...)
		b = AppendString(b, server)
	}
	b = append(b, `,"updatedAt":`...)
	return strconv.AppendInt(b, updatedAt, 10)
}

// AppendError appends the plugin's whole error envelope, whose meta never
// carries authenticated, cachedAt or hiddenFields:
//
//	{"ok":false,"error":{"status":404,"message":"Not found","path":"/api/v1/bans"},"meta":{"version":"v1","updatedAt":1784300000000}}
//
// path is the decoded request path; server is as for AppendMeta.
func AppendError(b []byte, status int, message, path, server string, updatedAt int64) []byte {
	b = append(b, `{"ok":false,"error":{"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"message":`...)
	b = AppendString(b, message)
	b = append(b, `,"path":`...)
	b = AppendString(b, path)
	b = append(b, '}')
	b = AppendMeta(b, server, updatedAt)
	return append(b, "}}"...)
}

// AppendString appends s as a JSON string, escaped as the plugin's Json.java
// escapes: '"', '\\' and the control characters (\b, \f, \n, \r and \t by
// name, the others as \u00XX). Invalid UTF-8 becomes U+FFFD, as Java's UTF-8
// encoder writes it. One addition: U+2028 and U+2029 are escaped, as
// encoding/json escapes them, because JavaScript before ES2019 reads them as
// line ends; the decoded string is the same. Everything else, '<', '&' and '/'
// included, is written raw.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == '\u2028' || r == '\u2029' {
				b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			} else {
				b = utf8.AppendRune(b, r)
			}
			i += n
			continue
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				b = append(b, c)
			}
		}
		i++
	}
	return append(b, '"')
}
