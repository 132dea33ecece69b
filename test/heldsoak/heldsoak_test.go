package main

import (
	"bytes"
	"context"
	"flag"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseRSS(t *testing.T) {
	got, err := parseRSS([]byte("Name:\tcaddy\nVmPeak:\t  900 kB\nVmRSS:\t   51200 kB\nThreads:\t9\n"))
	if err != nil || got != 50<<20 {
		t.Errorf("parseRSS = %d, %v; want %d", got, err, 50<<20)
	}
	for _, bad := range []string{"Name:\tcaddy\n", "VmRSS:\t12 MB\n", "VmRSS:\tlots kB\n"} {
		if _, err := parseRSS([]byte(bad)); err == nil {
			t.Errorf("parseRSS(%q): no error", bad)
		}
	}
}

// TestSettledMemory: the samples before settle, and those not read, do not
// count; the first one after is the reference.
func TestSettledMemory(t *testing.T) {
	at := []time.Duration{0, 30 * time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute}
	rss := []int64{10, 90, 50, 0, 60, 40}
	want := memory{settled: 50, highest: 60, lowest: 40, last: 40, ok: true}
	if got := settledMemory(at, rss, time.Minute); got != want {
		t.Errorf("settledMemory = %+v, want %+v", got, want)
	}
	if got := settledMemory(at[:2], rss[:2], time.Minute); got.ok {
		t.Errorf("no sample after settle: %+v", got)
	}
}

func TestClean(t *testing.T) {
	for _, c := range []struct {
		r    report
		want bool
	}{
		{report{keyed: map[int]int{200: 5}, anon: map[int]int{200: 3, 429: 2, 503: 1}}, true},
		{report{keyed: map[int]int{200: 5, 429: 1}, anon: map[int]int{200: 3}}, false},
		{report{keyed: map[int]int{200: 5}, anon: map[int]int{502: 1}}, false},
		{report{keyed: map[int]int{200: 5}, anon: map[int]int{}, keyedBad: 1}, false},
		{report{keyed: map[int]int{200: 5}, anon: map[int]int{200: 1}, anonBad: 1}, false},
	} {
		if got := c.r.clean(); got != c.want {
			t.Errorf("%+v: clean() = %v, want %v", c.r, got, c.want)
		}
	}
}

// TestFetchReadsWhole: fetch reads an answer larger than a piece whole, with
// the key when one is given, and without it otherwise.
func TestFetchReadsWhole(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 100<<10)
	var keys []string
	srv := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("X-API-Key"))
		_, _ = w.Write(body)
	})}
	ln := listen(t)
	go srv.Serve(ln)
	defer srv.Close()
	for _, key := range []string{"k", ""} {
		a, err := fetch(context.Background(), http.DefaultClient, "http://"+ln.Addr().String()+"/", key, time.Millisecond)
		if err != nil || a.status != 200 || !bytes.Equal(a.body, body) {
			t.Fatalf("fetch: %v, %d, %d bytes", err, a.status, len(a.body))
		}
	}
	if strings.Join(keys, ",") != "k," {
		t.Errorf("keys sent: %q", keys)
	}
}

// TestSmoke runs the harness for a few seconds, end to end: both processes,
// keyed workers and pollers, the samples. It builds cmd/caddy (reused
// while it is newer than the sources).
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/caddy and runs two processes")
	}
	c, err := flags(flag.NewFlagSet("heldsoak", flag.ContinueOnError), []string{
		"-duration", "8s", "-settle", "2s", "-sample", "2s", "-keyed", "2", "-pollers", "2", "-repo", "../..",
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := run(context.Background(), c, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	rep.print(&out, c)
	t.Log(out.String())
	if rep.keyed[200] == 0 || rep.anon[200] == 0 || len(rep.samples) < 2 {
		t.Errorf("keyed %v, anonymous %v, %d samples", rep.keyed, rep.anon, len(rep.samples))
	}
	if !rep.clean() {
		t.Errorf("keyed %v (%d not whole), anonymous %v (%d not the anonymous answer)", rep.keyed, rep.keyedBad, rep.anon, rep.anonBad)
	}
	for _, s := range rep.samples {
		if s.gatewayRSS == 0 || s.simRSS == 0 || s.held < 0 {
			t.Errorf("a sample without its figures: %+v", s)
		}
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
