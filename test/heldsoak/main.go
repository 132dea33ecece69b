// Command heldsoak measures keyed callers beside anonymous ones when answers
// are large, over minutes, with the backend in a process of its own:
//
//	bash scripts/heldsoak.sh                    # 10 minutes: 4 keyed workers, 8 anonymous pollers
//	bash scripts/heldsoak.sh -duration 1m -h    # all flags
//
// It builds this checkout's Caddy (cmd/caddy) and runs two processes of it:
// one with only statusgate_sim, with modded_items (-modded-items, 20000 by
// default: Alex_MC's ?detailed=true is then about 3 MB, as on a heavily
// modded server), and one with the gateway in front of it, statusgate's
// defaults plus one key. Then, for -duration, -keyed workers with the key
// fetch /server, /bans, /performance and /player/<Alex_MC>?detailed=true
// back to back, each starting at another of them, and -pollers anonymous
// pollers from the same address fetch the detailed player back to back.
// Everyone reads every answer whole, a piece of 32 KiB at a time with a
// pause of -pace after each (a client on a network, not on loopback).
//
// Every -sample it prints the requests so far by class and status, the
// resident memory (VmRSS) of both processes and the gateway's held bytes
// (its held_bytes metric); at the end the keyed callers' share of 200s and,
// for each process, its RSS after the first minute (-settle) against its
// highest and last RSS after that. The exit status is 1 when a keyed request
// got anything but a whole 200 or an anonymous one anything but 200, 429 or
// 503, 2 when the harness cannot run, and 0 otherwise; how flat the memory
// stayed is reported, not enforced.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/statusgate/statusgate/internal/scrape"
	"github.com/statusgate/statusgate/test/internal/harness"
)

// config is the harness's flags.
type config struct {
	duration    time.Duration
	settle      time.Duration
	sample      time.Duration
	keyed       int
	pollers     int
	pace        time.Duration
	moddedItems int
	repo        string
	bin         string
}

func flags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	fs.DurationVar(&c.duration, "duration", 10*time.Minute, "how long the load runs")
	fs.DurationVar(&c.settle, "settle", time.Minute, "the start of the run after which memory should stay flat")
	fs.DurationVar(&c.sample, "sample", 10*time.Second, "how often the figures are read and printed")
	fs.IntVar(&c.keyed, "keyed", 4, "keyed workers")
	fs.IntVar(&c.pollers, "pollers", 8, "anonymous pollers of the detailed player, all from one address")
	fs.DurationVar(&c.pace, "pace", time.Millisecond, "pause after each 32 KiB a client reads (0: as fast as it can)")
	fs.IntVar(&c.moddedItems, "modded-items", 20000, "the sim's modded_items: how large the detailed player is")
	fs.StringVar(&c.repo, "repo", ".", "the checkout to build cmd/caddy from")
	fs.StringVar(&c.bin, "bin", "", "the Caddy binary to run; default: built from -repo into the temporary directory, and reused while it is newer than the sources")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.keyed < 1 || c.pollers < 0 || c.duration <= 0 || c.sample <= 0 {
		return c, errors.New("want -keyed of at least 1, -pollers of at least 0, and a positive -duration and -sample")
	}
	return c, nil
}

func main() {
	c, err := flags(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, c, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "heldsoak:", err)
		os.Exit(2)
	}
	rep.print(os.Stdout, c)
	if !rep.clean() {
		os.Exit(1)
	}
}

// The key the gateway accepts, and the player whose detailed statistics are
// the large answer.
const (
	secret = "heldsoak-staff-0123456789abcdef"
	alex   = "40094f2f-ca8f-4826-8b31-11e0f4c449df"
)

var (
	detailed = "/api/v1/player/" + alex + "?detailed=true"
	targets  = []string{"/api/v1/server", "/api/v1/bans", "/api/v1/performance", detailed}
)

// global is the global options of both processes, with the admin endpoint
// at admin ("off": none).
func global(admin string) string {
	return `{
	admin ` + admin + `
	auto_https off
	persist_config off
	grace_period 1s
	log {
		level ERROR
	}
}
`
}

func simCaddyfile(port, moddedItems int) string {
	return global("off") + fmt.Sprintf(`
http://:%d {
	bind 127.0.0.1
	statusgate_sim {
		seed 1
		frozen off
		modded_items %d
	}
}
`, port, moddedItems)
}

func gatewayCaddyfile(port, admin, simPort int) string {
	return global("127.0.0.1:"+strconv.Itoa(admin)) + fmt.Sprintf(`
http://:%d {
	bind 127.0.0.1
	statusgate {
		key staff %s
	}
	reverse_proxy 127.0.0.1:%d
}
`, port, secret, simPort)
}

// sample is the figures at one moment of the run.
type sample struct {
	at                 time.Duration
	keyed, anon        map[int]int // status: count, so far
	gatewayRSS, simRSS int64       // bytes; 0: not read
	held               int64       // the gateway's held_bytes; -1: not read
}

// report is what a run measured.
type report struct {
	samples     []sample
	keyed, anon map[int]int
	keyedBad    int // 200s that were not the whole answer
	anonBad     int // 200s that were not the anonymous answer
	// firstFailures are a few keyed failures, to see what they were.
	firstFailures []string
}

// counts is the requests by status, shared by the clients.
type counts struct {
	mu          sync.Mutex
	keyed, anon map[int]int
	keyedBad    int
	anonBad     int
	failures    []string
}

func (c *counts) add(keyed bool, status int, whole bool, what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.anon
	if keyed {
		m = c.keyed
	}
	m[status]++
	switch {
	case keyed && status == http.StatusOK && !whole:
		c.keyedBad++
	case !keyed && status == http.StatusOK && !whole:
		c.anonBad++
	}
	if keyed && (status != http.StatusOK || !whole) && len(c.failures) < 10 {
		c.failures = append(c.failures, fmt.Sprintf("%s: %d %s", what, status, time.Now().Format(time.TimeOnly)))
	}
}

func (c *counts) snapshot() (keyed, anon map[int]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.keyed), maps.Clone(c.anon)
}

// run starts the two processes and the clients, samples every c.sample
// (printing each sample to out) and returns what it measured.
func run(ctx context.Context, c config, out io.Writer) (*report, error) {
	dir, err := os.MkdirTemp("", "statusgate-heldsoak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := c.bin
	if bin == "" {
		repo, err := filepath.Abs(c.repo)
		if err != nil {
			return nil, err
		}
		// One build per checkout, kept between runs: Build reuses it while
		// it is newer than every source of the binary.
		sum := sha256.Sum256([]byte(repo))
		bin = filepath.Join(os.TempDir(), "statusgate-heldsoak-"+hex.EncodeToString(sum[:6]), "caddy")
		msg, err := harness.Build(repo, bin, false)
		if err != nil {
			return nil, err
		}
		fmt.Fprintln(out, msg)
	}
	ports, err := harness.FreePorts(3)
	if err != nil {
		return nil, err
	}
	simPort, gwPort, adminPort := ports[0], ports[1], ports[2]
	simProc, err := harness.Start(ctx, bin, dir, "sim", simPort, simCaddyfile(simPort, c.moddedItems))
	if err != nil {
		return nil, err
	}
	defer simProc.Stop()
	gw, err := harness.Start(ctx, bin, dir, "gateway", gwPort, gatewayCaddyfile(gwPort, adminPort, simPort))
	if err != nil {
		return nil, err
	}
	defer gw.Stop()
	base := gw.Base()

	// The answers every client must get whole: fetched once, before the load.
	whole, err := fetch(ctx, http.DefaultClient, base+detailed, secret, 0)
	if err != nil || whole.status != http.StatusOK || !bytes.Contains(whole.body, []byte(`"authenticated":true`)) {
		return nil, fmt.Errorf("the keyed detailed player before the load: %v %d", err, whole.status)
	}
	fmt.Fprintf(out, "sim pid %d on :%d, gateway pid %d on :%d; the detailed player is %d bytes (keyed)\n",
		simProc.Pid(), simPort, gw.Pid(), gwPort, len(whole.body))

	cs := &counts{keyed: map[int]int{}, anon: map[int]int{}}
	load, stopLoad := context.WithTimeout(ctx, c.duration)
	defer stopLoad()
	var wg sync.WaitGroup
	for w := range c.keyed {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			for i := w; load.Err() == nil; i++ {
				target := targets[i%len(targets)]
				a, err := fetch(load, client, base+target, secret, c.pace)
				if load.Err() != nil {
					return // cut by the end of the run: not counted
				}
				if err != nil {
					a.status = 0
				}
				cs.add(true, a.status, err == nil && bytes.Contains(a.body, []byte(`"authenticated":true`)), target)
			}
		})
	}
	for range c.pollers {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			for load.Err() == nil {
				a, err := fetch(load, client, base+detailed, "", c.pace)
				if load.Err() != nil {
					return
				}
				if err != nil {
					a.status = 0
				}
				cs.add(false, a.status, err == nil && bytes.Contains(a.body, []byte(`"authenticated":false`)), detailed)
			}
		})
	}

	rep := &report{}
	start := time.Now()
	tick := time.NewTicker(c.sample)
	defer tick.Stop()
	fmt.Fprintln(out, "   time  keyed 200/all  anonymous 200/429/503/other  gateway RSS  sim RSS  held")
	for done := false; !done; {
		select {
		case <-tick.C:
		case <-load.Done():
			done = true
		}
		s := sample{at: time.Since(start).Round(time.Second)}
		if n := len(rep.samples); n > 0 && rep.samples[n-1].at == s.at {
			continue // the end of the run, on a tick
		}
		s.keyed, s.anon = cs.snapshot()
		s.gatewayRSS, _ = rss(gw.Pid())
		s.simRSS, _ = rss(simProc.Pid())
		if s.held, err = heldBytes(adminPort); err != nil {
			s.held = -1
		}
		rep.samples = append(rep.samples, s)
		fmt.Fprintln(out, s.line())
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rep.keyed, rep.anon = cs.snapshot()
	rep.keyedBad, rep.anonBad, rep.firstFailures = cs.keyedBad, cs.anonBad, cs.failures
	return rep, nil
}

// answer is one response, read whole.
type answer struct {
	status int
	body   []byte
}

// fetch GETs url, with the key if one is given, and reads the body whole, a
// piece of 32 KiB at a time with a pause of pace after each.
func fetch(ctx context.Context, client *http.Client, url, key string, pace time.Duration) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return answer{}, err
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	res, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	a := answer{status: res.StatusCode}
	a.body, err = harness.ReadAtPace(res.Body, pace)
	return a, err
}

// rss is a process's resident memory, from /proc/<pid>/status.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseRSS(b)
}

// parseRSS reads VmRSS (in kB) from the text of /proc/<pid>/status.
func parseRSS(status []byte) (int64, error) {
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("VmRSS line %q", line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS line")
}

// heldBytes reads the gateway's held_bytes from its admin API's metrics.
func heldBytes(adminPort int) (int64, error) {
	res, err := http.Get("http://127.0.0.1:" + strconv.Itoa(adminPort) + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	m, err := scrape.Text(res.Body, "caddy_http_statusgate_held_bytes")
	if err != nil {
		return 0, err
	}
	var n float64
	for _, v := range m {
		n += v
	}
	return int64(n), nil
}

func mb(n int64) string { return fmt.Sprintf("%.0f MB", float64(n)/1e6) }

func (s sample) line() string {
	other := 0
	for code, n := range s.anon {
		if code != 200 && code != 429 && code != 503 {
			other += n
		}
	}
	keyedAll := 0
	for _, n := range s.keyed {
		keyedAll += n
	}
	return fmt.Sprintf("%7s  %6d/%-6d  %6d/%d/%d/%d  %11s  %7s  %s",
		s.at, s.keyed[200], keyedAll, s.anon[200], s.anon[429], s.anon[503], other, mb(s.gatewayRSS), mb(s.simRSS), mb(s.held))
}

// memory is one process's RSS after the run settled: at the first sample
// at or after settle, the highest and the lowest since, and the last.
type memory struct {
	settled, highest, lowest, last int64
	ok                             bool // a sample at or after settle exists
}

// settledMemory summarises the RSS samples (taken at the given times) after
// settle.
func settledMemory(at []time.Duration, rss []int64, settle time.Duration) memory {
	var m memory
	for i, t := range at {
		if t < settle || rss[i] == 0 {
			continue
		}
		if !m.ok {
			m = memory{settled: rss[i], highest: rss[i], lowest: rss[i], ok: true}
		}
		m.highest, m.lowest, m.last = max(m.highest, rss[i]), min(m.lowest, rss[i]), rss[i]
	}
	return m
}

// clean reports whether every keyed request got a whole 200 and every
// anonymous one a 200 with the anonymous answer, a 429 or a 503.
func (r *report) clean() bool {
	if r.keyedBad > 0 || r.anonBad > 0 {
		return false
	}
	for code, n := range r.keyed {
		if code != http.StatusOK && n > 0 {
			return false
		}
	}
	for code := range r.anon {
		if !slices.Contains([]int{http.StatusOK, http.StatusTooManyRequests, http.StatusServiceUnavailable}, code) {
			return false
		}
	}
	return true
}

func (r *report) print(w io.Writer, c config) {
	keyedAll, anonAll := 0, 0
	for _, n := range r.keyed {
		keyedAll += n
	}
	for _, n := range r.anon {
		anonAll += n
	}
	fmt.Fprintf(w, "\n%v of %d keyed workers and %d anonymous pollers, answers of the detailed player read at 32 KiB per %v:\n", c.duration, c.keyed, c.pollers, c.pace)
	fmt.Fprintf(w, "keyed: %d of %d answered 200 (%.2f %%), %d of them not whole; by status %v\n",
		r.keyed[200], keyedAll, 100*float64(r.keyed[200])/float64(max(1, keyedAll)), r.keyedBad, r.keyed)
	fmt.Fprintf(w, "anonymous: %d requests, by status %v; %d 200s without the anonymous answer\n", anonAll, r.anon, r.anonBad)
	for _, f := range r.firstFailures {
		fmt.Fprintln(w, "  keyed failure:", f)
	}
	var at []time.Duration
	var gw, sm []int64
	for _, s := range r.samples {
		at, gw, sm = append(at, s.at), append(gw, s.gatewayRSS), append(sm, s.simRSS)
	}
	for _, p := range []struct {
		name string
		rss  []int64
	}{{"gateway", gw}, {"sim", sm}} {
		m := settledMemory(at, p.rss, c.settle)
		if !m.ok {
			fmt.Fprintf(w, "%s RSS: no sample after %v\n", p.name, c.settle)
			continue
		}
		fmt.Fprintf(w, "%s RSS after %v: %s; since then highest %s (%+.1f %%), lowest %s, last %s\n", p.name, c.settle,
			mb(m.settled), mb(m.highest), 100*(float64(m.highest)/float64(m.settled)-1), mb(m.lowest), mb(m.last))
	}
}
