package rig

import (
	"net/http"
	"strings"
)

// FmtHeader renders a header for a substring check.
func FmtHeader(h http.Header) string {
	var b strings.Builder
	for k, v := range h {
		b.WriteString(k + ": " + strings.Join(v, ", ") + "\n")
	}
	return b.String()
}
