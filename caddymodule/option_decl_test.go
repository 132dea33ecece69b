package caddymodule

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/statusgate/statusgate/caddymodule/internal/guard"
)

// TestOptionsDeclared: every backend option declares its side, and every
// field of guard.Limits the option it resolves; one left out stops the
// package (must), and says which and what to write.
func TestOptionsDeclared(t *testing.T) {
	if _, err := declareOptions(reflect.TypeFor[BackendConfig]()); err != nil {
		t.Fatal(err)
	}
	if _, err := declareLimits(reflect.TypeFor[guard.Limits](), optionDecls); err != nil {
		t.Fatal(err)
	}
	type inner struct {
		MaxThings int `json:"max_things,omitempty"`
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{struct {
			MaxInFlight int `json:"max_in_flight" statusgate:"server"`
			inner
		}{}, `backend option max_things (field MaxThings): declare it statusgate:"server" or statusgate:"door"`},
		{struct {
			MaxThings int `json:"max_things" statusgate:"servr"`
		}{}, `not "servr"`},
		{struct {
			MaxThings int `json:"max_things" statusgate:"server" notoff:""`
		}{}, "notoff says why it cannot be off"},
	} {
		if _, err := declareOptions(reflect.TypeOf(c.v)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: %v, want %q", c.v, err, c.want)
		}
	}
	type limits struct {
		InFlight int `option:"max_in_flight"`
		Things   int
	}
	if _, err := declareLimits(reflect.TypeFor[limits](), optionDecls); err == nil || !strings.Contains(err.Error(), `Things: its option tag names "", not a backend option`) {
		t.Errorf("a limit without an option: %v", err)
	}
	type undefaulted struct {
		WriteTimeout time.Duration `option:"write_timeout"`
	}
	if _, err := declareLimits(reflect.TypeFor[undefaulted](), optionDecls); err == nil || !strings.Contains(err.Error(), "option write_timeout has no default of its type in optionDefaults") {
		t.Errorf("a limit without a default: %v", err)
	}
}

// optionSample is an option written in each form: a value in the JSON, a
// line of the Caddyfile, and the same switched off.
type optionSample struct{ json, caddyfile, offJSON, offCaddyfile string }

// optionSamples writes every backend option; a new option needs its line
// here, and TestServerDoorSplit then checks it in every place that tells
// the server's options from the front door's.
var optionSamples = map[string]optionSample{
	"max_in_flight":          {"4", "max_in_flight 4", "-1", "max_in_flight off"},
	"max_main_thread":        {"1", "max_main_thread 1", "-1", "max_main_thread off"},
	"max_per_client":         {"2", "max_per_client 2", "-1", "max_per_client off"},
	"queue_length":           {"4", "queue 4", "-1", "queue off"},
	"queue_wait":             {`"1s"`, "queue 4 1s", "-1", "queue 4 off"},
	"timeout":                {`"2s"`, "timeout 2s", "-1", "timeout off"},
	"coalesce":               {"false", "coalesce off", "false", "coalesce off"},
	"cache":                  {`{"status":"2s"}`, "cache status 2s", `{"status":-1}`, "cache status off"},
	"snapshot":               {`{"status":"10s"}`, "snapshot status 10s", `{"status":-1}`, "snapshot status off"},
	"cache_size":             {"1048576", "cache_size 1MiB", "-1", "cache_size off"},
	"max_response":           {"1048576", "max_response 1MiB", "-1", "max_response off"},
	"max_held":               {"8388608", "max_held 8MiB", "-1", "max_held off"},
	"write_timeout":          {`"5s"`, "write_timeout 5s", "-1", "write_timeout off"},
	"client_prefix_v6":       {"56", "client_prefix_v6 56", "-1", "client_prefix_v6 off"},
	"guard":                  {`"lobbyguard"`, "guard lobbyguard", `"off"`, "guard off"},
	"instances":              {"2", "instances 2", "-1", "instances off"},
	"max_streams":            {"10", "max_streams 10", "-1", "max_streams off"},
	"max_streams_per_client": {"2", "max_streams_per_client 2", "-1", "max_streams_per_client off"},
	"max_topics":             {"10", "max_topics 10", "-1", "max_topics off"},
	"stream_lifetime":        {`"5m"`, "stream_lifetime 5m", "-1", "stream_lifetime off"},
	"stream_heartbeat":       {`"10s"`, "stream_heartbeat 10s", "-1", "stream_heartbeat off"},
}

// TestServerDoorSplit checks each backend option, as its declaration says
// (the server's or the front door's, off or not), everywhere the split
// and off are decided: a declared server's block and the defaults, in the
// Caddyfile and the JSON, a handler in front of a declared server, the
// limits a guard's handlers agree on and the message when they do not,
// and off in both forms.
func TestServerDoorSplit(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	adapt := func(global string) error {
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("{\n\tstatusgate {\n"+global+"\n\t}\n}\n"), nil)
		return err
	}
	refused := func(t *testing.T, what string, err error, want string, refuse bool) {
		t.Helper()
		switch {
		case refuse && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", what, err, want)
		case !refuse && err != nil:
			t.Errorf("%s: %v, want it taken", what, err)
		}
	}
	const proxy = `"proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}`
	for _, name := range slices.Sorted(maps.Keys(optionDecls)) {
		d, s := optionDecls[name], optionSamples[name]
		t.Run(name, func(t *testing.T) {
			if s.json == "" {
				t.Fatalf("no sample of %s: add one to optionSamples", name)
			}
			side := "the front door's"
			if d.server {
				side = "the server's"
			}
			t.Logf("%s, can be off: %v", side, d.whyNotOff == "")

			// The Caddyfile's global option: a server's block takes the
			// server's, the defaults the front door's.
			refused(t, "in a server's block", adapt("\t\tserver lobby 10.0.0.3:8080 {\n\t\t\t"+s.caddyfile+"\n\t\t}"), "is not a server's", !d.server)
			refused(t, "among the defaults", adapt("\t\t"+s.caddyfile), "is a server's limit", d.server)

			// The JSON: the app's servers and defaults, and a handler in
			// front of a declared server.
			var a App
			if err := json.Unmarshal([]byte(`{"servers":{"lobby":{`+proxy+`,"backend":{"`+name+`":`+s.json+`}}}}`), &a); err != nil {
				t.Fatal(err)
			}
			refused(t, "servers.lobby.backend", a.Provision(ctx), "the front door's choice, not the server's", !d.server)
			var def App
			if err := json.Unmarshal([]byte(`{"defaults":{"backend":{"`+name+`":`+s.json+`}}}`), &def); err != nil {
				t.Fatal(err)
			}
			refused(t, "defaults.backend", def.Provision(ctx), "a server's limit", d.server)
			var lobby App
			if err := json.Unmarshal([]byte(`{"servers":{"lobby":{`+proxy+`}}}`), &lobby); err != nil {
				t.Fatal(err)
			}
			var h Handler
			if err := json.Unmarshal([]byte(`{"server":"lobby","backend":{"`+name+`":`+s.json+`}}`), &h); err != nil {
				t.Fatal(err)
			}
			refused(t, "a handler in front of server lobby", h.adopt(&lobby), "server lobby's limit", d.server)

			// Off, in both forms.
			var c BackendConfig
			err := json.Unmarshal([]byte(`{"`+name+`":`+s.offJSON+`}`), &c)
			if err == nil {
				_, _, err = resolveGuard(c)
			}
			refused(t, "off in the JSON", err, "cannot be off", d.whyNotOff != "")
			at := "\t\t" + s.offCaddyfile // among the defaults
			if d.server {
				at = "\t\tserver lobby 10.0.0.3:8080 {\n\t\t\t" + s.offCaddyfile + "\n\t\t}"
			}
			refused(t, "off in the Caddyfile", adapt(at), "cannot be off", d.whyNotOff != "")
			if d.whyNotOff != "" && err != nil && !strings.Contains(err.Error(), d.whyNotOff) {
				t.Errorf("off in the JSON: %v, want the reason, %q", err, d.whyNotOff)
			}
		})
	}

	// The limits a guard's handlers agree on: the server's alone, and
	// each named when two handlers disagree.
	zero := reflect.Zero(reflect.TypeFor[guard.Limits]())
	for _, f := range limitFields {
		var l guard.Limits
		v := reflect.ValueOf(&l).Elem().Field(f.index)
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(true)
		default:
			v.SetInt(3)
		}
		server := optionDecls[f.option].server
		if kept := serverLimits(l) != zero.Interface().(guard.Limits); kept != server {
			t.Errorf("%s: serverLimits keeps it %v, but it is the server's %v", f.option, kept, server)
		}
		if named := strings.Contains(limitsDiff(l, guard.Limits{}), f.option); named != server {
			t.Errorf("%s: limitsDiff names it %v, but it is the server's %v", f.option, named, server)
		}
	}
}

// TestDocsTellTheSplit: the pages that list the server's limits and the
// front door's choices list what the declarations say: network.md the
// defaults' front-door options, every one, and backend-protection.md the
// limits a guard's handlers must agree on (the queue for queue_length and
// queue_wait).
func TestDocsTellTheSplit(t *testing.T) {
	listed := func(page, pattern string) []string {
		t.Helper()
		text, err := os.ReadFile(filepath.Join("..", "docs", page))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(pattern).FindStringSubmatch(string(text))
		if m == nil {
			t.Fatalf("%s: no list matching %s", page, pattern)
		}
		var names []string
		for _, w := range regexp.MustCompile("`([a-z0-9_]+)`|the queue").FindAllStringSubmatch(m[1], -1) {
			if w[0] == "the queue" {
				names = append(names, "queue_length", "queue_wait")
				continue
			}
			names = append(names, w[1])
		}
		return sorted(names)
	}
	var door, agreed []string
	for name, d := range optionDecls {
		if !d.server {
			door = append(door, name)
		}
	}
	for _, f := range limitFields {
		if optionDecls[f.option].server {
			agreed = append(agreed, f.option)
		}
	}
	if got := listed("network.md", `(?s)the front door's choices \((.*?)\)\.`); !slices.Equal(got, sorted(door)) {
		t.Errorf("network.md lists the front door's choices as %q; they are %q", got, sorted(door))
	}
	if got := listed("backend-protection.md", `(?s)share the server's\s+limits: (.*?) count the`); !slices.Equal(got, sorted(agreed)) {
		t.Errorf("backend-protection.md lists the server's limits as %q; they are %q", got, sorted(agreed))
	}
}

// TestNumbersRangeDeclared: every number of a backend option, off allowed
// or not, is refused below its range by what its declaration says, in
// every form it can be written in (the Caddyfile's handler, a declared
// server's block or the defaults, as its side says, and the JSON's
// alike), with its name; and an option declared anew that cannot be off
// is refused below 1 and above its most with no check of its own.
func TestNumbersRangeDeclared(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	const proxy = `"proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}`
	for _, name := range slices.Sorted(maps.Keys(optionDecls)) {
		d, s := optionDecls[name], optionSamples[name]
		if d.kind == otherKind {
			continue
		}
		t.Run(name, func(t *testing.T) {
			refused := func(what string, err error, words ...string) {
				t.Helper()
				for _, w := range words {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %v, want it refused with %q", what, err, w)
					}
				}
			}
			// The Caddyfile: the line of the sample, its last word -2.
			words := strings.Fields(s.caddyfile)
			line := strings.Join(append(words[:len(words)-1:len(words)-1], "-2"), " ")
			refused("a handler's Caddyfile", adaptAndValidate(t, ":8080 {\n\tstatusgate 10.0.0.3:8080 {\n\t\t"+line+"\n\t}\n}\n"), words[0], "'-2'")
			global := "\t\t" + line
			if d.server {
				global = "\t\tserver lobby 10.0.0.3:8080 {\n\t\t\t" + line + "\n\t\t}"
			}
			refused("the global option", adaptAndValidate(t, "{\n\tstatusgate {\n"+global+"\n\t}\n}\n"), words[0], "'-2'")

			// The JSON: a handler's, and a declared server's or the
			// defaults'.
			v := "-2"
			if d.entries {
				v = `{"status":-2}`
			}
			refused("a handler's JSON", validateJSON([]byte(`{"admin":{"disabled":true},"apps":{"http":{"servers":{"s":{"listen":[":8080"],"routes":[{"handle":[{"handler":"statusgate",`+proxy+`,"backend":{"`+name+`":`+v+`}}]}]}}}}}`)), name, "-2")
			app := `{"defaults":{"backend":{"` + name + `":` + v + `}}}`
			if d.server {
				app = `{"servers":{"lobby":{` + proxy + `,"backend":{"` + name + `":` + v + `}}}}`
			}
			var a App
			err := json.Unmarshal([]byte(app), &a)
			if err == nil {
				err = a.Provision(ctx)
			}
			refused("the app's JSON", err, name, "-2")
		})
	}

	// An option declared anew, of each kind, that cannot be off: its
	// declaration alone refuses -1 with why, -2, and more than its most.
	decls, err := declareOptions(reflect.TypeFor[struct {
		MaxThings  int                       `json:"max_things" statusgate:"server" notoff:"things need a bound"`
		ThingBytes int64                     `json:"thing_bytes" statusgate:"server" notoff:"things need a bound"`
		ThingWait  caddy.Duration            `json:"thing_wait" statusgate:"door" notoff:"things need a bound" instead:"write thing_bits -1"`
		ThingTTL   map[string]caddy.Duration `json:"thing_ttl" statusgate:"door" notoff:"things need a bound"`
		ThingBits  int                       `json:"thing_bits" statusgate:"door" notoff:"things need a bound" most:"32"`
	}]())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range decls {
		for _, v := range []int64{off, -2, -1 << 40} {
			if err := d.numberError("backend."+d.name, v); err == nil || !strings.Contains(err.Error(), "backend."+d.name) {
				t.Errorf("%s %d: %v, want it refused", d.name, v, err)
			}
		}
		if err := d.numberError("backend."+d.name, 1); err != nil {
			t.Errorf("%s 1: %v, want it taken", d.name, err)
		}
	}
	if err := decls[2].numberError("backend.thing_wait", off); err == nil || err.Error() != "backend.thing_wait cannot be off (-1): things need a bound; write thing_bits -1" {
		t.Errorf("thing_wait -1: %v", err)
	}
	if err := decls[4].numberError("backend.thing_bits", 33); err == nil || err.Error() != "backend.thing_bits: 33 is not a limit from 1 to 32" {
		t.Errorf("thing_bits 33: %v", err)
	}
	if _, err := declareOptions(reflect.TypeFor[struct {
		MaxThings int `json:"max_things" statusgate:"server" most:"lots"`
	}]()); err == nil || !strings.Contains(err.Error(), `most is the largest number it takes, not "lots"`) {
		t.Errorf("most not a number: %v", err)
	}
}

// validateJSON is caddy validate's load of a whole JSON config.
func validateJSON(config []byte) error {
	var cfg caddy.Config
	if err := caddy.StrictUnmarshalJSON(config, &cfg); err != nil {
		return err
	}
	return caddy.Validate(&cfg)
}
