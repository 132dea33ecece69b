package sim

import (
	"encoding/json"
	"strings"
	"testing"

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

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
	}{
		{"argument on the directive", `statusgate_sim 42`, "wrong argument count"},
		{"unknown subdirective", "statusgate_sim {\n speed 3\n}", "unrecognized subdirective 'speed'"},
		{"seed without value", "statusgate_sim {\n seed\n}", "wrong argument count"},
		{"seed not a number", "statusgate_sim {\n seed abc\n}", "seed must be a 64-bit integer"},
		{"seed too big", "statusgate_sim {\n seed 9223372036854775808\n}", "seed must be a 64-bit integer"},
		{"seed twice on a line", "statusgate_sim {\n seed 1 2\n}", "wrong argument count"},
		{"frozen bad", "statusgate_sim {\n frozen maybe\n}", "frozen: 'maybe' is not on, off, true or false"},
		{"frozen extra", "statusgate_sim {\n frozen on off\n}", "wrong argument count"},
		{"server_id without value", "statusgate_sim {\n server_id\n}", "wrong argument count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Sim
			err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "Testfile:") {
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
	want := `{"frozen":false,"handler":"statusgate_sim","seed":7,"server_id":"survival"}`
	if !strings.Contains(string(out), want) {
		t.Errorf("adapted config lacks %s:\n%s", want, out)
	}
}
