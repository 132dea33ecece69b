package guard

import (
	"testing"
)

// TestIsJSON: the field layer reads one Content-Type, application/json, in
// UTF-8 or with no charset, and nothing else.
func TestIsJSON(t *testing.T) {
	for _, ct := range []string{"application/json; charset=utf-8", "application/json", "Application/JSON; Charset=UTF-8",
		`application/json;charset="utf-8"`, "application/json ; charset=utf-8"} {
		if !isJSON([]string{ct}) {
			t.Errorf("%q refused", ct)
		}
	}
	for _, v := range [][]string{nil, {""}, {"application/json; charset=utf-7"}, {"application/json; charset=utf-16"},
		{"application/json; charset=iso-8859-1"}, {"application/json; charset=utf-8; x=1"}, {"application/json; charset=utf-8", "text/html"},
		{"application/json", "application/json"}, {"application/problem+json"}, {"text/json"}, {"text/html"}, {"application/json; charset"},
		{"application/json; charset=utf-8; charset=utf-7"}, {"application/jsonx"}} {
		if isJSON(v) {
			t.Errorf("%q accepted", v)
		}
	}
}
