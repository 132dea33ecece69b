package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestHeldFitsCaddyfile checks max_response against max_held once the
// block is read, whatever the order of the lines: sizes shown as written,
// the other's line, the default where one is left out, and the fix.
func TestHeldFitsCaddyfile(t *testing.T) {
	for _, ok := range []string{
		"max_held 1MiB\n\tmax_response 512KiB", // max_held alone would be less than the default max_response
		"max_response 512KiB\n\tmax_held 1MiB",
		"max_response 64MiB",
		"max_held 4MiB",
	} {
		if _, err := parseTestCaddyfile("statusgate {\n\t" + ok + "\n}"); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, c := range []struct {
		lines string
		want  string
		line  int
	}{
		{"max_held 1MiB\n\tmax_response 4MiB", "max_response: 4MiB is more than max_held, 1MiB (at Testfile:2): no answer that large could be held; write max_held 4MiB or more, or a smaller max_response", 3},
		{"max_response 4MiB\n\ttimeout 1s\n\tmax_held 1048576", "max_response: 4MiB is more than max_held, 1048576 (at Testfile:4)", 2},
		{"max_response 65MiB", "max_response: 65MiB is more than max_held, 64MiB, its default: no answer that large could be held; write max_held 65MiB or more", 2},
		{"max_held 3MiB", "max_held: 3MiB is less than max_response, 4MiB, its default: no answer that large could be held; write max_held 4MiB or more, or a smaller max_response", 2},
	} {
		_, err := parseTestCaddyfile("statusgate {\n\t" + c.lines + "\n}")
		wantErrorWords(t, err, c.want)
		if at := fmt.Sprintf(", at Testfile:%d", c.line); err != nil && !strings.HasSuffix(err.Error(), at) {
			t.Errorf("error %q does not end with %q", err, at)
		}
	}
}

// TestUnknownOptionSuggestions checks that a misspelt subdirective, key
// subdirective or endpoint name is answered with the nearest one, and a
// word near none with no guess.
func TestUnknownOptionSuggestions(t *testing.T) {
	for _, c := range []struct{ lines, want string }{
		{"max_inflight 4", "unrecognized subdirective 'max_inflight'; did you mean max_in_flight?"},
		{"max_stream 10", "unrecognized subdirective 'max_stream'; did you mean max_streams?"},
		{"stream_hearbeat 5s", "unrecognized subdirective 'stream_hearbeat'; did you mean stream_heartbeat?"},
		{"keys abc", "unrecognized subdirective 'keys'; did you mean key?"},
		{"hide_protect", "unrecognized subdirective 'hide_protect'; did you mean hide_protected?"},
		{"key bot {env.K} {\n\t\tmax_inflight 2\n\t}", "unrecognized key subdirective 'max_inflight'; did you mean max_in_flight?"},
		{"enable whitelst", "enable: unknown endpoint 'whitelst'; did you mean whitelist? (want one of"},
	} {
		_, err := parseTestCaddyfile("statusgate {\n\t" + c.lines + "\n}")
		wantErrorWords(t, err, c.want)
	}
	_, err := parseTestCaddyfile("statusgate {\n\tbogus 1\n}")
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a word near no option: %v, want no suggestion", err)
	}
}

// TestArgumentErrorsGiveTheSyntax checks that a line with too few or too
// many arguments is answered with the option's syntax.
func TestArgumentErrorsGiveTheSyntax(t *testing.T) {
	for _, c := range []struct{ lines, want string }{
		{"auth", "auth: wrong argument count or unexpected line ending after 'auth'; write auth on|off"},
		{"hide_protected on off", "hide_protected: wrong argument count or unexpected line ending after 'off'; write hide_protected [on|off]"},
		{"require_key status", "require_key: wrong argument count or unexpected line ending after 'status'; write require_key <endpoint> on|off"},
		{"cache status", "cache: wrong argument count or unexpected line ending after 'status'; write cache <endpoint> <duration>|off"},
		{"queue 8 2s 3s", "queue: wrong argument count or unexpected line ending after '3s'; write queue <length> [<wait>]|off"},
		{"enable", "enable: wrong argument count or unexpected line ending after 'enable'; write enable <endpoint>..."},
		{"max_in_flight 8 9", "max_in_flight: wrong argument count or unexpected line ending after '9'; write max_in_flight <n>|off"},
		{"key bot {env.K} {\n\t\tmax_in_flight\n\t}", "max_in_flight: wrong argument count or unexpected line ending after 'max_in_flight'; write max_in_flight <n>"},
	} {
		_, err := parseTestCaddyfile("statusgate {\n\t" + c.lines + "\n}")
		wantErrorWords(t, err, c.want)
	}
}

// TestJSONOptionErrors checks the JSON config's mistakes: each names the
// option's path, shows the value as written and says what to write; an
// unknown member at any depth is refused with the nearest option's name.
func TestJSONOptionErrors(t *testing.T) {
	for config, want := range map[string]string{
		`{"backend":{"timeout":"5sec"}}`:                            `backend.timeout: "5sec" is not a duration: write one in Caddy's syntax, such as "2s" or "1m30s" (a number is nanoseconds), or -1 for off`,
		`{"backend":{"stream_heartbeat":"5sec"}}`:                   `backend.stream_heartbeat: "5sec" is not a duration: write one in Caddy's syntax, such as "2s" or "1m30s" (a number is nanoseconds)`,
		`{"backend":{"cache":{"status":"1sec"}}}`:                   `backend.cache.status: "1sec" is not a duration`,
		`{"backend":{"max_held":"1MiB"}}`:                           `backend.max_held: "1MiB" is not a size in bytes: write a whole number of bytes, such as 16777216 (16 MiB)`,
		`{"backend":{"max_in_flight":"8"}}`:                         `backend.max_in_flight: "8" is not a whole number, or -1 for off`,
		`{"backend":{"coalesce":"yes"}}`:                            `backend.coalesce: "yes" is not true or false`,
		`{"backend":{"guard":5}}`:                                   `backend.guard: 5 is not a string: write it in quotes`,
		`{"backend":{"max_inflight":3}}`:                            `backend.max_inflight: unknown option; did you mean max_in_flight?`,
		`{"backend":{"max_stream":3}}`:                              `backend.max_stream: unknown option; did you mean max_streams?`,
		`{"backend":{"bogus":3}}`:                                   `backend.bogus: unknown option (the options of backend: max_in_flight, max_main_thread`,
		`{"backnd":{}}`:                                             `backnd: unknown option; did you mean backend?`,
		`{"auth":{"hide_protectd":false}}`:                          `auth.hide_protectd: unknown option; did you mean hide_protected?`,
		`{"auth":{"require_key":{"bans":"yes"}}}`:                   `auth.require_key.bans: "yes" is not true or false`,
		`{"auth":{"enabled":"on"}}`:                                 `auth.enabled: "on" is not true or false`,
		`{"endpoints":{"bans":"off"}}`:                              `endpoints.bans: "off" is not true or false`,
		`{"auth":{"keys":[{"nmae":"bot","key":"x"}]}}`:              `auth.keys[0]: key object: json: unknown field "nmae"`,
		`{"handler":"reverse_proxy"}`:                               `handler: "reverse_proxy" is not this module's name: write "statusgate"`,
		`{"network":{"cluster":"main","slef":"a"}}`:                 `network.slef: unknown option; did you mean self?`,
		`{"network":{"servers":[{"id":"a"},{"id":"b","prxy":{}}]}}`: `network.servers[1].prxy: unknown option; did you mean proxy?`,
	} {
		err := caddy.StrictUnmarshalJSON([]byte(config), new(Handler))
		wantErrorWords(t, err, want)
	}
	// A list written as something else is not shown: it may be a key.
	err := caddy.StrictUnmarshalJSON([]byte(`{"auth":{"keys":"Qx7Zk9Wv3Jp8Yt5R"}}`), new(Handler))
	wantErrorWords(t, err, "auth.keys: not a list: write […]")
	if err != nil && strings.Contains(err.Error(), "Qx7Zk9") {
		t.Errorf("the error shows the key: %v", err)
	}
}

// TestJSONConfigErrors runs testdata/json/*.jsontest: a handler's JSON
// config, a line of dashes, then lines of text that the error of decoding
// and provisioning it, as Caddy does, must each contain. Most have a twin
// in testdata/adapt: the Caddyfile and the JSON refuse the same mistakes.
// A file whose JSON has "apps" is a whole config (the statusgate app's
// servers and defaults with the handlers), which caddy validate's load
// must refuse.
func TestJSONConfigErrors(t *testing.T) {
	goldenKeySources(t)
	forGoldenFiles(t, filepath.Join("testdata", "json", "*.jsontest"), func(t *testing.T, _, input, expected string) {
		var whole struct {
			Apps json.RawMessage `json:"apps"`
		}
		if json.Unmarshal([]byte(input), &whole) == nil && whole.Apps != nil {
			var cfg caddy.Config
			err := caddy.StrictUnmarshalJSON([]byte(input), &cfg)
			if err == nil {
				err = caddy.Validate(&cfg)
			}
			wantErrorWords(t, err, strings.Split(expected, "\n")...)
			readableWhenEncoded(t, err)
			return
		}
		h := new(Handler)
		err := caddy.StrictUnmarshalJSON([]byte(input), h)
		if err == nil {
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			err = h.Provision(ctx)
			_ = h.Cleanup()
		}
		wantErrorWords(t, err, strings.Split(expected, "\n")...)
		readableWhenEncoded(t, err)
	})
}

// readableWhenEncoded fails t if err, an error of a config's load, has
// what the admin API's JSON escapes (caddy reload prints the error as it
// comes, JSON-encoded): angle brackets, an ampersand, a line break.
func readableWhenEncoded(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.ContainsAny(err.Error(), "<>&\n") {
		t.Errorf("error %q has what caddy reload shows escaped (<, >, &, a line break)", err)
	}
}

// goldenKeySources sets the key sources the golden files name, as they
// say: STATUSGATE_GOLDEN_EMPTY set to nothing, STATUSGATE_GOLDEN_BLANK to
// blanks, STATUSGATE_GOLDEN_UNSET unset (testdata/keys holds an empty key
// file; /nonexistent/... is a missing one; a folder is unreadable as one).
func goldenKeySources(t *testing.T) {
	t.Setenv("STATUSGATE_GOLDEN_EMPTY", "")
	t.Setenv("STATUSGATE_GOLDEN_BLANK", " \t ")
	t.Setenv("STATUSGATE_GOLDEN_UNSET", "")
	os.Unsetenv("STATUSGATE_GOLDEN_UNSET") //nolint:errcheck // absent is what the files want
}
