package caddymodule

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/internal/fixture"
	_ "github.com/statusgate/statusgate/internal/sim" // statusgate_sim, whose errors have golden files too
)

// TestCaddyfileOptions checks every subdirective and the JSON it becomes.
func TestCaddyfileOptions(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"bare directive", `statusgate`, `{}`},
		{"empty block", "statusgate {\n}", `{}`},

		// The declared backend: reverse_proxy's JSON under "proxy".
		{"upstream", "statusgate 127.0.0.1:8080", `{"proxy":{"upstreams":[{"dial":"127.0.0.1:8080"}]}}`},
		{"upstreams with a block", "statusgate 10.0.0.2:8080 10.0.0.3:8080 {\n\tkey s3cret-s3cret-s3cret\n}",
			`{"auth":{"keys":["` + apikey.Digest("s3cret-s3cret-s3cret") + `"]},"proxy":{"upstreams":[{"dial":"10.0.0.2:8080"},{"dial":"10.0.0.3:8080"}]}}`},
		{"upstream with a scheme", "statusgate http://127.0.0.1:8080", `{"proxy":{"upstreams":[{"dial":"127.0.0.1:8080"}]}}`},
		{"proxy block", "statusgate 127.0.0.1:8080 {\n\tproxy {\n\t\theader_up Host creative.internal\n\t\ttransport http {\n\t\t\tresponse_header_timeout 5s\n\t\t}\n\t}\n}",
			`{"proxy":{"transport":{"protocol":"http","response_header_timeout":5000000000},"upstreams":[{"dial":"127.0.0.1:8080"}],"headers":{"request":{"set":{"Host":["creative.internal"]}}}}}`},
		{"upstreams in the proxy block", "statusgate {\n\tproxy {\n\t\tto 127.0.0.1:8080\n\t}\n}", `{"proxy":{"upstreams":[{"dial":"127.0.0.1:8080"}]}}`},
		{"a placeholder upstream", "statusgate {game}", `{"proxy":{"upstreams":[{"dial":"{game}"}]}}`},

		{"auth on", "statusgate {\n\tauth on\n}", `{"auth":{"enabled":true}}`},
		{"auth off", "statusgate {\n\tauth off\n}", `{"auth":{"enabled":false}}`},
		{"auth true", "statusgate {\n\tauth true\n}", `{"auth":{"enabled":true}}`},
		{"auth false", "statusgate {\n\tauth false\n}", `{"auth":{"enabled":false}}`},

		// A plain secret is written as its digest; a placeholder stays one.
		{"key once", "statusgate {\n\tkey s3cret-s3cret-s3cret\n}", `{"auth":{"keys":["` + apikey.Digest("s3cret-s3cret-s3cret") + `"]}}`},
		{"key repeated keeps order", "statusgate {\n\tkey b2b2b2b2b2b2b2b2\n\tkey a1a1a1a1a1a1a1a1\n\tkey c3c3c3c3c3c3c3c3\n}",
			`{"auth":{"keys":["` + apikey.Digest("b2b2b2b2b2b2b2b2") + `","` + apikey.Digest("a1a1a1a1a1a1a1a1") + `","` + apikey.Digest("c3c3c3c3c3c3c3c3") + `"]}}`},
		{"key env placeholder not expanded", "statusgate {\n\tkey {env.SG_KEY}\n}", `{"auth":{"keys":["{env.SG_KEY}"]}}`},
		{"key file placeholder not expanded", "statusgate {\n\tkey {file./run/secrets/sg}\n}", `{"auth":{"keys":["{file./run/secrets/sg}"]}}`},
		{"key with a placeholder in it", "statusgate {\n\tkey bot pre-{env.SG_KEY}-{system.os}\n}", `{"auth":{"keys":[{"name":"bot","key":"pre-{env.SG_KEY}-{system.os}"}]}}`},
		{"key quoted", "statusgate {\n\tkey \"a7-Qx9-Zk3-Wv5pL\"\n}", `{"auth":{"keys":["` + apikey.Digest("a7-Qx9-Zk3-Wv5pL") + `"]}}`},
		// Trimmed as Provision trims, and escaped braces unescaped as Caddy's
		// replacer unescapes them.
		{"key quoted with white space around", "statusgate {\n\tkey \" a7-Qx9-Zk3-Wv5pL\t\"\n}", `{"auth":{"keys":["` + apikey.Digest("a7-Qx9-Zk3-Wv5pL") + `"]}}`},
		{"key with escaped braces", "statusgate {\n\tkey kBrace-\\{Hunter2-part\\}\n}", `{"auth":{"keys":["` + apikey.Digest("kBrace-{Hunter2-part}") + `"]}}`},
		{"named key", "statusgate {\n\tkey discord-bot s3cret-s3cret-s3cret\n}", `{"auth":{"keys":[{"name":"discord-bot","key":"` + apikey.Digest("s3cret-s3cret-s3cret") + `"}]}}`},
		{"name like a generated key's prefix", "statusgate {\n\tkey sg_bot s3cret-s3cret-s3cret\n}", `{"auth":{"keys":[{"name":"sg_bot","key":"` + apikey.Digest("s3cret-s3cret-s3cret") + `"}]}}`},
		{"digest key, named and not", "statusgate {\n\tkey website sha256:" + hex64 + "\n\tkey sha256:" + strings.Repeat("FE", 32) + "\n\tkey bot {env.BOT_KEY}\n}",
			`{"auth":{"keys":[{"name":"website","key":"sha256:` + hex64 + `"},"sha256:` + strings.Repeat("FE", 32) + `",{"name":"bot","key":"{env.BOT_KEY}"}]}}`},

		{"allow_query_key bare", "statusgate {\n\tallow_query_key\n}", `{"auth":{"allow_query_key":true}}`},
		{"allow_query_key on", "statusgate {\n\tallow_query_key on\n}", `{"auth":{"allow_query_key":true}}`},
		{"allow_query_key true", "statusgate {\n\tallow_query_key true\n}", `{"auth":{"allow_query_key":true}}`},
		// off is kept, so that it overrides a default of the global statusgate option.
		{"allow_query_key off", "statusgate {\n\tallow_query_key off\n}", `{"auth":{"allow_query_key":false}}`},
		{"allow_query_key false", "statusgate {\n\tallow_query_key false\n}", `{"auth":{"allow_query_key":false}}`},

		{"hide_protected bare", "statusgate {\n\thide_protected\n}", `{"auth":{"hide_protected":true}}`},
		{"hide_protected on", "statusgate {\n\thide_protected on\n}", `{"auth":{"hide_protected":true}}`},
		{"hide_protected off", "statusgate {\n\thide_protected off\n}", `{"auth":{"hide_protected":false}}`},
		{"hide_protected false", "statusgate {\n\thide_protected false\n}", `{"auth":{"hide_protected":false}}`},

		{"require_key on", "statusgate {\n\trequire_key status on\n}", `{"auth":{"require_key":{"status":true}}}`},
		{"require_key off", "statusgate {\n\trequire_key server off\n}", `{"auth":{"require_key":{"server":false}}}`},
		{"require_key true/false", "statusgate {\n\trequire_key bans false\n\trequire_key player true\n}", `{"auth":{"require_key":{"bans":false,"player":true}}}`},
		{"require_key custom", "statusgate {\n\trequire_key custom/votes off\n}", `{"auth":{"require_key":{"custom/votes":false}}}`},

		{"protected_fields with fields", "statusgate {\n\tprotected_fields player op uuid\n}", `{"auth":{"protected_fields":{"player":["op","uuid"]}}}`},
		{"protected_fields none is an empty list", "statusgate {\n\tprotected_fields player\n}", `{"auth":{"protected_fields":{"player":[]}}}`},
		{"protected_fields duplicates collapse", "statusgate {\n\tprotected_fields server ip motd ip port motd\n}", `{"auth":{"protected_fields":{"server":["ip","motd","port"]}}}`},
		{"protected_fields several endpoints", "statusgate {\n\tprotected_fields worlds\n\tprotected_fields status online\n\tprotected_fields custom/shop price\n}", `{"auth":{"protected_fields":{"custom/shop":["price"],"status":["online"],"worlds":[]}}}`},

		{"enable several", "statusgate {\n\tenable whitelist network custom/votes\n}", `{"endpoints":{"custom/votes":true,"network":true,"whitelist":true}}`},
		{"disable several", "statusgate {\n\tdisable bans operators\n}", `{"endpoints":{"bans":false,"operators":false}}`},
		{"enable and disable lines", "statusgate {\n\tenable whitelist\n\tdisable bans\n\tenable network\n\tdisable custom/old\n}", `{"endpoints":{"bans":false,"custom/old":false,"network":true,"whitelist":true}}`},
		{"custom names", "statusgate {\n\tenable custom/a custom/Votes_2 custom/shop-list custom/0\n}", `{"endpoints":{"custom/0":true,"custom/Votes_2":true,"custom/a":true,"custom/shop-list":true}}`},

		{"every option", `statusgate {
	auth on
	key {env.SG_KEY}
	key literal l1teral-key-0123456789
	allow_query_key
	hide_protected off
	require_key status on
	require_key custom/votes off
	protected_fields player op banned
	protected_fields server
	enable whitelist custom/votes
	disable bans
}`, `{"auth":{"enabled":true,"keys":["{env.SG_KEY}",{"name":"literal","key":"` + apikey.Digest("l1teral-key-0123456789") + `"}],"allow_query_key":true,"hide_protected":false,` +
			`"require_key":{"custom/votes":false,"status":true},"protected_fields":{"player":["op","banned"],"server":[]}},` +
			`"endpoints":{"bans":false,"custom/votes":true,"whitelist":true}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := parseTestCaddyfile(tc.input)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			got, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("JSON:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestCaddyfileErrors checks that every mistake is refused with a message that
// names the offending word and carries the file and line.
func TestCaddyfileErrors(t *testing.T) {
	tests := []struct {
		name  string
		input string
		words []string // each must appear in the message
		line  int
	}{
		{"unknown subdirective", "statusgate {\n\tauth on\n\tkeys abc\n}", []string{"unrecognized subdirective 'keys'"}, 3},
		{"unknown subdirective without args", "statusgate {\n\tbogus\n}", []string{"unrecognized subdirective 'bogus'"}, 2},

		{"unknown endpoint in require_key", "statusgate {\n\trequire_key stats on\n}", []string{"require_key", "unknown endpoint 'stats'"}, 2},
		{"unknown endpoint in protected_fields", "statusgate {\n\n\tprotected_fields players op\n}", []string{"protected_fields", "unknown endpoint 'players'"}, 3},
		{"unknown endpoint in enable", "statusgate {\n\tenable whitelist Network\n}", []string{"enable", "unknown endpoint 'Network'"}, 2},
		{"unknown endpoint in disable", "statusgate {\n\tdisable bans\n\tdisable index/\n}", []string{"disable", "unknown endpoint 'index/'"}, 3},
		{"endpoint index written with its path", "statusgate {\n\tenable api/v1/status\n}", []string{"unknown endpoint 'api/v1/status'"}, 2},

		{"custom without name", "statusgate {\n\tenable custom/\n}", []string{"enable", "unknown endpoint 'custom/'"}, 2},
		{"custom with two segments", "statusgate {\n\tenable custom/a/b\n}", []string{"unknown endpoint 'custom/a/b'"}, 2},
		{"custom with a dot", "statusgate {\n\tenable custom/a.b\n}", []string{"unknown endpoint 'custom/a.b'"}, 2},
		{"custom bad name in require_key", "statusgate {\n\trequire_key custom/a/b off\n}", []string{"require_key", "unknown endpoint 'custom/a/b'"}, 2},
		{"custom bad name in protected_fields", "statusgate {\n\tprotected_fields custom/a.b x\n}", []string{"protected_fields", "unknown endpoint 'custom/a.b'"}, 2},
		{"custom bad name in disable", "statusgate {\n\tdisable custom/\n}", []string{"disable", "unknown endpoint 'custom/'"}, 2},

		{"bad boolean auth", "statusgate {\n\tauth yes\n}", []string{"auth: 'yes' is not on, off, true or false"}, 2},
		{"bad boolean allow_query_key", "statusgate {\n\tallow_query_key 1\n}", []string{"allow_query_key: '1' is not on, off, true or false"}, 2},
		{"bad boolean hide_protected", "statusgate {\n\thide_protected ON\n}", []string{"hide_protected: 'ON' is not on, off, true or false"}, 2},
		// The wording is "<opt>: '<word>' is not on, off, true or false"; the option is require_key.
		{"bad boolean require_key", "statusgate {\n\trequire_key status maybe\n}", []string{"require_key", "'maybe' is not on, off, true or false"}, 2},

		{"missing value auth", "statusgate {\n\tauth\n}", []string{"wrong argument count", "'auth'"}, 2},
		{"missing value key", "statusgate {\n\tkey\n}", []string{"key: want [<name>] <secret|sha256:<hex>>, got 0 arguments"}, 2},
		{"missing endpoint require_key", "statusgate {\n\trequire_key\n}", []string{"wrong argument count", "'require_key'"}, 2},
		{"missing value require_key", "statusgate {\n\trequire_key status\n}", []string{"wrong argument count", "'status'"}, 2},
		{"missing endpoint protected_fields", "statusgate {\n\tprotected_fields\n}", []string{"wrong argument count", "'protected_fields'"}, 2},
		{"missing endpoint enable", "statusgate {\n\tenable\n}", []string{"wrong argument count", "'enable'"}, 2},
		{"missing endpoint disable", "statusgate {\n\tdisable\n}", []string{"wrong argument count", "'disable'"}, 2},

		{"extra args auth", "statusgate {\n\tauth on off\n}", []string{"wrong argument count", "'off'"}, 2},
		{"extra args key", "statusgate {\n\tkey one two three\n}", []string{"key: want [<name>] <secret|sha256:<hex>>, got 3 arguments"}, 2},
		{"malformed digest", "statusgate {\n\tkey abcdefghijk1mnopqrstuvwxyz\n\tkey bot sha256:abc\n}", []string{"key: malformed digest 'sha256:abc'", "got 3"}, 3},
		{"digest with a bad character", "statusgate {\n\tkey sha256:00ffxy\n}", []string{"key: malformed digest 'sha256:00ff…'", "character 12 is not a hex digit"}, 2},
		{"bad key name", "statusgate {\n\tkey web.site abcdefghijklmnopqrstuvwxyz\n}", []string{"key: invalid name (letters, digits, _ and -); write key <name> <secret>"}, 2},
		{"key name too long", "statusgate {\n\tkey " + strings.Repeat("n", 65) + " abcdefghijklmnopqrstuvwxyz\n}", []string{"at most 64 characters"}, 2},
		{"extra args allow_query_key", "statusgate {\n\tallow_query_key on please\n}", []string{"wrong argument count", "'please'"}, 2},
		{"extra args hide_protected", "statusgate {\n\thide_protected off now\n}", []string{"wrong argument count", "'now'"}, 2},
		{"extra args require_key", "statusgate {\n\trequire_key status on player\n}", []string{"wrong argument count", "'player'"}, 2},

		{"an option word after the directive name", "statusgate on {\n\tauth off\n}", []string{"'on' is an option, not an upstream", "statusgate 127.0.0.1:8080"}, 1},
		{"an option on the directive's line", "statusgate auth off", []string{"'auth' is an option, not an upstream", "options go in the block"}, 1},
		{"a proxy block without upstreams", "statusgate {\n\tproxy {\n\t\theader_up Host a\n\t}\n}", []string{"a proxy block without upstreams"}, 1},
		{"handle_response in proxy", "statusgate 127.0.0.1:1 {\n\tproxy {\n\t\thandle_response {\n\t\t\trespond 200\n\t\t}\n\t}\n}", []string{"'handle_response' is not allowed here", "reads the backend's answer itself"}, 3},
		{"a response matcher in proxy", "statusgate 127.0.0.1:1 {\n\tproxy {\n\t\t@e status 5xx\n\t}\n}", []string{"'@e' is not allowed here"}, 3},
		{"replace_status in proxy", "statusgate 127.0.0.1:1 {\n\tproxy {\n\t\treplace_status 200\n\t}\n}", []string{"'replace_status' is not allowed here"}, 3},
		{"upstreams on the proxy line", "statusgate {\n\tproxy 127.0.0.1:1\n}", []string{"proxy: '127.0.0.1:1': the upstreams go on the statusgate line"}, 2},
		{"proxy twice", "statusgate 127.0.0.1:1 {\n\tproxy {\n\t}\n\tproxy {\n\t}\n}", []string{"'proxy' given twice"}, 4},
		{"a bad upstream", "statusgate ws://127.0.0.1:1", []string{"ws://"}, 1},

		{"auth twice", "statusgate {\n\tauth on\n\tauth on\n}", []string{"'auth' given twice"}, 3},
		{"allow_query_key twice", "statusgate {\n\tallow_query_key\n\tallow_query_key off\n}", []string{"'allow_query_key' given twice"}, 3},
		{"hide_protected twice", "statusgate {\n\thide_protected off\n\tkey k s3cret-s3cret-s3cret\n\thide_protected\n}", []string{"'hide_protected' given twice"}, 4},
		{"require_key twice for one endpoint", "statusgate {\n\trequire_key status on\n\trequire_key status off\n}", []string{"'require_key status' given twice"}, 3},
		{"protected_fields twice for one endpoint", "statusgate {\n\tprotected_fields player op\n\tprotected_fields player banned\n}", []string{"'protected_fields player' given twice"}, 3},
		{"enable twice", "statusgate {\n\tenable whitelist\n\tenable network whitelist\n}", []string{"whitelist' given twice"}, 3},
		{"enable twice on one line", "statusgate {\n\tenable custom/x custom/x\n}", []string{"custom/x' given twice"}, 2},
		{"enable and disable one endpoint", "statusgate {\n\tenable bans\n\tdisable operators bans\n}", []string{"bans' given twice"}, 3},
		{"disable and enable one endpoint", "statusgate {\n\tdisable network\n\tenable network\n}", []string{"network' given twice"}, 3},

		{"empty literal key", "statusgate {\n\tkey \"\"\n}", []string{"key", "empty key"}, 2},
		{"blank literal key", "statusgate {\n\tkey \" \t \"\n}", []string{"key", "empty key"}, 2},
		{"empty field name", "statusgate {\n\tprotected_fields player op \"\"\n}", []string{"protected_fields", "empty field name"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTestCaddyfile(tc.input)
			wantErrorWords(t, err, tc.words...)
			if at := fmt.Sprintf(", at Testfile:%d", tc.line); !strings.HasSuffix(err.Error(), at) {
				t.Errorf("error %q does not end with %q", err, at)
			}
		})
	}
}

// Secrets for the tests of errors that must not quote them: no piece of four
// of their characters is in any message.
const (
	secretP = "Qx7Zk9Wv3Jp8Yt5R"
	secretQ = "Hm4Lc6Nd1Fs0Gq8Tw"
	// passP and passQ are secrets that read neither as a name nor as a
	// random secret (apikey.ReadsAsSecret): in a name's place they are
	// found by the lines they match.
	passP = "Qx7Zk9-horse-battery"
	passQ = "Hm4Lc6-staple-correct"
	// genP and genQ have the form of `caddy statusgate-key`'s secrets.
	genP = "sg_Pq2Wx8Zr6Vm4Bn0Jk3Hd5Lf7Ty9Gc1Xs4Qa8Ue2Ri6N"
	genQ = "sg_Yb3Kn7Mc1Wz5Xq9Vt2Jr6Lp0Hd4Fg8Sa3Ew7Ui1Oz5M"
)

// TestCaddyfileKeyErrorsQuoteNoSecret checks every error of a key line that
// could show key material: it names the line and the mistake, and quotes no
// piece of the secrets on the line (and the line it is compared with).
func TestCaddyfileKeyErrorsQuoteNoSecret(t *testing.T) {
	tests := []struct {
		name    string
		lines   string // the statusgate block's lines, from line 2
		words   []string
		line    int
		secrets []string
	}{
		{"two generated secrets on one line", "key " + genP + " " + genQ,
			[]string{"key: the first of two words looks like a secret, not a name; write key <name> <secret>"}, 2, []string{genP, genQ}},
		{"a generated secret and a plain one", "key " + genP + " " + secretQ,
			[]string{"looks like a secret", "write key <name> <secret>"}, 2, []string{genP, secretQ}},
		{"a digest, then a secret", "key " + apikey.Digest(secretP) + " " + secretQ,
			[]string{"looks like a secret", "write key <name> <secret>"}, 2, []string{secretP, secretQ}},
		{"name is another line's secret", "key " + passP + "\n\tkey bot " + passQ + "\n\tkey " + passP + " " + passQ + "x",
			[]string{"key: the first of two words is the secret of the key at Testfile:2, not a name; write key <name> <secret>"}, 4, []string{passP, passQ}},
		{"name is another line's secret as a digest", "key bot " + apikey.Digest(passP) + "\n\tkey " + passP + " " + passQ,
			[]string{"the first of two words is the secret of the key at Testfile:2"}, 3, []string{passP, passQ}},
		{"name is another line's secret, before a placeholder", "key " + passP + "\n\tkey " + passP + " {env.SG_KEY}",
			[]string{"the first of two words is the secret of the key at Testfile:2"}, 3, []string{passP}},
		{"secret is another line's name", "key " + passP + " " + passQ + "\n\tkey bot " + passP,
			[]string{"key: the secret is the name of the key at Testfile:2; write key <name> <secret> there"}, 3, []string{passP, passQ}},
		{"secret with an unknown placeholder", "key bot Qx7Zk9{Wv3Jp8Yt5}Rb2Hm4",
			[]string{"key: a placeholder in the key is unknown or empty", `written \{ or \}`}, 2, []string{"Qx7Zk9{Wv3Jp8Yt5}Rb2Hm4"}},
		{"secret that is all braces", "key {" + secretP + "}",
			[]string{"a placeholder in the key is unknown"}, 2, []string{secretP}},
		{"unknown placeholder next to a known one", "key {env.SG_KEY}{" + secretP + "}",
			[]string{"a placeholder in the key is unknown"}, 2, []string{secretP}},
		{"secret in the name's place, not a name", "key Qx7+Zk9/Wv3Jp8= " + secretQ,
			[]string{"key: invalid name (letters, digits, _ and -); write key <name> <secret>"}, 2, []string{"Qx7+Zk9/Wv3Jp8=", secretQ}},
		{"name too long to be one", "key " + strings.Repeat("horse-battery-", 5) + "x " + secretQ,
			[]string{"key: invalid name (at most 64 characters)"}, 2, []string{secretP, secretQ}},
		{"secret after sha256:", "key bot sha256:" + secretP,
			[]string{"key: malformed digest 'sha256:…'"}, 2, []string{secretP}},
		{"three words", "key " + secretP + " " + secretQ + " " + genP,
			[]string{"got 3 arguments"}, 2, []string{secretP, secretQ, genP}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTestCaddyfile("statusgate {\n\t" + tc.lines + "\n}")
			wantErrorWords(t, err, tc.words...)
			if at := fmt.Sprintf(", at Testfile:%d", tc.line); !strings.HasSuffix(err.Error(), at) {
				t.Errorf("error %q does not end with %q", err, at)
			}
			fixture.QuotesNoSecret(t, err, 4, tc.secrets...)
		})
	}
}

// TestCaddyfileKeysSealed checks the key lines that are no mistake: a name
// and a secret that merely look alike, or the same name as a secret's
// digest text, load; and no secret written plain is in the JSON.
func TestCaddyfileKeysSealed(t *testing.T) {
	h, err := parseTestCaddyfile("statusgate {\n\tkey " + genP + "\n\tkey bot " + secretQ + "\n\tkey web {$SG_UNSET:" + secretP + "}\n\tkey sg_bot {env.SG_KEY}\n}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"auth":{"keys":["` + apikey.Digest(genP) + `",{"name":"bot","key":"` + apikey.Digest(secretQ) + `"},` +
		`{"name":"web","key":"` + apikey.Digest(secretP) + `"},{"name":"sg_bot","key":"{env.SG_KEY}"}]}}`
	if string(got) != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
}

// TestAdaptCaddyfiles runs the testdata/adapt/*.caddyfiletest files the way
// Caddy's own caddytest/integration/caddyfile_adapt_test.go does: a Caddyfile,
// a line of dashes, then either the exact JSON the adapter must produce
// (indented with tabs) or lines of text that the adapter's error must each
// contain. The Caddyfile is also on disk, in the folder the test runs in,
// as caddy adapt --config Caddyfile has it (an error may read its line
// again: emptyVariable), and the environment variable
// STATUSGATE_GOLDEN_EMPTY is set to nothing, for a file's {$VAR} that is
// empty. The revision of a key from the environment or a file depends on
// the machine (revisionKey): the variables the files name are unset, and
// the revision key is the test's own. A file whose Caddyfile adapts but
// whose expected text is an error's is loaded as caddy validate loads it,
// and the load's error must have the lines: STATUSGATE_GOLDEN_UNSET is
// unset, for a key whose variable is.
func TestAdaptCaddyfiles(t *testing.T) {
	goldenKeySources(t)
	t.Setenv("STATUSGATE_GOLDEN_EMPTY", "")
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("STATUSGATE_KEY", "")
	os.Unsetenv("STATUSGATE_KEY")
	forGoldenFiles(t, filepath.Join("testdata", "adapt", "*.caddyfiletest"), func(t *testing.T, file, input, expected string) {
		input += "\n"
		if strings.HasPrefix(expected, "{") {
			if !caddytest.CompareAdapt(t, file, input, "caddyfile", expected) {
				t.Errorf("adapting %s did not give the expected JSON (diff on stdout)", file)
			}
			return
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "Caddyfile"), []byte(input), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
		if err == nil {
			// A mistake only the load sees (a key's source, read where
			// Caddy runs): the error of caddy validate's load.
			var cfg caddy.Config
			if err = caddy.StrictUnmarshalJSON(adapted, &cfg); err == nil {
				err = caddy.Validate(&cfg)
			}
			readableWhenEncoded(t, err)
		}
		wantErrorWords(t, err, strings.Split(expected, "\n")...)
	})
}

// TestDirectiveMatcher: a path matcher on the statusgate directive is
// refused only when none of its patterns can let an /api path through
// (testdata/adapt/matcher_*.caddyfiletest has the messages); the patterns
// that may are read conservatively, and such a config adapts.
func TestDirectiveMatcher(t *testing.T) {
	for pattern, may := range map[string]bool{
		"/api/*": true, "/api": true, "/API/V1/*": true, "/api/v1/status": true, "/api/v1/custom/votes": true,
		"/*": true, "*": true, "/a*": true, "/api*": true, "*.json": true, "/%61pi/*": true,
		"/lobby/*": false, "/lobby": false, "/apiary/*": false, "/apiary": false, "/": false, "/api.json": false,
	} {
		if got := mayMatchAPI(pattern); got != may {
			t.Errorf("mayMatchAPI(%q) = %v, want %v", pattern, got, may)
		}
	}
	for _, matcher := range []string{"/api/*", "/api/v1/status /lobby/*", "@api"} {
		input := ":8080 {\n\t@api path /lobby/* /api/*\n\tstatusgate " + matcher + " 127.0.0.1:8081\n\tfile_server\n}\n"
		if _, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil); err != nil {
			t.Errorf("statusgate %s: %v", matcher, err)
		}
	}
}
