package main

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// The attackers' pieces against a real round, with tiny numbers: the
// stalled HTTP/1.1 readers really stall (the gateway's socket has unsent
// bytes a second after they started, and they hold their answers), the
// HTTP/2 client gets HEADERS back and holds streams, the RSS is read, and
// the reloads happen while the sim keeps counting. It checks the harness,
// not the targets: those are for the gateway. About 18 s: a round's
// attackers start after the warm-up and a trip for the large answer, which
// a busy machine can stretch to seconds, and the round must not end before
// they have started (with 2.5 s it did, under a CPU hog).
func TestSmokeAttackers(t *testing.T) {
	c := config{
		duration: 6 * time.Second, warmup: 300 * time.Millisecond, rounds: 1,
		pollers: 4, pollInterval: 300 * time.Millisecond,
		abuserConns: 1, placeholderCallers: 1, placeholderInterval: 300 * time.Millisecond,
		botInterval: 200 * time.Millisecond, clientTimeout: 5 * time.Second,
		anonEvents: 100, anonWindow: time.Minute, placeholderWork: "20ms 50ms",
		stalled: 4, attackAddrs: 4, slowBytes: 4096, slowEvery: 500 * time.Millisecond,
		h2Streams: 20, h2Conns: 2, h2Window: 1024, reloads: 2, maxHeld: 64 << 20, moddedItems: 20000,
	}
	ctx := context.Background()

	r, err := runRound(ctx, c, kindStalled, statusgate, 1001)
	if err != nil {
		t.Fatal(err)
	}
	a := r.attack
	if a == nil || a.requests < c.stalled || a.peakHold == 0 {
		t.Errorf("stalled readers: %+v", a)
	}
	if r.blocked == 0 {
		t.Error("no gateway socket had a blocked send while the stalled readers held their answers")
	}
	if r.probe == nil || r.probe.trip == 0 || r.probe.tripBytes < 2<<20 || len(r.probe.latencies) != probeCount {
		t.Errorf("probe: %+v", r.probe)
	}
	if r.rssBase <= 0 || r.rssPeak < r.rssBase {
		t.Errorf("RSS baseline %d, peak %d", r.rssBase, r.rssPeak)
	}

	r, err = runRound(ctx, c, kindH2, plain, 1002)
	if err != nil {
		t.Fatal(err)
	}
	a = r.attack
	if a == nil || a.requests < c.h2Streams || a.status[200] == 0 || a.peakHold == 0 || a.conns < c.h2Conns {
		t.Errorf("HTTP/2 streams: %+v", a)
	}

	r, err = runRound(ctx, c, kindReload, statusgate, 1003)
	if err != nil {
		t.Fatal(err)
	}
	if r.reloads != c.reloads || len(r.reloadErrs) != 0 {
		t.Errorf("%d reloads done, errors %v", r.reloads, r.reloadErrs)
	}
	if bot := r.tallies[classBot]; bot.ok() == 0 {
		t.Errorf("the keyed bot never succeeded across the reloads: %v", bot.status)
	}
	if r.backend.Requests == 0 || r.backend.Since.After(time.Now().Add(-c.duration)) {
		t.Errorf("the sim's counters restarted during the round: %+v", r.backend)
	}
}

func TestParseStatusLine(t *testing.T) {
	for line, want := range map[string]int{"HTTP/1.1 200 OK": 200, "HTTP/1.1 429 Too Many Requests": 429, "HTTP/1.0 503": 503} {
		if got, err := parseStatusLine(line); got != want || err != nil {
			t.Errorf("%q: %d %v", line, got, err)
		}
	}
	for _, bad := range []string{"", "HTTP/1.1", "HTTP/2 200", "HTTP/1.1 2x0 OK", "SSH-2.0"} {
		if _, err := parseStatusLine(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got, err := readStatus(strings.NewReader("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{")); got != 200 || err != nil {
		t.Errorf("readStatus: %d %v", got, err)
	}
	if _, err := readStatus(strings.NewReader("HTTP/1.1 200")); err == nil {
		t.Error("readStatus accepted a cut status line")
	}
}

func TestParseVmRSS(t *testing.T) {
	got, err := parseVmRSS("Name:\tflood\nVmPeak:\t  900 kB\nVmRSS:\t  123456 kB\nRssAnon:\t 1 kB\n")
	if err != nil || got != 123456<<10 {
		t.Errorf("%d %v", got, err)
	}
	if _, err := parseVmRSS("Name:\tflood\n"); err == nil {
		t.Error("no VmRSS line accepted")
	}
	if n, err := rssBytes(); err != nil || n < 1<<20 {
		t.Errorf("rssBytes: %d %v", n, err)
	}
}

func TestParseBlockedSends(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:C350 01 0002A000:00000000 01:00000014 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:1F90 0100007F:C351 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:C350 0100007F:1F90 01 00000000:00000800 00:00000000 00000000     0        0 4 1 0000000000000000 20 4 30 10 -1
`
	if n, err := parseBlockedSends(table, 0x1F90); n != 1 || err != nil {
		t.Errorf("port 8080: %d %v, want 1 (the listener, an idle socket and the client side do not count)", n, err)
	}
	if n, err := parseBlockedSends(table, 0xC350); n != 0 || err != nil {
		t.Errorf("port 50000: %d %v", n, err)
	}
	if _, err := parseBlockedSends("header\n 0: nonsense a b c d\n", 80); err == nil {
		t.Error("a malformed line accepted")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"67108864": 64 << 20, "64MiB": 64 << 20, "512KiB": 512 << 10, "1GiB": 1 << 30, "0": 0} {
		if got, err := parseBytes(in); got != want || err != nil {
			t.Errorf("%q: %d %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "64MB", "-1", "MiB", "1.5MiB"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got := humanBytes(96 << 20); got != "96.0MiB" {
		t.Errorf("humanBytes: %s", got)
	}
	if got := humanBytes(-3 << 20); got != "-3.0MiB" {
		t.Errorf("humanBytes: %s", got)
	}
}

// The report's attack sections and targets from made-up rounds: each
// target is met or missed by the figures it prints.
func TestReportTargets(t *testing.T) {
	c, err := flags(newFlagSet(), []string{"-stalled", "64", "-h2-streams", "1000", "-reloads", "10"})
	if err != nil {
		t.Fatal(err)
	}
	keyed := func(status int, d time.Duration) map[string]*tally {
		m := map[string]*tally{}
		for _, cl := range classes {
			m[cl] = newTally()
			for range 100 {
				m[cl].add(status, d, false, false, false)
			}
		}
		return m
	}
	good := &probe{trip: 50 * time.Millisecond, tripBytes: 3 << 20,
		latencies: []time.Duration{60 * time.Millisecond, 70 * time.Millisecond, 80 * time.Millisecond, 140 * time.Millisecond},
		statuses:  []int{200, 200, 200, 200}}
	bad := &probe{trip: 50 * time.Millisecond, latencies: []time.Duration{time.Second, 5 * time.Second, 60 * time.Millisecond, 70 * time.Millisecond},
		statuses: []int{200, 504, 200, 200}}
	stats := newAttackStats()
	stats.requests, stats.status[200], stats.status[429], stats.peakHold, stats.ended, stats.conns, stats.bytes = 80, 40, 40, 32, 8, 4, 3355443
	res := results{
		kindFlood: {
			plain:      {{tallies: keyed(200, 100*time.Millisecond)}},
			statusgate: {{tallies: keyed(200, 100*time.Millisecond)}},
		},
		kindStalled: {
			plain:      {{tallies: keyed(504, 5*time.Second), attack: stats, probe: bad, rssBase: 100 << 20, rssPeak: 150 << 20}},
			statusgate: {{tallies: keyed(200, 110*time.Millisecond), attack: stats, probe: good, rssBase: 100 << 20, rssPeak: 120 << 20}},
		},
		kindH2: {
			plain:      {{tallies: keyed(200, 100*time.Millisecond), attack: stats, probe: good, rssBase: 100 << 20, rssPeak: 300 << 20}},
			statusgate: {{tallies: keyed(200, 130*time.Millisecond), attack: stats, probe: good, rssBase: 100 << 20, rssPeak: 210 << 20}},
		},
		kindReload: {
			statusgate: {{tallies: keyed(200, 100*time.Millisecond), reloads: 10}},
		},
	}
	res[kindReload][statusgate][0].backend.PeakInFlight = 9
	out := report(c, res)
	for _, want := range []string{
		"== stalled-h1: 64 stalled HTTP/1.1 readers of " + largePath + " from 8 addresses",
		"== stalled-h2: 1000 stalled HTTP/2 streams",
		"== reloads: 10 reloads",
		"3145728 bytes through statusgate",
		"  statusgate       80      40      40       0       0       0        32       8     3.2MiB      4",
		"[met   ] 64 stalled HTTP/1.1 readers: keyed bot /server 100% 200, p99 within 20% of the flood round's: statusgate 100.0% p99 110.0ms (flood round 100.0ms), plain 0.0% p99 5000.0ms (flood round 100.0ms)",
		"[met   ] 64 stalled HTTP/1.1 readers: anonymous pollers of /status and /player >= 99% 200: statusgate 100.0%, plain 0.0%",
		"[met   ] 64 stalled HTTP/1.1 readers: 4 identical requests behind a stalled one, each within one trip + 100 ms: statusgate worst 90.0ms over its trip, plain (a request without a 200)",
		"[missed] 1000 stalled HTTP/2 streams: keyed bot /server 100% 200, p99 within 20% of the flood round's: statusgate 100.0% p99 130.0ms",
		"[missed] 1000 stalled HTTP/2 streams: RSS growth within max_held + 32 MiB (96.0MiB) and no more than plain's: statusgate 110.0MiB, plain 200.0MiB",
		"[missed] 10 reloads during a flood: the backend's peak in flight never above the highest max_in_flight in force (8): statusgate 9, with 10 of 10 reloads done",
		"statusgate baseline 100.0MiB, peak 120.0MiB, growth 20.0MiB",
		"targets for statusgate",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("flood", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}
