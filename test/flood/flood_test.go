package main

import (
	"context"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// A short flood through both gateways: the harness runs end to end, its
// checks catch plain reverse_proxy's leaks, statusgate leaks nothing, the
// rate_limit zone answers the abuser with 429, and the backend's counters
// come back. It takes about 5 s.
func TestSmoke(t *testing.T) {
	c := config{
		duration: 2 * time.Second, rounds: 1,
		pollers: 6, pollInterval: 300 * time.Millisecond,
		abuserConns: 4, placeholderCallers: 2, placeholderInterval: 300 * time.Millisecond,
		botInterval: 200 * time.Millisecond, clientTimeout: 5 * time.Second,
		anonEvents: 5, anonWindow: time.Minute, placeholderWork: "20ms 50ms",
	}
	results, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
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
	out := report(c, results)
	for _, want := range []string{"anon /status", "keyed bot /server", "backend requests per station", "bars for statusgate"} {
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

// Both variants' configs adapt; only statusgate's has the gateway and the
// rate limit, and the zone name changes with the round.
func TestSite(t *testing.T) {
	c, err := flags(flag.NewFlagSet("flood", flag.ContinueOnError), []string{"-placeholder-work", "10ms 20ms"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range variants {
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(site(c, v, 3, 9001, 9002)), nil)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		s := string(out)
		for want, inStatusgate := range map[string]bool{
			`"handler":"statusgate"`:                         true,
			`"anonymous_3"`:                                  true,
			`"max_events":120`:                               true,
			`"handler":"statusgate_sim"`:                     false,
			`"name":"flood"`:                                 false,
			`"response_header_timeout":5000000000`:           false,
			`"placeholders":{"max":20000000,"min":10000000}`: false,
		} {
			if has := strings.Contains(s, want); has != (!inStatusgate || v == statusgate) {
				t.Errorf("%s: contains %s = %v", v, want, has)
			}
		}
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
}
