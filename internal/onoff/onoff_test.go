package onoff

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		line     string
		optional bool
		want     bool
		err      string
	}{
		{"x on", false, true, ""},
		{"x true", false, true, ""},
		{"x off", true, false, ""},
		{"x false", true, false, ""},
		{"x", true, true, ""},
		{"x", false, false, "wrong argument count"},
		{"x ON", true, false, "x: 'ON' is not on, off, true or false"},
		{"x 1", false, false, "x: '1' is not on, off, true or false"},
		{"x on off", true, false, "wrong argument count"},
	} {
		d := caddyfile.NewTestDispenser(tc.line)
		d.Next()
		got, err := Parse(d, "x", tc.optional)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q optional=%v: got %v %v, want %v", tc.line, tc.optional, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "Testfile:1")):
			t.Errorf("%q optional=%v: error %v, want %q with the line", tc.line, tc.optional, err, tc.err)
		}
	}
}
