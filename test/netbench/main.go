// Command netbench measures what a burst of callers of the gateway's
// /api/v1/network costs, beside the same burst of /api/v1/status callers, for
// this checkout and, side by side, another one (the code before a change).
//
//	bash scripts/netbench.sh                         # this checkout alone
//	bash scripts/netbench.sh -base /path/to/checkout # and another, side by side
//
// Each checkout's ./cmd/caddy is built once (kept in the temporary folder
// while newer than the sources). Three member servers are served from this
// process: each answers /api/v1/status with the same body of -players UUIDs
// (about 390 KB for 10000) and a snapshot time of now, and counts its
// trips. For each checkout, scenario and round a fresh Caddy runs statusgate
// in front of the first member with the network of the three
// (require_key network off, protected_fields network players, so that an
// anonymous caller gets a document of about 530 bytes), is warmed with one
// request of each kind (the members' answers are then cached, as in a
// running gateway), and gets -callers requests at once, each on a
// connection of its own, all anonymous from 127.0.0.1:
//
//   - network: GET /api/v1/network
//   - network-failing: the same, the third member answering 500 from the
//     end of its cached answer's time on (a snapshot, 5 s, after the warming)
//   - status:  GET /api/v1/status (the first member's whole 390 KB answer,
//     from the micro-cache)
//
// It reports, as medians over the rounds, the burst's wall time, the growth
// of Caddy's peak RSS (VmHWM after the burst minus VmRSS before it), the
// answers by status code, and the members' trips during the burst. Exit
// status: 0, or 2 when the harness cannot run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
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

func main() {
	base := flag.String("base", "", "another checkout to measure side by side (the code before a change)")
	callers := flag.Int("callers", 200, "requests sent at once")
	players := flag.Int("players", 10000, "UUIDs in each member's status (10000: about 390 KB)")
	rounds := flag.Int("rounds", 3, "fresh processes per checkout and scenario")
	flag.Parse()

	repo, err := filepath.Abs(".")
	if err != nil {
		fail(err)
	}
	checkouts := []string{repo}
	if *base != "" {
		b, err := filepath.Abs(*base)
		if err != nil {
			fail(err)
		}
		checkouts = append([]string{b}, checkouts...)
	}
	members := startMembers(3, *players)
	fmt.Printf("members: 3 × %d B status; %d callers at once; %d rounds\n\n", len(members[0].body), *callers, *rounds)
	fmt.Println("| checkout | scenario | wall time | peak RSS growth | answers | trips per member |")
	fmt.Println("|---|---|---:|---:|---|---|")
	for _, co := range checkouts {
		bin := harness.CheckoutBinary(co)
		what, err := harness.Build(co, bin, false)
		if err != nil {
			fail(err)
		}
		fmt.Fprintln(os.Stderr, what)
		name := filepath.Base(co)
		for _, sc := range []string{"network", "network-failing", "status"} {
			var walls, growths []float64
			var answers string
			var trips []string
			for range *rounds {
				r := run(bin, members, sc, *callers)
				walls = append(walls, r.wall.Seconds()*1000)
				growths = append(growths, r.growthMiB)
				answers, trips = r.answers, r.trips
			}
			what := "/api/v1/" + sc
			if sc == "network-failing" {
				what = "/api/v1/network, the third member answering 500"
			}
			fmt.Printf("| %s | %d × %s | %.0f ms | %.1f MiB | %s | %s |\n", name, *callers, what,
				harness.Median(walls), harness.Median(growths), answers, strings.Join(trips, " "))
		}
	}
}

// member is one member server: the body it answers /status with, and its
// trips.
type member struct {
	addr    string
	body    []byte
	trips   atomic.Int64
	failing atomic.Bool // answers 500
}

func startMembers(n, players int) []*member {
	var ms []*member
	for i := range n {
		list := make([]string, players)
		for j := range list {
			list[j] = fmt.Sprintf("%08x-0000-4000-8000-%012x", i+1, j)
		}
		m := &member{}
		names, _ := json.Marshal(list)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fail(err)
		}
		m.addr = ln.Addr().String()
		go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/status" {
				http.NotFound(w, r)
				return
			}
			m.trips.Add(1)
			if m.failing.Load() {
				http.Error(w, `{"ok":false,"error":{"status":500,"message":"boom","path":"/api/v1/status"},"meta":{"version":"v1","updatedAt":1}}`, 500)
				return
			}
			now := time.Now().UnixMilli()
			// The snapshot is always of now: each trip is a fresh one.
			body := fmt.Appendf(nil, `{"ok":true,"data":{"online":%s,"minecraft":%d,"discord":7},"meta":{"version":"v1","server":"global","updatedAt":%d,"cachedAt":%d,"authenticated":true}}`,
				names, players, now, now)
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body)
		}))
		m.body = fmt.Appendf(nil, `{"ok":true,"data":{"online":%s,"minecraft":%d,"discord":7},"meta":{"version":"v1","server":"global","updatedAt":0,"cachedAt":0,"authenticated":true}}`, names, players)
		ms = append(ms, m)
	}
	return ms
}

type result struct {
	wall      time.Duration
	growthMiB float64
	answers   string
	trips     []string
}

func run(bin string, ms []*member, scenario string, callers int) result {
	port, err := harness.FreePort()
	if err != nil {
		fail(err)
	}
	dir, err := os.MkdirTemp("", "netbench-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	var block strings.Builder
	for i, m := range ms {
		fmt.Fprintf(&block, "\t\t\tserver s%d %s\n", i, m.addr)
	}
	cfg := fmt.Sprintf(`{
	admin off
	auto_https off
	log {
		level ERROR
	}
}
:%d {
	statusgate %s {
		enable network
		require_key network off
		protected_fields network players
		network main {
%s			self s0
		}
	}
}
`, port, ms[0].addr, block.String())
	p, err := harness.Start(context.Background(), bin, dir, "gateway", port, cfg)
	if err != nil {
		fail(err)
	}
	defer p.Stop()
	url := p.Base() + "/api/v1/" + strings.TrimSuffix(scenario, "-failing")
	for _, warm := range []string{"/api/v1/network", "/api/v1/status"} {
		if status, _ := get(p.Base() + warm); status != 200 {
			fail(fmt.Errorf("warming %s: %d", warm, status))
		}
	}
	// The member fails from the burst on: its answer of the warming is
	// cached for a snapshot, so the burst waits until that is over.
	failing := ms[len(ms)-1]
	if scenario == "network-failing" {
		failing.failing.Store(true)
		defer failing.failing.Store(false)
		time.Sleep(6 * time.Second)
	}
	before := make([]int64, len(ms))
	for i, m := range ms {
		before[i] = m.trips.Load()
	}
	rss := procKiB(p.Pid(), "VmRSS")
	start := make(chan struct{})
	statuses := make([]int, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			statuses[i], _ = get(url)
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	wall := time.Since(t0)
	hwm := procKiB(p.Pid(), "VmHWM")
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	var answers []string
	for _, s := range slices.Sorted(maps.Keys(counts)) {
		answers = append(answers, fmt.Sprintf("%d × %d", counts[s], s))
	}
	var trips []string
	for i, m := range ms {
		trips = append(trips, strconv.FormatInt(m.trips.Load()-before[i], 10))
	}
	return result{wall: wall, growthMiB: float64(hwm-rss) / 1024, answers: strings.Join(answers, ", "), trips: trips}
}

// get sends one request on a connection of its own and reads the answer.
func get(url string) (int, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	res, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	return res.StatusCode, err
}

// procKiB reads a field of /proc/<pid>/status, in KiB.
func procKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		fail(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	fail(fmt.Errorf("no %s in /proc/%d/status", field, pid))
	return 0
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "netbench:", err)
	os.Exit(2)
}
