package main

import (
	"context"
	"flag"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// A short flood through both gateways: the harness runs end to end, its
// checks catch plain reverse_proxy's leaks, statusgate leaks nothing, the
// rate_limit zone answers the abuser with 429, and the backend's counters
// come back. It takes about 12 s: a round of 2 s had counted nothing yet on a
// machine with a load of 14, where the first answers of a Caddy just
// started took that long.
func TestSmoke(t *testing.T) {
	c := config{
		duration: 5 * time.Second, rounds: 1,
		pollers: 6, pollInterval: 300 * time.Millisecond,
		abuserConns: 4, placeholderCallers: 2, placeholderInterval: 300 * time.Millisecond,
		botInterval: 200 * time.Millisecond, clientTimeout: 5 * time.Second,
		anonEvents: 5, anonWindow: time.Minute, placeholderWork: "20ms 50ms",
	}
	res, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	results := res[kindFlood]
	for _, v := range variants {
		if len(results[v]) != 1 {
			t.Fatalf("%s: %d rounds", v, len(results[v]))
		}
		r := results[v][0]
		for _, cl := range classes {
			if r.tallies[cl].total() == 0 {
				t.Errorf("%s: no %s request was counted", v, cl)
			}
		}
		if ok := r.tallies[classBot].ok(); ok == 0 {
			t.Errorf("%s: the keyed bot never succeeded: %v", v, r.tallies[classBot].status)
		}
		b := r.backend
		if b.Threads != 8 || b.PeakBusy == 0 || b.PeakBusy > 8 || b.Stations["player"].Requests == 0 || b.MainThread.Tasks == 0 || b.MainThread.Ticks == 0 {
			t.Errorf("%s: backend %+v", v, b)
		}
	}
	// Plain reverse_proxy passes op, banned and discord to anonymous
	// callers, and the harness sees it.
	if n := results[plain][0].tallies[classPlayer].leaks + results[plain][0].tallies[classAbuser].leaks; n == 0 {
		t.Error("no leak counted through plain reverse_proxy: the body check is blind")
	}
	if n := leaked(results[statusgate]); n != 0 {
		t.Errorf("statusgate: %d anonymous bodies with a protected field or keyed bytes", n)
	}
	if got := results[statusgate][0].tallies[classAbuser].status[http.StatusTooManyRequests]; got == 0 {
		t.Error("the abuser never got a 429 from the rate_limit zone")
	}
	if got := results[plain][0].tallies[classAbuser].status[http.StatusTooManyRequests]; got != 0 {
		t.Errorf("plain reverse_proxy answered %d 429s", got)
	}
	out := report(c, res)
	for _, want := range []string{"anon /status", "keyed bot /server", "backend requests per station", "targets for statusgate"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestCheckAnonymous(t *testing.T) {
	names := protectedNames(classPlayer)
	for _, tc := range []struct {
		name             string
		status           int
		body             string
		leak, keyed, bad bool
	}{
		{"filtered", 200, `{"ok":true,"data":{"uuid":"x","stat":{}},"meta":{"authenticated":false,"hiddenFields":["op"]}}`, false, false, false},
		{"op at depth", 200, `{"ok":true,"data":{"a":[{"op":true}]},"meta":{"authenticated":false}}`, true, false, false},
		{"discord", 200, `{"ok":true,"data":{"discord":"1"},"meta":{}}`, true, false, false},
		{"keyed bytes", 200, `{"ok":true,"data":{},"meta":{"authenticated":true}}`, false, true, false},
		{"names in meta are fine", 200, `{"ok":true,"data":{},"meta":{"op":1,"authenticated":false}}`, false, false, false},
		{"200 not JSON", 200, `<html>`, false, false, true},
		{"200 two metas", 200, `{"meta":{},"meta":{}}`, false, false, true},
		{"empty 429", 429, ``, false, false, false},
		{"503 envelope", 503, `{"ok":false,"error":{"status":503},"meta":{"authenticated":false}}`, false, false, false},
	} {
		leak, keyed, bad := checkAnonymous(tc.status, []byte(tc.body), names)
		if leak != tc.leak || keyed != tc.keyed || bad != tc.bad {
			t.Errorf("%s: leak %v keyed %v bad %v, want %v %v %v", tc.name, leak, keyed, bad, tc.leak, tc.keyed, tc.bad)
		}
	}
	if leak, _, _ := checkAnonymous(200, []byte(`{"ok":true,"data":{"discord":3412},"meta":{}}`), protectedNames(classStatus)); leak {
		t.Error("the status station's public discord count counted as a leak")
	}
}

// Both variants' configs adapt and speak h2c; only statusgate's has the
// gateway and the rate limit, and the zone name changes with the load. The
// sim is not in either: the harness serves it from simBlock.
func TestSite(t *testing.T) {
	c, err := flags(flag.NewFlagSet("flood", flag.ContinueOnError), []string{"-placeholder-work", "10ms 20ms"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range variants {
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(site(c, v, 3, 9001, 9002, 0)), nil)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		s := string(out)
		for want, inStatusgate := range map[string]bool{
			`"handler":"statusgate"`:               true,
			`"anonymous_3"`:                        true,
			`"max_events":120`:                     true,
			`"response_header_timeout":5000000000`: false,
			`"protocols":["h1","h2c"]`:             false,
			`"dial":"127.0.0.1:9002"`:              false,
		} {
			if has := strings.Contains(s, want); has != (!inStatusgate || v == statusgate) {
				t.Errorf("%s: contains %s = %v", v, want, has)
			}
		}
		if strings.Contains(s, "statusgate_sim") {
			t.Errorf("%s: the sim is in the gateway's config", v)
		}
	}
	want := "statusgate_sim {\n\tseed 1\n\tfrozen off\n\tname flood\n\tmodded_items 20000\n\tlatency placeholders 10ms 20ms\n}\n"
	if got := simBlock(c); got != want {
		t.Errorf("simBlock = %q, want %q", got, want)
	}
}

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("flood", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := flags(fs, []string{"-rounds", "0"}); err == nil {
		t.Error("-rounds 0 accepted")
	}
	c, err := flags(flag.NewFlagSet("flood", flag.ContinueOnError), []string{"-pollers", "300", "-duration", "60s"})
	if err != nil || c.pollers != 300 || c.duration != time.Minute || c.anonEvents != 120 {
		t.Errorf("%+v %v", c, err)
	}
	// The attackers are off by default: one kind of round, the flood.
	if c.stalled != 0 || c.slow != 0 || c.h2Streams != 0 || c.reloads != 0 || c.attackAddrs != 8 || c.h2Conns != 2 ||
		c.maxHeld != 64<<20 || c.moddedItems != 20000 || !slices.Equal(c.kinds(), []string{kindFlood}) {
		t.Errorf("attacker defaults: %+v, kinds %v", c, c.kinds())
	}
	c, err = flags(flag.NewFlagSet("flood", flag.ContinueOnError), []string{"-duration", "20s", "-stalled", "64", "-slow", "64",
		"-h2-streams", "1000", "-reloads", "10", "-max-held", "32MiB", "-slow-bytes", "8192", "-slow-every", "1s",
		"-hangups", "12", "-hangup-after", "100ms", "-hangup-placeholders"})
	if err != nil || c.stalled != 64 || c.slow != 64 || c.h2Streams != 1000 || c.reloads != 10 || c.maxHeld != 32<<20 ||
		c.slowBytes != 8192 || c.slowEvery != time.Second || c.hangUps != 12 || c.hangUpAfter != 100*time.Millisecond || !c.hangUpMain {
		t.Errorf("%+v %v", c, err)
	}
	if want := []string{kindFlood, kindStalled, kindSlow, kindH2, kindHangUp, kindReload}; !slices.Equal(c.kinds(), want) {
		t.Errorf("kinds %v, want %v", c.kinds(), want)
	}
	if !slices.Equal(kindVariants(kindReload), []string{statusgate}) || !slices.Equal(kindVariants(kindH2), variants) {
		t.Error("kindVariants")
	}
	for _, bad := range [][]string{
		{"-stalled", "-1"}, {"-attack-addrs", "0"}, {"-h2-conns", "0"}, {"-slow-bytes", "0"}, {"-slow-every", "0s"},
		{"-h2-window", "-1"}, {"-h2-window", "2147483648"}, {"-max-held", "lots"}, {"-warmup", "5s"}, {"-reloads", "-2"},
		{"-hangups", "-1"}, {"-hangup-after", "0s"},
	} {
		fs := flag.NewFlagSet("flood", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, err := flags(fs, bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestReloadLimitsFlag(t *testing.T) {
	c, err := flags(flag.NewFlagSet("flood", flag.ContinueOnError), []string{"-reloads", "4", "-reload-limits", "4, 2,6"})
	if err != nil || !slices.Equal(c.reloadLimits, []int{4, 2, 6}) {
		t.Errorf("-reload-limits 4, 2,6: %v, %v", c.reloadLimits, err)
	}
	for _, bad := range []string{"0", "two", "4,,2"} {
		fs := flag.NewFlagSet("flood", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, err := flags(fs, []string{"-reload-limits", bad}); err == nil {
			t.Errorf("-reload-limits %q accepted", bad)
		}
	}
}
