package caddymodule

import (
	"net/url"
	"testing"
)

// plainTarget agrees with url.ParseQuery on every query: it accepts exactly
// those it parses without an error.
func TestPlainTargetIsParseQuery(t *testing.T) {
	for _, q := range []string{"", "a", "a=1&b=2", "a=%41", "a=%4", "a=%", "%41=1", "%zz", "a;b", "a=1;", "+=+", "a=%e2%82%ac", "a=%E2%82%AC&&", "a=%%41"} {
		r, _ := newRequest("GET", "/api/v1/status?"+q)
		_, err := url.ParseQuery(q)
		if got := plainTarget(r); got != (err == nil) {
			t.Errorf("%q: plainTarget %v, ParseQuery error %v", q, got, err)
		}
	}
}
