package sim

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	i64 := func(n int64) *int64 { return &n }
	b := func(v bool) *bool { return &v }
	for _, tc := range []struct {
		name, input string
		want        Sim
	}{
		{"bare", `statusgate_sim`, Sim{}},
		{"empty block", "statusgate_sim {\n}", Sim{}},
		{"seed", "statusgate_sim {\n seed 42\n}", Sim{Seed: i64(42)}},
		{"negative seed", "statusgate_sim {\n seed -9223372036854775808\n}", Sim{Seed: i64(-9223372036854775808)}},
		{"frozen bare", "statusgate_sim {\n frozen\n}", Sim{Frozen: b(true)}},
		{"frozen on", "statusgate_sim {\n frozen on\n}", Sim{Frozen: b(true)}},
		{"frozen true", "statusgate_sim {\n frozen true\n}", Sim{Frozen: b(true)}},
		{"frozen off", "statusgate_sim {\n seed 1\n frozen off\n}", Sim{Seed: i64(1), Frozen: b(false)}},
		{"frozen false", "statusgate_sim {\n frozen false\n}", Sim{Frozen: b(false)}},
		{"server_id", "statusgate_sim {\n server_id survival\n}", Sim{ServerID: "survival"}},
		{"name", "statusgate_sim {\n name flood\n}", Sim{Name: "flood"}},
		{"threads", "statusgate_sim {\n threads 2\n}", Sim{Threads: 2}},
		{"latency fixed", "statusgate_sim {\n latency status 3ms\n}", Sim{Latency: map[string]Span{"status": {Min: dur("3ms")}}}},
		{"latency range and keys", "statusgate_sim {\n latency * 0\n latency player_offline 100ms 1.4s\n latency custom/votes 1ms 2ms\n latency index 0 0\n}",
			Sim{Latency: map[string]Span{"*": {}, "player_offline": {Min: dur("100ms"), Max: dur("1.4s")},
				"custom/votes": {Min: dur("1ms"), Max: dur("2ms")}, "index": {}}}},
		{"resolve_timeout", "statusgate_sim {\n resolve_timeout 500ms\n}", Sim{ResolveTimeout: dur("500ms")}},
		{"stats_endpoint bare", "statusgate_sim {\n stats_endpoint\n}", Sim{StatsEndpoint: true}},
		{"stats_endpoint off", "statusgate_sim {\n stats_endpoint off\n}", Sim{}},
		{"modded_items", "statusgate_sim {\n modded_items 20000\n}", Sim{ModdedItems: 20000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Sim
			if err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input)); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(s)
			want, _ := json.Marshal(tc.want)
			if string(got) != string(want) {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

func dur(s string) caddy.Duration {
	d, err := caddy.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return caddy.Duration(d)
}

// line is the number of the input's last line, where every error case has
// its offending token.
func line(input string) string {
	return strconv.Itoa(strings.Count(input, "\n") + 1 - strings.Count(input, "\n}"))
}

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
	}{
		{"argument on the directive", `statusgate_sim 42`, "wrong argument count"},
		{"unknown subdirective", "statusgate_sim {\n speed 3\n}", "unrecognized subdirective 'speed'"},
		{"misspelt subdirective", "statusgate_sim {\n thread 3\n}", "unrecognized subdirective 'thread'; did you mean threads?"},
		{"misspelt subdirective with a twist", "statusgate_sim {\n stats_enpdoint\n}", "unrecognized subdirective 'stats_enpdoint'; did you mean stats_endpoint?"},
		{"seed without value", "statusgate_sim {\n seed\n}", "wrong argument count"},
		{"seed not a number", "statusgate_sim {\n seed abc\n}", "seed must be a 64-bit integer"},
		{"seed too big", "statusgate_sim {\n seed 9223372036854775808\n}", "seed must be a 64-bit integer"},
		{"seed twice on a line", "statusgate_sim {\n seed 1 2\n}", "wrong argument count"},
		{"frozen bad", "statusgate_sim {\n frozen maybe\n}", "frozen: 'maybe' is not on, off, true or false"},
		{"frozen extra", "statusgate_sim {\n frozen on off\n}", "wrong argument count"},
		{"server_id without value", "statusgate_sim {\n server_id\n}", "wrong argument count"},
		{"name without value", "statusgate_sim {\n name\n}", "wrong argument count"},
		{"threads zero", "statusgate_sim {\n threads 0\n}", "threads must be a whole number of at least 1, got '0'"},
		{"threads word", "statusgate_sim {\n threads many\n}", "threads must be a whole number of at least 1, got 'many'"},
		{"latency bare", "statusgate_sim {\n latency\n}", "wrong argument count"},
		{"latency without duration", "statusgate_sim {\n latency status\n}", "wrong argument count"},
		{"latency unknown station", "statusgate_sim {\n latency stauts 1ms\n}", "latency: unknown station 'stauts'; did you mean status?"},
		{"latency bad duration", "statusgate_sim {\n latency player 5xs\n}", "latency player: '5xs' is not a duration"},
		{"latency negative", "statusgate_sim {\n latency player -5ms\n}", "latency player: '-5ms' is not a duration"},
		{"latency bad maximum", "statusgate_sim {\n latency player 1ms soon\n}", "latency player: 'soon' is not a duration"},
		{"latency reversed", "statusgate_sim {\n latency player 2s 1s\n}", "latency player: maximum 1s is below minimum 2s"},
		{"latency extra", "statusgate_sim {\n latency player 1ms 2ms 3ms\n}", "wrong argument count"},
		{"latency twice", "statusgate_sim {\n latency player 1ms\n latency player 2ms\n}", "latency player: given twice"},
		{"resolve_timeout zero", "statusgate_sim {\n resolve_timeout 0\n}", "resolve_timeout must be a positive duration, got '0'"},
		{"resolve_timeout word", "statusgate_sim {\n resolve_timeout later\n}", "resolve_timeout must be a positive duration, got 'later'"},
		{"modded_items without value", "statusgate_sim {\n modded_items\n}", "wrong argument count"},
		{"modded_items negative", "statusgate_sim {\n modded_items -1\n}", "modded_items must be a whole number, got '-1'"},
		{"modded_items word", "statusgate_sim {\n modded_items lots\n}", "modded_items must be a whole number, got 'lots'"},
		{"stats_endpoint bad", "statusgate_sim {\n stats_endpoint yes\n}", "stats_endpoint: 'yes' is not on, off, true or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Sim
			err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "Testfile:"+line(tc.input)) {
				t.Errorf("error %q does not name the file and line", err)
			}
		})
	}
}

// The directive needs no `order` line and adapts to the JSON documented on
// the struct.
func TestAdaptCaddyfile(t *testing.T) {
	input := `{
	admin off
}
http://127.0.0.1:8081 {
	statusgate_sim {
		seed 7
		frozen off
		server_id survival
		name demo
		threads 4
		latency * 1ms
		latency player_offline 10ms 50ms
		resolve_timeout 300ms
		stats_endpoint
		modded_items 3
	}
}
`
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings: %v", warnings)
	}
	want := `{"frozen":false,"handler":"statusgate_sim","latency":{"*":{"min":1000000},"player_offline":{"max":50000000,"min":10000000}},` +
		`"modded_items":3,"name":"demo","resolve_timeout":300000000,"seed":7,"server_id":"survival","stats_endpoint":true,"threads":4}`
	if !strings.Contains(string(out), want) {
		t.Errorf("adapted config lacks %s:\n%s", want, out)
	}
}

// TestOptionsListEveryCase keeps options, which an unrecognized
// subdirective is compared with, equal to the subdirectives the parser reads
// (its cases, in any order), and the syntax in UnmarshalCaddyfile's comment
// equal to docs/sim.md's, line for line.
func TestOptionsListEveryCase(t *testing.T) {
	src, err := os.ReadFile("caddyfile.go")
	if err != nil {
		t.Fatal(err)
	}
	var cases []string
	for _, m := range regexp.MustCompile(`(?m)^\t\tcase "([a-z_]+)":`).FindAllStringSubmatch(string(src), -1) {
		cases = append(cases, m[1])
	}
	if !slices.Equal(slices.Sorted(slices.Values(cases)), slices.Sorted(slices.Values(options))) {
		t.Errorf("options %q,\nthe parser's cases %q", options, cases)
	}
	comment := regexp.MustCompile(`(?m)^//\t(statusgate_sim \{\n(?://\t\t.*\n)*//\t\})`).FindStringSubmatch(string(src))
	doc, err := os.ReadFile("../../docs/sim.md")
	if err != nil {
		t.Fatal(err)
	}
	page := regexp.MustCompile("(?ms)^```text\n(statusgate_sim \\{\n.*?^\\})\n```").FindSubmatch(doc)
	if comment == nil || page == nil {
		t.Fatalf("no syntax block: in caddyfile.go %v, in docs/sim.md %v", comment != nil, page != nil)
	}
	syntax := strings.ReplaceAll(comment[1], "//\t", "")
	if syntax != string(page[1]) {
		t.Errorf("UnmarshalCaddyfile's comment has\n%s\ndocs/sim.md has\n%s", syntax, page[1])
	}
	for _, o := range options {
		if !strings.Contains(syntax, "\n\t"+o+" ") {
			t.Errorf("the syntax lacks %s", o)
		}
	}
}
