// Command perf measures the statusgate gateway against a plain Caddy
// reverse_proxy, side by side, on this machine.
//
// Run it from anywhere in the repository:
//
//	bash scripts/perf.sh            # or: go run ./test/perf
//	bash scripts/perf.sh -rounds 3 -duration 2s -scenarios 1,3   # a quick smoke run
//
// It builds ./cmd/caddy once into test/perf/.cache (reused while it is newer
// than the sources), serves a fake ServerAPI backend from memory in this
// process, starts two Caddy processes from that binary with the same global
// options (plain "reverse_proxy <backend>", and "statusgate <backend> { key … }"),
// and drives them with keep-alive Go clients in interleaved rounds. For each
// scenario it reports the median requests/s of each, the median of the per-pair
// ratios statusgate/plain, and p50/p99 latency over all rounds. A memory probe
// streams one 64 MiB filtered body through a fresh process of each and reports
// the growth of its peak RSS (VmHWM).
//
// Every scenario's sample response is checked (the anonymous player has no op,
// banned or discord and meta.authenticated false; keyed responses are the
// backend's bytes), and every response under load must be 200 with the
// sample's length, so that a broken gateway cannot score. The exit status is 1
// on a correctness failure, 2 when the harness cannot run, and 0 otherwise: a
// missed target is reported, not failed, because on a small shared VM the numbers
// are noisy and the load generator competes with Caddy for the CPU.
//
// When a target is missed, the statusgate process is profiled through Caddy's
// admin endpoint (/debug/pprof) and the top of the profile is printed.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"
)

// apiKey is the statusgate key of the keyed scenarios: 32 characters.
const apiKey = "pf7Qx2LmA9cR4tVw8ZyB1nH6jK3sD5eG"

// Targets: statusgate/plain throughput ratios and the memory limit.
const (
	targetKeyedStatus    = 0.95
	targetAnonPlayer     = 0.75
	targetProbeGrowthMiB = 16
)

type config struct {
	rounds         int
	duration       time.Duration
	warmup         time.Duration
	workers        int
	bulk           int64
	playerSize     int
	cache          string
	caddyBin       string
	rebuild        bool
	profile        bool
	profileSeconds int
	profilePlain   bool
	scenarios      string
	noProbe        bool
}

func main() {
	var c config
	flag.IntVar(&c.rounds, "rounds", 5, "rounds per gateway and scenario (each round: one plain and one statusgate run)")
	flag.DurationVar(&c.duration, "duration", 4*time.Second, "length of one run")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured load on each gateway before a scenario's rounds")
	flag.IntVar(&c.workers, "workers", 8, "concurrent keep-alive clients")
	flag.Int64Var(&c.bulk, "bulk", 64<<20, "size in bytes of the memory probe's body")
	flag.IntVar(&c.playerSize, "player-size", 200<<10, "approximate size in bytes of the detailed player body")
	flag.StringVar(&c.cache, "cache", "", "directory for the caddy binary, configs, logs and profiles (default test/perf/.cache)")
	flag.StringVar(&c.caddyBin, "caddy", "", "use this caddy binary instead of building ./cmd/caddy")
	flag.BoolVar(&c.rebuild, "rebuild", false, "build caddy even if the cached binary is newer than the sources")
	flag.BoolVar(&c.profile, "profile", true, "profile statusgate when a target is missed")
	flag.IntVar(&c.profileSeconds, "profile-seconds", 10, "length of a CPU profile")
	flag.BoolVar(&c.profilePlain, "profile-plain", false, "profile the plain gateway too, after statusgate, for a side-by-side reading (pprof -diff_base)")
	flag.StringVar(&c.scenarios, "scenarios", "1,2,3,4", "scenarios to run, by number")
	flag.BoolVar(&c.noProbe, "no-probe", false, "skip the memory probe")
	flag.Parse()
	os.Exit(run(c))
}

// Exit statuses.
const (
	exitOK      = 0
	exitWrong   = 1 // a correctness failure
	exitNoSetup = 2 // the harness could not run
)

// scenario is one kind of request measured on both gateways.
type scenario struct {
	num      int
	name     string
	path     string
	keyed    bool
	filtered bool   // statusgate rewrites the body (anonymous caller)
	body     []byte // what the backend sends
	names    []string
}

// result is a scenario's measurements.
type result struct {
	sc        scenario
	plain, sg []roundResult
	reqs      [2]request // plain, statusgate; with the verified sample's length
	ratio     float64    // median of the per-pair ratios
	target    float64    // 0 when the scenario has no target
}

func run(c config) int {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var cleanup []func()
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	setupErr := func(err error) int {
		fmt.Fprintln(os.Stderr, "perf:", err)
		return exitNoSetup
	}

	repo, err := repoRoot()
	if err != nil {
		return setupErr(err)
	}
	if c.cache == "" {
		c.cache = filepath.Join(repo, "test", "perf", ".cache")
	}
	if err := os.MkdirAll(c.cache, 0o755); err != nil {
		return setupErr(err)
	}
	selected, err := parseScenarios(c.scenarios)
	if err != nil {
		return setupErr(err)
	}

	machine := printHeader(repo)

	bin := c.caddyBin
	if bin == "" {
		bin = filepath.Join(c.cache, "caddy")
		msg, err := harness.Build(repo, bin, c.rebuild)
		if err != nil {
			return setupErr(err)
		}
		fmt.Println("caddy:     " + msg)
	}
	if out, err := exec.Command(bin, "version").Output(); err == nil {
		fmt.Println("caddy ver: " + strings.TrimSpace(string(out)))
	}

	status, player := statusBody(), fixture.PlayerOfSize(c.playerSize)
	// One backend per gateway, so that what reaches it can be told apart.
	backends := map[string]*backend{}
	addrs := map[string]string{}
	for _, name := range []string{"plain", "statusgate"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return setupErr(err)
		}
		cleanup = append(cleanup, func() { l.Close() })
		backends[name] = newBackend(status, player)
		backends[name].serve(l)
		addrs[name] = l.Addr().String()
	}
	fmt.Printf("backend:   in-process fake ServerAPI (auth off): /status %d B, /player?detailed=true %d B, probe body %d B streamed\n",
		len(status), len(player), c.bulk)
	fmt.Printf("load:      %d keep-alive workers; per scenario %s warm-up, then %d round(s) of %s on each gateway, interleaved (plain,statusgate then statusgate,plain)\n\n",
		c.workers, c.warmup, c.rounds, c.duration)

	scenarios := []scenario{
		{num: 1, name: "keyed /status", path: statusPath, keyed: true, body: status},
		{num: 2, name: "anonymous /status", path: statusPath, filtered: true, body: status},
		{num: 3, name: "anonymous /player detailed", path: playerPath, filtered: true, body: player, names: protectedNames},
		{num: 4, name: "keyed /player detailed", path: playerPath, keyed: true, body: player},
	}
	var failures []string
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		failures = append(failures, msg)
		fmt.Println("FAIL: " + msg)
	}

	// The memory probe runs first, on fresh processes.
	var probes [2]probeResult
	if !c.noProbe {
		fmt.Printf("== memory probe: one %s anonymous /player body through a fresh Caddy each\n", size(c.bulk))
		warm := []request{{path: statusPath}, {path: playerPath}}
		for i, name := range []string{"plain", "statusgate"} {
			key := ""
			if name == "statusgate" {
				key = apiKey
			}
			p, err := memoryProbe(ctx, bin, c.cache, name, addrs[name], key, c.bulk, warm)
			if err != nil {
				return setupErr(err)
			}
			probes[i] = p
			fmt.Printf("  %-10s VmHWM %6.1f MiB -> %6.1f MiB, growth %5.1f MiB  (VmRSS after %.1f MiB; %d bytes read, %d protected members in them)\n",
				name, mib(p.hwmBefore), mib(p.hwmAfter), mib(p.growthKB()), mib(p.rssAfter), p.scan.Bytes, p.scan.leaked())
		}
		for _, msg := range checkProbes(probes[0], probes[1], c.bulk) {
			fail("%s", msg)
		}
		fmt.Println()
	}

	plainGW, err := startGateway(ctx, bin, c.cache, "plain", addrs["plain"], "")
	if err != nil {
		return setupErr(err)
	}
	cleanup = append(cleanup, plainGW.Stop)
	sgGW, err := startGateway(ctx, bin, c.cache, "statusgate", addrs["statusgate"], apiKey)
	if err != nil {
		return setupErr(err)
	}
	cleanup = append(cleanup, sgGW.Stop)
	targets := [2]*target{newTarget("plain", plainGW.Base(), c.workers), newTarget("statusgate", sgGW.Base(), c.workers)}
	targets[0].pid, targets[1].pid = plainGW.Pid(), sgGW.Pid()

	var results []*result
	for _, sc := range scenarios {
		if !selected[sc.num] || ctx.Err() != nil {
			continue
		}
		res, msgs := runScenario(ctx, c, sc, targets)
		for _, m := range msgs {
			fail("%s", m)
		}
		if res != nil {
			results = append(results, res)
		}
	}
	if ctx.Err() != nil {
		return setupErr(ctx.Err())
	}
	if n := backends["statusgate"].keySeen.Load(); n > 0 {
		fail("statusgate forwarded the API key to the backend in %d requests", n)
	}

	// Targets, and a profile for each missed one.
	fmt.Println("== targets")
	for _, r := range results {
		if r.target == 0 {
			continue
		}
		pass := r.ratio >= r.target
		p, s := summarize(r.plain), summarize(r.sg)
		fmt.Printf("  %s  [%d] %s: statusgate/plain %.3f (target >= %.2f); Caddy CPU per request plain %s, statusgate %s (plain/statusgate %.3f)\n",
			passMiss(pass), r.sc.num, r.sc.name, r.ratio, r.target, us(p.cpu), us(s.cpu), float64(p.cpu)/max(float64(s.cpu), 1))
		if !pass && c.profile && len(failures) == 0 {
			fmt.Println(indent(profileScenario(c, r, 1, targets[1], sgGW), "    "))
			if c.profilePlain {
				fmt.Println(indent(profileScenario(c, r, 0, targets[0], plainGW), "    "))
			}
		}
	}
	if !c.noProbe {
		growth := mib(probes[1].growthKB())
		pass := growth <= targetProbeGrowthMiB
		fmt.Printf("  %s  %s filtered body: statusgate peak RSS growth %.1f MiB (target <= %d MiB; plain %.1f MiB)\n",
			passMiss(pass), size(c.bulk), growth, targetProbeGrowthMiB, mib(probes[0].growthKB()))
		if !pass && c.profile && probes[1].allocsProfile != "" {
			fmt.Println(indent("allocations of the statusgate probe process (alloc_space):\n"+
				pprofTop(probes[1].allocsProfile, 20, "-sample_index=alloc_space"), "    "))
		}
	}
	fmt.Println()
	printMarkdown(c, machine, results, probes)

	if len(failures) > 0 {
		fmt.Printf("\nCORRECTNESS FAILURES (%d):\n", len(failures))
		for _, f := range failures {
			fmt.Println("  - " + f)
		}
		fmt.Printf("caddy logs: %s\n", c.cache)
		return exitWrong
	}
	fmt.Println("\ncorrectness: every sample verified, every measured response was 200 with the sample's length, no key reached the backend")
	return exitOK
}

// runScenario verifies a sample from each gateway, warms both up, and runs the
// interleaved rounds. It returns the measurements and any correctness failures.
func runScenario(ctx context.Context, c config, sc scenario, targets [2]*target) (*result, []string) {
	fmt.Printf("== [%d] %s: GET %s (%s)\n", sc.num, sc.name, sc.path, describe(sc))
	res := &result{sc: sc}
	switch sc.num {
	case 1:
		res.target = targetKeyedStatus
	case 3:
		res.target = targetAnonPlayer
	}
	for i, t := range targets {
		rq := request{path: sc.path}
		if sc.keyed {
			rq.key = apiKey
		}
		status, body, err := t.fetch(ctx, rq)
		if err == nil {
			if i == 1 && sc.filtered {
				err = checkFiltered(status, body, sc.body, sc.names)
			} else {
				err = checkPassThrough(status, body, sc.body)
			}
		}
		if err != nil {
			return nil, []string{fmt.Sprintf("[%d] %s: %s sample: %v", sc.num, sc.name, t.name, err)}
		}
		rq.wantLen = int64(len(body))
		res.reqs[i] = rq
	}
	rqs := res.reqs
	fmt.Printf("  samples verified: plain %d B, statusgate %d B\n", rqs[0].wantLen, rqs[1].wantLen)
	for i, t := range targets {
		runRound(t, rqs[i], c.workers, c.warmup)
	}
	var bad []string
	for round := range c.rounds {
		order := [2]int{0, 1}
		if round%2 == 1 {
			order = [2]int{1, 0}
		}
		var got [2]roundResult
		for _, i := range order {
			if ctx.Err() != nil {
				return nil, nil
			}
			got[i] = runRound(targets[i], rqs[i], c.workers, c.duration)
			if got[i].failures > 0 {
				bad = append(bad, fmt.Sprintf("[%d] %s: %s round %d: %d bad responses, first: %s",
					sc.num, sc.name, targets[i].name, round+1, got[i].failures, got[i].firstFail))
			}
		}
		res.plain = append(res.plain, got[0])
		res.sg = append(res.sg, got[1])
		fmt.Printf("  round %d: plain %7.0f req/s %6s CPU/req   statusgate %7.0f req/s %6s CPU/req   ratio %.3f\n",
			round+1, got[0].rps(), us(got[0].cpuPerRequest()), got[1].rps(), us(got[1].cpuPerRequest()), got[1].rps()/max(got[0].rps(), 1e-9))
	}
	res.ratio = harness.Median(pairRatios(rpsOf(res.plain), rpsOf(res.sg)))
	p, s := summarize(res.plain), summarize(res.sg)
	fmt.Printf("  median: plain %.0f req/s (p50 %s, p99 %s, Caddy CPU %s/req)  statusgate %.0f req/s (p50 %s, p99 %s, Caddy CPU %s/req)  ratio %.3f\n\n",
		p.rps, ms(p.p50), ms(p.p99), us(p.cpu), s.rps, ms(s.p50), ms(s.p99), us(s.cpu), res.ratio)
	return res, bad
}

func describe(sc scenario) string {
	who := "anonymous"
	if sc.keyed {
		who = "X-API-Key"
	}
	what := "statusgate passes the backend's bytes"
	if sc.filtered {
		what = "statusgate filters"
	}
	return who + ", " + what
}

// profileScenario loads gateway g (which: 0 plain, 1 statusgate) with the
// scenario while taking a CPU profile from its admin endpoint, and returns
// the top of the profile.
func profileScenario(c config, r *result, which int, t *target, g *gateway) string {
	sc, rq, name := r.sc, r.reqs[which], [2]string{"plain", "statusgate"}[which]
	file := filepath.Join(c.cache, fmt.Sprintf("%s-scenario%d.cpu.pb.gz", name, sc.num))
	// The allocations while it ran, to read per request too: the process's
	// allocation profile before and after (pprof -base).
	allocs := [2]string{
		filepath.Join(c.cache, fmt.Sprintf("%s-scenario%d.allocs-before.pb.gz", name, sc.num)),
		filepath.Join(c.cache, fmt.Sprintf("%s-scenario%d.allocs-after.pb.gz", name, sc.num)),
	}
	aerr := g.adminGet("/debug/pprof/allocs", allocs[0])
	done := make(chan roundResult, 1)
	go func() { done <- runRound(t, rq, c.workers, time.Duration(c.profileSeconds+1)*time.Second) }()
	perr := g.adminGet("/debug/pprof/profile?seconds="+strconv.Itoa(c.profileSeconds), file)
	if aerr == nil {
		aerr = g.adminGet("/debug/pprof/allocs", allocs[1])
	}
	load := <-done
	if perr != nil {
		return "profile: " + perr.Error()
	}
	// To read the profile per request: the requests served while it ran.
	perSecond := time.Duration(float64(time.Second) / (load.rps() * float64(c.profileSeconds)))
	allocNote := "allocation profiles: " + fmt.Sprint(aerr)
	if aerr == nil {
		allocNote = fmt.Sprintf("allocations while it ran: go tool pprof -sample_index=alloc_objects -base %s %s (divide by %.0f requests)",
			allocs[0], allocs[1], load.rps()*float64(c.profileSeconds))
	}
	return fmt.Sprintf("CPU profile of %s under scenario %d (%ds, saved to %s), at %.0f req/s and %s of Caddy CPU per request,\n"+
		"so 1s of samples is %s per request:\n%s\nstatusgate's own functions in it (flat is their own time, cum includes what they call, next handler too):\n%s\n%s",
		name, sc.num, c.profileSeconds, file, load.rps(), us(load.cpuPerRequest()), us(perSecond), pprofTop(file, 25),
		grepLines(pprofTop(file, 0, "-cum"), "github.com/statusgate/", 20), allocNote)
}

// summary is a gateway's figures over a scenario's rounds.
type summary struct {
	rps      float64       // median over the rounds
	p50, p99 time.Duration // over every request of every round
	cpu      time.Duration // median over the rounds of the Caddy process's CPU time per request
}

func summarize(rounds []roundResult) summary {
	var all []time.Duration
	cpu := make([]float64, len(rounds))
	for i, r := range rounds {
		all = append(all, r.latencies...)
		cpu[i] = float64(r.cpuPerRequest())
	}
	slices.Sort(all)
	return summary{rps: harness.Median(rpsOf(rounds)), p50: harness.Percentile(all, 50), p99: harness.Percentile(all, 99), cpu: time.Duration(harness.Median(cpu))}
}

func rpsOf(rounds []roundResult) []float64 {
	out := make([]float64, len(rounds))
	for i, r := range rounds {
		out[i] = r.rps()
	}
	return out
}

func parseScenarios(s string) (map[int]bool, error) {
	sel := map[int]bool{}
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4 {
			return nil, fmt.Errorf("-scenarios: %q is not a number from 1 to 4", f)
		}
		sel[n] = true
	}
	return sel, nil
}

// repoRoot is the directory of the main module's go.mod.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the statusgate module")
	}
	return filepath.Dir(mod), nil
}

// command is how the harness was started, as the user typed it.
func command() string {
	if cmd := os.Getenv("STATUSGATE_PERF_CMD"); cmd != "" {
		return cmd
	}
	return strings.Join(append([]string{"go run ./test/perf"}, os.Args[1:]...), " ")
}

// printHeader prints the command and the machine, and returns a one-line
// description of the machine.
func printHeader(repo string) string {
	machine := fmt.Sprintf("nproc %d, %s, %s, %s %s/%s", runtime.NumCPU(), cpuModel(), memTotal(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Println("statusgate vs plain reverse_proxy, side by side")
	fmt.Println("command:   " + command())
	fmt.Println("machine:   " + machine)
	rev, _ := exec.Command("git", "-C", repo, "describe", "--always", "--dirty").Output()
	fmt.Printf("tree:      %s at %s\n", repo, strings.TrimSpace(string(rev)))
	fmt.Printf("started:   %s, load average %s\n", time.Now().Format(time.RFC3339), loadAvg())
	return machine
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func memTotal() string {
	kb, err := procKB("/proc/meminfo", "MemTotal")
	if err != nil {
		return "memory unknown"
	}
	return fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20))
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
