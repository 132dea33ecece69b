// Command livebench measures live streams (docs/live.md) against polling:
// N viewers of /api/v1/status on one gateway (a caddy run of this
// repository's build) in front of the simulated server (statusgate_sim, in a
// caddy of its own, live clock, status snapshot every 5 s), first as N
// server-sent event streams, then as N clients that poll every 5 s, spread
// evenly over the interval. For each it reports:
//
//   - backend trips to /status per snapshot interval, counted at the sim;
//   - how long after the sim took a snapshot (its meta.cachedAt) each
//     viewer had it: p50, p99 and the last viewer, over every delivery;
//   - the gateway's RSS per viewer: its VmRSS with the viewers connected,
//     less its VmRSS before, divided by N.
//
// -encode puts Caddy's encode in front, as the README's minimal config does,
// and -accept-encoding has each stream send a browser's Accept-Encoding: a
// stream that comes compressed anyway is counted, and only drained.
//
// It is a benchmark, not a test: it reports, it enforces nothing. Run it
// with scripts/livebench.sh (docs/performance.md has the figures).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statusgate/statusgate/test/internal/harness"
)

const snapshot = 5 * time.Second // the sim's status snapshot interval

var (
	// profileDir is where -profile writes the profiles; "": none.
	profileDir string
	// lastEventID is the length of the Last-Event-ID each stream sends
	// (-last-event-id); 0: none.
	lastEventID int
	// encode puts Caddy's encode (gzip and zstd, the README's minimal
	// config) in front of the gateway (-encode), and acceptEncoding is the
	// Accept-Encoding each stream sends (-accept-encoding; "": none).
	encode         bool
	acceptEncoding string
	// encoded counts the streams that came compressed: their events are
	// not read (no deliveries), only drained.
	encoded atomic.Int32
)

func main() {
	viewers := flag.Int("viewers", 10000, "concurrent viewers")
	snapshots := flag.Int("snapshots", 6, "snapshot intervals measured")
	build := flag.Bool("build", false, "rebuild the caddy binary even if it is newer than the sources")
	bin := flag.String("bin", "", "run this caddy binary (built from other code, to compare) instead of this checkout's build")
	polling := flag.Bool("polling", true, "after the streams, measure the viewers polling")
	flag.StringVar(&profileDir, "profile", "", "write the gateway's heap and goroutine profiles, its metrics and /proc status with the streams open into this folder")
	flag.IntVar(&lastEventID, "last-event-id", 0, "send a Last-Event-ID of this many bytes with each stream, as a reconnect does")
	flag.BoolVar(&encode, "encode", false, "put `encode` (gzip and zstd, as the README's minimal config) in the gateway's site")
	flag.StringVar(&acceptEncoding, "accept-encoding", "", "send this Accept-Encoding with each stream (a browser's: \"gzip, deflate, br, zstd\")")
	flag.Parse()
	if err := run(*viewers, *snapshots, *bin, *build, *polling); err != nil {
		fmt.Fprintln(os.Stderr, "livebench:", err)
		os.Exit(2)
	}
}

func run(n, snapshots int, bin string, force, polling bool) error {
	repo, err := filepath.Abs("..")
	if wd, _ := os.Getwd(); filepath.Base(wd) != "test" {
		repo, err = filepath.Abs(".")
	}
	if err != nil {
		return err
	}
	if bin == "" {
		bin = filepath.Join(repo, "test", "perf", ".cache", "caddy")
		what, err := harness.Build(repo, bin, force)
		if err != nil {
			return err
		}
		fmt.Println(what)
	} else {
		fmt.Println("running " + bin)
	}
	dir, err := os.MkdirTemp("", "livebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ports, err := harness.FreePorts(3)
	if err != nil {
		return err
	}
	simPort, gwPort, adminPort := ports[0], ports[1], ports[2]
	ctx := context.Background()
	simProc, err := harness.Start(ctx, bin, dir, "sim", simPort, fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
	log {
		level WARN
	}
}

http://:%d {
	bind 127.0.0.1
	statusgate_sim {
		seed 42
		frozen off
		stats_endpoint
	}
}
`, simPort))
	if err != nil {
		return err
	}
	defer simProc.Stop()
	site := ""
	if encode {
		site = "encode\n\t"
	}
	gw, err := harness.Start(ctx, bin, dir, "gateway", gwPort, fmt.Sprintf(`{
	admin 127.0.0.1:%d
	auto_https off
	persist_config off
	log {
		level WARN
	}
}

http://:%d {
	bind 127.0.0.1
	%sstatusgate 127.0.0.1:%d {
		max_per_client off
		max_streams_per_client off
		max_streams %d
	}
}
`, adminPort, gwPort, site, simPort, n))
	if err != nil {
		return err
	}
	defer gw.Stop()
	fmt.Printf("%d viewers of /api/v1/status; the sim's snapshot every %s; %d intervals each; %d CPUs\n", n, snapshot, snapshots, nprocs())
	fmt.Printf("encode in front: %t; streams' Accept-Encoding: %q\n\n", encode, acceptEncoding)

	b := bench{n: n, snapshots: snapshots, gateway: gw.Base(), sim: simProc.Base(), gwPid: gw.Pid(), admin: fmt.Sprintf("http://127.0.0.1:%d", adminPort)}
	ways := []struct {
		name string
		run  func() (result, error)
	}{{"streams", b.streams}, {"polling every 5 s", b.polling}}
	if !polling {
		ways = ways[:1]
	}
	for _, m := range ways {
		r, err := m.run()
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		r.print(m.name, n)
	}
	return nil
}

type bench struct {
	n, snapshots        int
	gateway, sim, admin string
	gwPid               int
}

// profile saves the gateway's heap and goroutine profiles into profileDir.
func (b *bench) profile() {
	if profileDir == "" {
		return
	}
	save := func(name, path string) {
		resp, err := http.Get(b.admin + path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(profileDir, name))
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
	}
	status := func(name string) {
		raw, _ := os.ReadFile("/proc/" + strconv.Itoa(b.gwPid) + "/status")
		_ = os.WriteFile(filepath.Join(profileDir, name), raw, 0o644)
	}
	status("status")
	save("metrics.out", "/metrics") // Go's memory classes, stacks among them
	save("goroutine.out", "/debug/pprof/goroutine")
	// The heap live now, after a collection, which also shrinks stacks
	// that use less than a quarter of their size; then a moment for the
	// scavenger.
	save("heap.out", "/debug/pprof/heap?gc=1")
	time.Sleep(3 * time.Second)
	status("status-after-gc")
	save("metrics-after-gc.out", "/metrics")
}

// result is one way of watching, measured.
type result struct {
	trips     int64           // sim /status requests during the window
	intervals int             // snapshot intervals in the window
	delays    []time.Duration // per delivery: receipt less the snapshot's time
	last      []time.Duration // per snapshot: the last viewer's delay
	rssKB     int64           // gateway VmRSS growth with the viewers connected
	missed    int             // deliveries a viewer never had within the window
	encoded   int             // streams that came compressed (their events not read)
}

func (r result) print(name string, n int) {
	slices.Sort(r.delays)
	slices.Sort(r.last)
	fmt.Printf("%s:\n", name)
	fmt.Printf("  backend trips to /status: %d in %d snapshot intervals = %.2f per interval\n", r.trips, r.intervals, float64(r.trips)/float64(r.intervals))
	if len(r.delays) > 0 {
		fmt.Printf("  snapshot to viewer: p50 %s, p99 %s, max %s over %d deliveries (%d missed)\n",
			harness.Percentile(r.delays, 50).Round(time.Millisecond), harness.Percentile(r.delays, 99).Round(time.Millisecond),
			r.delays[len(r.delays)-1].Round(time.Millisecond), len(r.delays), r.missed)
		fmt.Printf("  snapshot to the last viewer: median %s, max %s over %d snapshots\n",
			harness.Percentile(r.last, 50).Round(time.Millisecond), r.last[len(r.last)-1].Round(time.Millisecond), len(r.last))
	}
	if r.encoded > 0 {
		fmt.Printf("  %d of %d streams came compressed (Content-Encoding): their events were not read\n", r.encoded, n)
	}
	fmt.Printf("  gateway RSS: +%d MiB with the viewers connected = %.1f KiB per viewer\n\n", r.rssKB>>10, float64(r.rssKB)/float64(n))
}

// simTrips is the sim's count of /status requests.
func (b *bench) simTrips() (int64, error) {
	resp, err := http.Get(b.sim + "/_sim/stats")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var s struct {
		Stations map[string]struct {
			Requests int64 `json:"requests"`
		} `json:"stations"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return 0, err
	}
	return s.Stations["status"].Requests, nil
}

func (b *bench) rss() int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(b.gwPid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}

// deliveries records, per snapshot time, when each viewer first had it.
type deliveries struct {
	mu  sync.Mutex
	got map[int64][]time.Duration // snapshot (ms) → delays
	per map[int64]int             // snapshot → viewers that had it
}

func newDeliveries() *deliveries {
	return &deliveries{got: map[int64][]time.Duration{}, per: map[int64]int{}}
}

func (d *deliveries) add(at int64, now time.Time) {
	delay := now.Sub(time.UnixMilli(at))
	d.mu.Lock()
	d.got[at] = append(d.got[at], delay)
	d.per[at]++
	d.mu.Unlock()
}

// window is the measurement: the snapshots taken from start on, for
// intervals intervals, each of which every viewer should have had.
func (d *deliveries) result(from, to int64, n int) result {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r result
	for at, delays := range d.got {
		if at < from || at >= to {
			continue
		}
		r.delays = append(r.delays, delays...)
		r.last = append(r.last, slices.Max(delays))
		r.missed += n - len(delays)
	}
	return r
}

// cachedAt reads meta.cachedAt out of an envelope.
func cachedAt(b []byte) int64 {
	s := string(b)
	i := strings.LastIndex(s, `"cachedAt":`)
	if i < 0 {
		return 0
	}
	s = s[i+len(`"cachedAt":`):]
	end := strings.IndexAny(s, ",}")
	if end < 0 {
		return 0
	}
	v, _ := strconv.ParseInt(s[:end], 10, 64)
	return v
}

// measure waits for the next snapshot boundary, measures intervals
// snapshot intervals, and waits until the viewers had the last one.
func (b *bench) measure(d *deliveries) (result, error) {
	now := time.Now()
	start := now.Truncate(snapshot).Add(snapshot)
	time.Sleep(time.Until(start) + snapshot/10)
	trips0, err := b.simTrips()
	if err != nil {
		return result{}, err
	}
	end := start.Add(time.Duration(b.snapshots) * snapshot)
	time.Sleep(time.Until(end) + snapshot/10)
	trips1, err := b.simTrips()
	if err != nil {
		return result{}, err
	}
	time.Sleep(snapshot) // the last snapshot's stragglers
	r := d.result(start.UnixMilli(), end.UnixMilli(), b.n)
	r.trips, r.intervals = trips1-trips0, b.snapshots
	return r, nil
}

// streams opens n streams, each on a connection of its own, and records
// when each new snapshot arrives.
func (b *bench) streams() (result, error) {
	rssBase := b.rss()
	d := newDeliveries()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var opened, failed atomic.Int32
	var wg sync.WaitGroup
	addr := strings.TrimPrefix(b.gateway, "http://")
	for i := range b.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := viewStream(ctx, addr, d, &opened); err != nil && ctx.Err() == nil {
				if failed.Add(1) <= 3 {
					fmt.Fprintf(os.Stderr, "viewer %d: %v\n", i, err)
				}
			}
		}()
		if i%500 == 499 {
			time.Sleep(100 * time.Millisecond) // a ramp, not a SYN flood
		}
	}
	for opened.Load()+failed.Load() < int32(b.n) {
		time.Sleep(100 * time.Millisecond)
	}
	if f := failed.Load(); f > 0 {
		return result{}, fmt.Errorf("%d of %d streams failed", f, b.n)
	}
	r, err := b.measure(d)
	r.rssKB = b.rss() - rssBase // the viewers still connected
	r.encoded = int(encoded.Load())
	b.profile()
	cancel()
	wg.Wait()
	return r, err
}

// viewStream is one viewer: a stream read until ctx ends.
func viewStream(ctx context.Context, addr string, d *deliveries, opened *atomic.Int32) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	context.AfterFunc(ctx, func() { conn.Close() })
	head := "GET /api/v1/status HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\n"
	if lastEventID > 0 {
		head += "Last-Event-ID: " + strings.Repeat("x", lastEventID) + "\r\n"
	}
	if acceptEncoding != "" {
		head += "Accept-Encoding: " + acceptEncoding + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		return err
	}
	rd := bufio.NewReaderSize(conn, 2048)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	opened.Add(1)
	if resp.Header.Get("Content-Encoding") != "" {
		// Compressed: what the gateway holds for it is what is measured;
		// the bytes are only taken, so that it is not a stalled viewer.
		encoded.Add(1)
		_, err := io.Copy(io.Discard, resp.Body)
		return err
	}
	body := bufio.NewReaderSize(resp.Body, 2048)
	var last int64
	for {
		line, err := body.ReadSlice('\n')
		if err != nil {
			return err
		}
		if data, ok := strings.CutPrefix(string(line), "data: "); ok {
			if at := cachedAt([]byte(data)); at != 0 && at != last {
				last = at
				d.add(at, time.Now())
			}
		}
	}
}

// polling runs n clients that GET /status every 5 s, spread evenly over
// the interval, each on a keep-alive connection of its own.
func (b *bench) polling() (result, error) {
	time.Sleep(2 * time.Second) // the streams' connections closed
	rssBase := b.rss()
	d := newDeliveries()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range b.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			phase := time.Duration(i) * snapshot / time.Duration(b.n)
			t := time.NewTimer(phase)
			defer t.Stop()
			var last int64
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				t.Reset(snapshot)
				resp, err := client.Get(b.gateway + "/api/v1/status")
				if err != nil {
					if ctx.Err() == nil && failed.Add(1) <= 3 {
						fmt.Fprintf(os.Stderr, "poller %d: %v\n", i, err)
					}
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if at := cachedAt(body); at != 0 && at != last {
					last = at
					d.add(at, time.Now())
				}
			}
		}()
	}
	time.Sleep(snapshot) // every poller has asked once
	r, err := b.measure(d)
	r.rssKB = b.rss() - rssBase // the viewers still connected
	r.encoded = int(encoded.Load())
	cancel()
	wg.Wait()
	if f := failed.Load(); f > 0 {
		fmt.Fprintf(os.Stderr, "%d polls failed\n", f)
	}
	return r, err
}

func nprocs() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "\nprocessor") + 1
}
