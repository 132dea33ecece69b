// Command flood measures what a flood of callers does to the ServerAPI
// backend behind plain reverse_proxy and behind statusgate, side by side.
//
//	bash scripts/flood.sh                     # smoke run: 30 pollers, 5 s a round, 1 round each
//	bash scripts/flood.sh -pollers 300 -duration 60s -rounds 3 -abuser-conns 32   # the full run
//	bash scripts/flood.sh -duration 20s -warmup 2s -stalled 64 -slow 64 -h2-streams 1000 -reloads 10   # the attackers' full run
//
// Each round loads one config into an in-process Caddy: the gateway on a
// loopback port in front of statusgate_sim, the capacity-modelled backend
// (8 HTTP threads with an unbounded queue, an offline player up to 1.4 s,
// /placeholders work up to 2 s on a 20 TPS main thread). The gateway is
// either plain reverse_proxy with the production example's response header timeout (docs/configuration.md), or statusgate
// with its defaults plus a rate_limit zone per client IP for anonymous
// callers. Rounds alternate between the two, so that drift on a shared
// machine hits both alike.
//
// The callers: pollers (a website widget each, from its own address)
// alternating /status and /player/<uuid> of the sim's named players, some
// of them offline; one abusive client on as many connections as it likes,
// asking for a new random player each time; a few keyed /placeholders
// callers; and one keyed bot polling /server. Per class it reports the
// success rate, p50/p99 latency and the 429/503/504 counts; from the
// backend's own counters (sim.Lookup) the peak concurrency, the requests
// per station and the main thread's tick lag. Every body sent to an
// anonymous caller is checked for protected fields and for
// meta.authenticated true.
//
// Hostile clients get rounds of their own, each with the same callers
// plus its attackers, who start after the warm-up (-warmup; requests that
// start in it are not counted in any round) and ask for the largest public
// answer, /player of Alex_MC with detailed=true, which the sim makes about
// 3 MB with modded_items (-modded-items), more than loopback's socket
// buffers absorb: -stalled N HTTP/1.1 readers, each on its own connection
// with SO_RCVBUF 2 KiB, read the status line and then nothing; -slow N read
// -slow-bytes every -slow-every; -h2-streams K streams over h2c (at least
// -h2-conns connections) announce a -h2-window byte window and never send a
// WINDOW_UPDATE. They come from -attack-addrs addresses and ask again
// whenever an answer is refused or ended. A -reloads N round reloads the
// statusgate config N times during the flood. The sim is served by the
// harness outside the gateway's config (backend.go), so that a reload does
// not restart it, as it would not restart the plugin. Per round it reports
// the attackers' answers, the process's RSS (VmRSS after a forced GC, after
// the warm-up and at its peak), and a probe: halfway through the attack,
// four identical requests for the large answer from a normal client, timed
// against one trip for it before the attack.
//
// The targets for statusgate are printed as met or missed beside the
// plain figures, and so are its targets under attack (keyed callers and
// pollers unharmed, identical requests not held behind a stalled one, RSS
// within -max-held plus 32 MiB, the backend's concurrency bound kept across
// reloads); they are not enforced, because they measure mechanisms
// (admission control, coalescing, caching) that may not exist yet. The exit
// status is 1 when statusgate sent an anonymous caller a protected field or
// keyed bytes, 2 when the harness cannot run, and 0 otherwise.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/internal/sim"
	"github.com/statusgate/statusgate/test/internal/harness"
)

// config is the harness's flags.
type config struct {
	duration            time.Duration
	warmup              time.Duration
	rounds              int
	pollers             int
	pollInterval        time.Duration
	abuserConns         int
	placeholderCallers  int
	placeholderInterval time.Duration
	botInterval         time.Duration
	clientTimeout       time.Duration
	anonEvents          int
	anonWindow          time.Duration
	placeholderWork     string

	// The hostile clients and the reloads; each kind gets its own rounds.
	stalled     int
	slow        int
	attackAddrs int
	slowBytes   int
	slowEvery   time.Duration
	h2Streams   int
	h2Conns     int
	h2Window    int
	reloads     int
	// hangUps clients from one address ask for what nobody else asks for
	// and hang up after hangUpAfter; hangUpMain: /placeholders (keyed, so
	// that the gateway lets it through), else /player of a random UUID.
	hangUps     int
	hangUpAfter time.Duration
	hangUpMain  bool
	// reloadLimits are the max_in_flight of the reloads in turn; none:
	// each reload loads the round's config again.
	reloadLimits []int
	maxHeld      byteSize
	moddedItems  int
}

func flags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	c.maxHeld = 64 << 20
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "length of each round")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "start of each round that is not counted; the attackers start after it")
	fs.IntVar(&c.rounds, "rounds", 1, "rounds per gateway and kind, interleaved")
	fs.IntVar(&c.pollers, "pollers", 30, "anonymous pollers, one address each (the full run: 300)")
	fs.DurationVar(&c.pollInterval, "poll-interval", 2*time.Second, "each poller's interval")
	fs.IntVar(&c.abuserConns, "abuser-conns", 8, "the abusive client's parallel connections (the full run: 32)")
	fs.IntVar(&c.placeholderCallers, "placeholder-callers", 3, "keyed /placeholders callers")
	fs.DurationVar(&c.placeholderInterval, "placeholder-interval", time.Second, "each placeholder caller's interval")
	fs.DurationVar(&c.botInterval, "bot-interval", time.Second, "the keyed bot's interval")
	fs.DurationVar(&c.clientTimeout, "client-timeout", 10*time.Second, "how long a caller waits for an answer")
	fs.IntVar(&c.anonEvents, "anon-events", 120, "statusgate variant: requests per window per anonymous client address (the plugin's own limit is 120 a minute)")
	fs.DurationVar(&c.anonWindow, "anon-window", time.Minute, "statusgate variant: the rate limit's sliding window")
	fs.StringVar(&c.placeholderWork, "placeholder-work", "", `the sim's /placeholders main-thread work, "<min> [<max>]" (default: the sim's 50ms-2s)`)
	fs.IntVar(&c.stalled, "stalled", 0, "a round of this many stalled HTTP/1.1 readers of the largest public answer (the full run: 64)")
	fs.IntVar(&c.slow, "slow", 0, "a round of this many slow HTTP/1.1 readers of it (the full run: 64)")
	fs.IntVar(&c.attackAddrs, "attack-addrs", 8, "client addresses the stalled and slow readers and streams are spread over")
	fs.IntVar(&c.slowBytes, "slow-bytes", 4096, "a slow reader reads this many bytes ...")
	fs.DurationVar(&c.slowEvery, "slow-every", 500*time.Millisecond, "... every this long")
	fs.IntVar(&c.h2Streams, "h2-streams", 0, "a round of this many stalled HTTP/2 (h2c) streams of the largest public answer (the full run: 1000)")
	fs.IntVar(&c.h2Conns, "h2-conns", 2, "connections the HTTP/2 streams share (more if the server allows fewer streams per connection)")
	fs.IntVar(&c.h2Window, "h2-window", 1024, "the HTTP/2 attacker's SETTINGS_INITIAL_WINDOW_SIZE, never replenished")
	fs.IntVar(&c.hangUps, "hangups", 0, "a round of this many clients from one address, each asking for a random player and hanging up after -hangup-after, again and again (12 in the attack as first reported)")
	fs.DurationVar(&c.hangUpAfter, "hangup-after", 150*time.Millisecond, "how long a hanging-up client waits before it closes its connection")
	fs.BoolVar(&c.hangUpMain, "hangup-placeholders", false, "the hanging-up clients ask for /placeholders of a random player instead (main-thread work; with the bot's key)")
	fs.IntVar(&c.reloads, "reloads", 0, "a statusgate round with this many reloads of its config during the flood (the full run: 10)")
	fs.Func("reload-limits", "the reloads change statusgate's max_in_flight to these in turn, comma-separated (e.g. 4,2,6,8); the round starts at the default 8", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("%q is not a limit of at least 1", f)
			}
			c.reloadLimits = append(c.reloadLimits, n)
		}
		return nil
	})
	fs.Var(&c.maxHeld, "max-held", "statusgate's max_held budget of held response bytes, for the RSS target (64MiB)")
	fs.IntVar(&c.moddedItems, "modded-items", 20000, "the sim's modded_items: makes the largest public answer about 3 MB")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.duration <= 0 || c.rounds < 1 || c.pollers < 0 || c.abuserConns < 0 || c.placeholderCallers < 0 ||
		c.pollInterval <= 0 || c.placeholderInterval <= 0 || c.botInterval <= 0 || c.clientTimeout <= 0 || c.anonEvents < 1 || c.anonWindow <= 0 {
		return c, fmt.Errorf("durations, intervals and -rounds must be positive, counts not negative")
	}
	if c.warmup < 0 || c.warmup >= c.duration {
		return c, fmt.Errorf("-warmup must be shorter than -duration")
	}
	if c.stalled < 0 || c.slow < 0 || c.h2Streams < 0 || c.reloads < 0 || c.hangUps < 0 || c.hangUpAfter <= 0 || c.moddedItems < 0 || c.attackAddrs < 1 || c.h2Conns < 1 ||
		c.slowBytes < 1 || c.slowEvery <= 0 || c.h2Window < 0 || c.h2Window > 1<<31-1 {
		return c, fmt.Errorf("attacker counts must not be negative, -attack-addrs, -h2-conns and -slow-bytes at least 1, -slow-every positive, -h2-window at most 2^31-1")
	}
	return c, nil
}

// byteSize is a flag of bytes: 67108864, 64MiB, 512KiB, 1GiB.
type byteSize int64

func (b *byteSize) String() string { return humanBytes(int64(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// parseBytes reads a whole number of bytes with an optional KiB, MiB or
// GiB suffix.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if rest, ok := strings.CutSuffix(s, suffix); ok {
			s, mult = rest, m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size in bytes (67108864, 64MiB, 512KiB)", s)
	}
	return n * mult, nil
}

// humanBytes writes a size in MiB with one decimal, or in bytes below 1 KiB.
func humanBytes(n int64) string {
	if n > -1024 && n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
}

// The kinds of round. A flood round has the callers only; each attack kind
// adds its attackers after the warm-up; a reload round reloads the
// statusgate config during the flood.
const (
	kindFlood   = "flood"
	kindStalled = "stalled-h1"
	kindSlow    = "slow-h1"
	kindH2      = "stalled-h2"
	kindHangUp  = "hangups"
	kindReload  = "reloads"
)

// kinds are the kinds of round c asks for, in the order they run.
func (c config) kinds() []string {
	k := []string{kindFlood}
	for _, x := range []struct {
		kind string
		n    int
	}{{kindStalled, c.stalled}, {kindSlow, c.slow}, {kindH2, c.h2Streams}, {kindHangUp, c.hangUps}, {kindReload, c.reloads}} {
		if x.n > 0 {
			k = append(k, x.kind)
		}
	}
	return k
}

// kindVariants are the gateways a kind of round runs against: the reloads
// measure statusgate's own bound, which plain reverse_proxy does not have.
func kindVariants(kind string) []string {
	if kind == kindReload {
		return []string{statusgate}
	}
	return variants
}

// attacking reports whether a kind of round has attackers.
func attacking(kind string) bool {
	return kind == kindStalled || kind == kindSlow || kind == kindH2 || kind == kindHangUp
}

// title describes a kind of round for the report.
func (c config) title(kind string) string {
	switch kind {
	case kindStalled:
		return fmt.Sprintf("%d stalled HTTP/1.1 readers of %s from %d addresses (SO_RCVBUF %d, read the status line, then nothing)",
			c.stalled, largePath, c.attackAddrs, fixture.StalledRcvBuf)
	case kindSlow:
		return fmt.Sprintf("%d slow HTTP/1.1 readers of %s from %d addresses (SO_RCVBUF %d, %d bytes every %s)",
			c.slow, largePath, c.attackAddrs, fixture.StalledRcvBuf, c.slowBytes, c.slowEvery)
	case kindH2:
		return fmt.Sprintf("%d stalled HTTP/2 streams (h2c) of %s from %d addresses, over at least %d connections (window %d, never a WINDOW_UPDATE)",
			c.h2Streams, largePath, c.attackAddrs, c.h2Conns, c.h2Window)
	case kindHangUp:
		what := "/player of a random UUID"
		if c.hangUpMain {
			what = "/placeholders of a random UUID, keyed"
		}
		return fmt.Sprintf("%d clients from one address asking for %s, each hanging up after %s, again and again", c.hangUps, what, c.hangUpAfter)
	case kindReload:
		if len(c.reloadLimits) > 0 {
			return fmt.Sprintf("%d reloads of the statusgate config during the flood, max_in_flight 8 then %v in turn (the sim is outside the config and keeps counting)", c.reloads, c.reloadLimits)
		}
		return fmt.Sprintf("%d reloads of the statusgate config during the flood (the sim is outside the config and keeps counting)", c.reloads)
	}
	return "the flood alone (no attackers, no reloads)"
}

func main() {
	c, err := flags(flag.CommandLine, os.Args[1:])
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(2)
	}
	fmt.Print(report(c, results))
	if n := leakedAll(results); n > 0 {
		fmt.Printf("FAIL: statusgate sent %d anonymous bodies with a protected field or keyed bytes\n", n)
		os.Exit(1)
	}
}

// round is what one round measured.
type round struct {
	tallies map[string]*tally
	backend sim.Snapshot

	attack           *attackStats // nil without attackers
	rssBase, rssPeak int64        // settled RSS after the warm-up, and its peak after
	probe            *probe       // nil without attackers
	blocked          int          // gateway sockets with a blocked send, when the probe ran
	reloads          int          // reloads done
	reloadErrs       []string
}

// results are the rounds by kind and gateway.
type results map[string]map[string][]round

// run alternates the gateways for c.rounds rounds of each kind and returns
// the rounds.
func run(ctx context.Context, c config) (results, error) {
	res := results{}
	seq := 0
	for r := range c.rounds {
		for _, k := range c.kinds() {
			if res[k] == nil {
				res[k] = map[string][]round{}
			}
			for _, v := range kindVariants(k) {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				seq++
				rd, err := runRound(ctx, c, k, v, seq)
				if err != nil {
					return nil, fmt.Errorf("%s %s round %d: %v", k, v, r+1, err)
				}
				res[k][v] = append(res[k][v], rd)
				fmt.Fprintf(os.Stderr, "flood: %s %s round %d: %d requests, backend peak in flight %d\n",
					k, v, r+1, rd.requests(), rd.backend.PeakInFlight)
			}
		}
	}
	return res, nil
}

func runRound(ctx context.Context, c config, kind, variant string, seq int) (round, error) {
	be, err := startBackend(c)
	if err != nil {
		return round{}, err
	}
	defer be.stop()
	gw, err := harness.FreePort()
	if err != nil {
		return round{}, err
	}
	cfg, err := adapt(site(c, variant, seq, gw, be.port, 0))
	if err != nil {
		return round{}, err
	}
	if err := load(cfg); err != nil {
		return round{}, err
	}
	defer unload()
	be.stats.Reset()
	start := time.Now()
	fctx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	base := fmt.Sprintf("http://127.0.0.1:%d", gw)
	var res round
	var wg sync.WaitGroup
	wg.Go(func() { res.tallies = flood(fctx, c, base, start.Add(c.warmup)) })
	reload := func(i int) ([]byte, error) {
		if len(c.reloadLimits) == 0 {
			return cfg, nil
		}
		return adapt(site(c, variant, seq, gw, be.port, c.reloadLimits[(i-1)%len(c.reloadLimits)]))
	}
	wg.Go(func() { res.besiege(fctx, c, kind, gw, reload, start) })
	wg.Wait()
	res.backend = be.stats.Snapshot()
	return res, nil
}

// besiege waits out the warm-up, then takes the RSS baseline and samples
// it, and runs the round's attackers and the probe, or its reloads.
//
// reload gives the config of the i-th reload, from 1.
func (r *round) besiege(ctx context.Context, c config, kind string, gw int, reload func(i int) ([]byte, error), start time.Time) {
	if !sleepCtx(ctx, c.warmup) {
		return
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", gw)
	addr := fmt.Sprintf("127.0.0.1:%d", gw)
	tr := &http.Transport{MaxIdleConnsPerHost: probeCount}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: c.clientTimeout}
	if attacking(kind) {
		r.probe = &probe{}
		status, n, d := fetchLarge(ctx, client, base, "198.51.100.7")
		if status == http.StatusOK {
			r.probe.trip, r.probe.tripBytes = d, n
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if rss, err := settledRSS(); err == nil {
		r.rssBase, r.rssPeak = rss, rss
		wg.Go(func() {
			for sleepCtx(ctx, time.Second) {
				if rss, err := settledRSS(); err == nil {
					r.rssPeak = max(r.rssPeak, rss)
				}
			}
		})
	}
	if attacking(kind) {
		r.attack = newAttackStats()
		wg.Go(func() {
			switch kind {
			case kindStalled:
				h1Readers(ctx, addr, c.stalled, c.attackAddrs, 0, 0, r.attack)
			case kindSlow:
				h1Readers(ctx, addr, c.slow, c.attackAddrs, c.slowBytes, c.slowEvery, r.attack)
			case kindH2:
				h2Streams(ctx, addr, c.h2Streams, c.h2Conns, c.attackAddrs, uint32(c.h2Window), r.attack)
			case kindHangUp:
				hangUps(ctx, addr, c.hangUps, c.hangUpAfter, c.hangUpMain, r.attack)
			}
		})
		// Halfway through the attack the pressure is steady.
		if sleepCtx(ctx, (c.duration-c.warmup)/2) {
			r.blocked, _ = blockedSends(gw)
			runProbe(ctx, client, base, r.probe)
		}
	}
	if kind == kindReload {
		for i := 1; i <= c.reloads; i++ {
			at := start.Add(c.warmup + time.Duration(i)*(c.duration-c.warmup)/time.Duration(c.reloads+1))
			if !sleepCtx(ctx, time.Until(at)) {
				break
			}
			cfg, err := reload(i)
			if err == nil {
				err = load(cfg)
			}
			if err != nil {
				r.reloadErrs = append(r.reloadErrs, err.Error())
				continue
			}
			r.reloads++
		}
	}
}

func (r round) requests() int {
	n := 0
	for _, t := range r.tallies {
		n += t.total()
	}
	return n
}

// leaked counts the anonymous bodies that carried a protected field or
// keyed bytes, or were a 200 that is not an envelope, over all rounds.
func leaked(rounds []round) int {
	n := 0
	for _, r := range rounds {
		for cl, t := range r.tallies {
			if anonymous(cl) {
				n += t.leaks + t.keyed + t.bad
			}
		}
	}
	return n
}

// merged sums one class's tallies over the rounds.
func merged(rounds []round, class string) *tally {
	m := newTally()
	for _, r := range rounds {
		t := r.tallies[class]
		m.latencies = append(m.latencies, t.latencies...)
		for s, n := range t.status {
			m.status[s] += n
		}
		m.leaks += t.leaks
		m.keyed += t.keyed
		m.bad += t.bad
	}
	slices.Sort(m.latencies)
	return m
}

// leakedAll is leaked over every kind of round.
func leakedAll(res results) int {
	n := 0
	for _, byVariant := range res {
		n += leaked(byVariant[statusgate])
	}
	return n
}

func report(c config, res results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nflood: %d round(s) of %s per gateway and kind (the first %s not counted), interleaved; %d pollers every %s, abuser on %d connections, %d placeholder callers every %s, keyed bot every %s\n",
		c.rounds, c.duration, c.warmup, c.pollers, c.pollInterval, c.abuserConns, c.placeholderCallers, c.placeholderInterval, c.botInterval)
	if len(c.kinds()) > 1 {
		fmt.Fprintf(&b, "the largest public answer: %s, the sim with modded_items %d (%s through statusgate, filtered)\n",
			largePath, c.moddedItems, largeSize(res))
	}
	for _, k := range c.kinds() {
		vs := kindVariants(k)
		byVariant := res[k]
		fmt.Fprintf(&b, "\n== %s: %s\n\n", k, c.title(k))
		fmt.Fprintf(&b, "%-20s %-10s %7s %7s %9s %9s %6s %6s %6s %6s %6s\n", "class", "gateway", "reqs", "ok%", "p50", "p99", "429", "503", "504", "err", "leaks")
		for _, cl := range classes {
			for _, v := range vs {
				t := merged(byVariant[v], cl)
				leaks := "-"
				if anonymous(cl) {
					leaks = fmt.Sprint(t.leaks + t.keyed + t.bad)
				}
				fmt.Fprintf(&b, "%-20s %-10s %7d %7s %9s %9s %6d %6d %6d %6d %6s\n", cl, v, t.total(), pct(t.ok(), t.total()),
					ms(harness.Percentile(t.latencies, 50)), ms(harness.Percentile(t.latencies, 99)),
					t.status[429], t.status[503], t.status[504], t.status[0], leaks)
			}
		}
		if attacking(k) {
			fmt.Fprintf(&b, "\nattackers (summed over rounds; peak held: the worst round)\n")
			b.WriteString(attackHeader())
			b.WriteString(attackNote())
			for _, v := range vs {
				b.WriteString(attackLine(v, byVariant[v]))
			}
		}
		fmt.Fprintf(&b, "\nbackend (worst round; requests summed over rounds)\n")
		fmt.Fprintf(&b, "%-10s %9s %9s %9s %10s %10s %8s %8s %8s\n", "gateway", "peak in", "peak busy", "peak queue", "queue max", "tick lag", "tasks", "timeouts", "requests")
		for _, v := range vs {
			bk := backendSummary(byVariant[v])
			fmt.Fprintf(&b, "%-10s %9d %9d %9d %10s %10s %8d %8d %8d\n", v, bk.PeakInFlight, bk.PeakBusy, bk.PeakQueued,
				ms(bk.QueueWaitMax), ms(bk.MainThread.LagMax), bk.MainThread.Tasks, bk.MainThread.Timeouts, bk.Requests)
		}
		fmt.Fprintf(&b, "\nbackend requests per station\n")
		for _, v := range vs {
			bk := backendSummary(byVariant[v])
			var parts []string
			for _, name := range slices.Sorted(maps.Keys(bk.Stations)) {
				parts = append(parts, fmt.Sprintf("%s %d", name, bk.Stations[name].Requests))
			}
			fmt.Fprintf(&b, "  %-10s %s\n", v, strings.Join(parts, ", "))
		}
		fmt.Fprintf(&b, "\nprocess RSS after a forced GC (Caddy, the sim and the harness; worst round)\n")
		for _, v := range vs {
			base, peak := rssGrowth(byVariant[v])
			fmt.Fprintf(&b, "  %-10s baseline %s, peak %s, growth %s\n", v, humanBytes(base), humanBytes(peak), humanBytes(peak-base))
		}
		if attacking(k) {
			fmt.Fprintf(&b, "\nprobe: %d identical requests for the large answer from one normal client, halfway through the attack (worst round)\n", probeCount)
			for _, v := range vs {
				b.WriteString(probeLine(v, byVariant[v]))
			}
		}
		if k == kindReload {
			for _, v := range vs {
				done, errs := 0, 0
				for _, r := range byVariant[v] {
					done += r.reloads
					errs += len(r.reloadErrs)
				}
				fmt.Fprintf(&b, "\nreloads: %s %d done, %d failed", v, done, errs)
				for _, r := range byVariant[v] {
					for _, e := range r.reloadErrs {
						fmt.Fprintf(&b, "\n  %s", e)
					}
				}
				b.WriteString("\n")
			}
		}
	}
	b.WriteString("\n" + floodTargets(res[kindFlood]))
	if len(c.kinds()) > 1 {
		b.WriteString("\n" + targets(c, res))
	}
	return b.String()
}

// largeSize is the size of the large answer as statusgate sent it before
// an attack, or "-".
func largeSize(res results) string {
	for _, k := range []string{kindStalled, kindSlow, kindH2} {
		for _, r := range res[k][statusgate] {
			if r.probe != nil && r.probe.tripBytes > 0 {
				return fmt.Sprintf("%d bytes", r.probe.tripBytes)
			}
		}
	}
	return "size not measured"
}

func attackHeader() string {
	return fmt.Sprintf("  %-10s %8s %7s %7s %7s %7s %7s %9s %7s %10s %6s\n",
		"gateway", "requests", "200", "429", "503", "other", "no ans", "peak held", "ended", "bytes read", "conns")
}

// attackNote says what the attackers' columns count.
func attackNote() string {
	return "  (requests: requests or streams sent; no ans: no status by the round's end, or the connection cut before it; peak held: 200s held open at once; ended: held 200s the gateway closed, reset or finished)\n"
}

// attackLine sums one gateway's attackers over the rounds: requests (or
// streams), answers by status, the most held at once, how many held
// answers the gateway ended, the bytes read and the connections used.
func attackLine(v string, rounds []round) string {
	a := newAttackStats()
	for _, r := range rounds {
		if r.attack != nil {
			a.merge(r.attack)
		}
	}
	other, answered := 0, 0
	for s, n := range a.status {
		if s != 0 {
			answered += n
		}
		if s != 0 && s != 200 && s != 429 && s != 503 {
			other += n
		}
	}
	conns := "-" // HTTP/1.1: one per request
	if a.conns > 0 {
		conns = strconv.Itoa(a.conns)
	}
	return fmt.Sprintf("  %-10s %8d %7d %7d %7d %7d %7d %9d %7d %10s %6s\n",
		v, a.requests, a.status[200], a.status[429], a.status[503], other, a.requests-answered, a.peakHold, a.ended, humanBytes(a.bytes), conns)
}

// rssGrowth is the round with the largest RSS growth: its baseline and peak.
func rssGrowth(rounds []round) (base, peak int64) {
	for i, r := range rounds {
		if i == 0 || r.rssPeak-r.rssBase > peak-base {
			base, peak = r.rssBase, r.rssPeak
		}
	}
	return base, peak
}

// probeMet reports whether every probe request of every round got a 200
// within that round's trip plus 100 ms, and returns the worst request's
// excess over its trip (a request without a 200 counts as an hour).
func probeMet(rounds []round) (met bool, excess time.Duration) {
	met = len(rounds) > 0
	for _, r := range rounds {
		p := r.probe
		if p == nil || p.trip == 0 || len(p.statuses) != probeCount {
			met, excess = false, time.Hour
			continue
		}
		for i, d := range p.latencies {
			x := d - p.trip
			if p.statuses[i] != http.StatusOK {
				x = time.Hour
			}
			excess = max(excess, x)
		}
	}
	return met && excess <= 100*time.Millisecond, excess
}

// targets checks the targets under attack for statusgate, with
// plain's figures beside. They are reported, not enforced.
func targets(c config, res results) string {
	var b strings.Builder
	line := func(met bool, format string, args ...any) {
		mark := "missed"
		if met {
			mark = "met   "
		}
		fmt.Fprintf(&b, "  [%s] %s\n", mark, fmt.Sprintf(format, args...))
	}
	p99 := func(t *tally) time.Duration { return harness.Percentile(t.latencies, 99) }
	b.WriteString("targets under attack for statusgate (plain reverse_proxy beside; p99 compared with the same gateway's flood round, which has the same callers and no attackers)\n")
	for _, k := range []string{kindStalled, kindH2} {
		if res[k] == nil {
			continue
		}
		label := fmt.Sprintf("%d stalled HTTP/1.1 readers", c.stalled)
		if k == kindH2 {
			label = fmt.Sprintf("%d stalled HTTP/2 streams", c.h2Streams)
		}
		for _, cl := range []string{classPlaceholders, classBot} {
			g, g0 := merged(res[k][statusgate], cl), merged(res[kindFlood][statusgate], cl)
			p, p0 := merged(res[k][plain], cl), merged(res[kindFlood][plain], cl)
			line(g.total() > 0 && g.status[http.StatusOK] == g.total() && float64(p99(g)) <= 1.2*float64(p99(g0)),
				"%s: %s 100%% 200, p99 within 20%% of the flood round's: statusgate %s%% p99 %s (flood round %s), plain %s%% p99 %s (flood round %s)",
				label, cl, pct(g.status[http.StatusOK], g.total()), ms(p99(g)), ms(p99(g0)),
				pct(p.status[http.StatusOK], p.total()), ms(p99(p)), ms(p99(p0)))
		}
		anon := func(v string) *tally {
			t := merged(res[k][v], classStatus)
			pl := merged(res[k][v], classPlayer)
			t.latencies = append(t.latencies, pl.latencies...)
			for s, n := range pl.status {
				t.status[s] += n
			}
			return t
		}
		g, p := anon(statusgate), anon(plain)
		line(g.total() > 0 && 100*g.status[http.StatusOK] >= 99*g.total(),
			"%s: anonymous pollers of /status and /player >= 99%% 200: statusgate %s%%, plain %s%%",
			label, pct(g.status[http.StatusOK], g.total()), pct(p.status[http.StatusOK], p.total()))
		gm, gx := probeMet(res[k][statusgate])
		_, px := probeMet(res[k][plain])
		line(gm, "%s: %d identical requests behind a stalled one, each within one trip + 100 ms: statusgate worst %s over its trip, plain %s",
			label, probeCount, excess(gx), excess(px))
	}
	if res[kindH2] != nil {
		gb, gp := rssGrowth(res[kindH2][statusgate])
		pb, pp := rssGrowth(res[kindH2][plain])
		budget := int64(c.maxHeld) + 32<<20
		line(gp-gb <= budget && gp-gb <= pp-pb,
			"%d stalled HTTP/2 streams: RSS growth within max_held + 32 MiB (%s) and no more than plain's: statusgate %s, plain %s",
			c.h2Streams, humanBytes(budget), humanBytes(gp-gb), humanBytes(pp-pb))
	}
	if res[kindReload] != nil {
		bk := backendSummary(res[kindReload][statusgate])
		done := 0
		for _, r := range res[kindReload][statusgate] {
			done += r.reloads
		}
		highest := maxInFlight // the round's own config
		if len(c.reloadLimits) > 0 {
			highest = max(highest, slices.Max(c.reloadLimits))
		}
		line(bk.PeakInFlight <= highest && done == c.reloads*c.rounds,
			"%d reloads during a flood: the backend's peak in flight never above the highest max_in_flight in force (%d): statusgate %d, with %d of %d reloads done",
			c.reloads, highest, bk.PeakInFlight, done, c.reloads*c.rounds)
	}
	return b.String()
}

// excess writes a probe's worst excess over its trip.
func excess(d time.Duration) string {
	if d >= time.Hour {
		return "(a request without a 200)"
	}
	return ms(d)
}

func probeLine(v string, rounds []round) string {
	var parts []string
	var trip time.Duration
	for _, r := range rounds {
		if r.probe == nil {
			continue
		}
		trip = r.probe.trip
		for i, d := range r.probe.latencies {
			parts = append(parts, fmt.Sprintf("%d in %s", r.probe.statuses[i], ms(d)))
		}
		parts = append(parts, fmt.Sprintf("(gateway sockets with a blocked send: %d)", r.blocked))
	}
	return fmt.Sprintf("  %-10s trip before the attack %s; %s\n", v, ms(trip), strings.Join(parts, ", "))
}

// backendSummary is the worst of each peak over the rounds, and the sums
// of the counts.
func backendSummary(rounds []round) sim.Snapshot {
	s := sim.Snapshot{Stations: map[string]sim.StationStats{}}
	for _, r := range rounds {
		b := r.backend
		s.PeakInFlight = max(s.PeakInFlight, b.PeakInFlight)
		s.PeakBusy = max(s.PeakBusy, b.PeakBusy)
		s.PeakQueued = max(s.PeakQueued, b.PeakQueued)
		s.QueueWaitMax = max(s.QueueWaitMax, b.QueueWaitMax)
		s.MainThread.LagMax = max(s.MainThread.LagMax, b.MainThread.LagMax)
		s.MainThread.Tasks += b.MainThread.Tasks
		s.MainThread.Timeouts += b.MainThread.Timeouts
		s.Requests += b.Requests
		for k, st := range b.Stations {
			cur := s.Stations[k]
			cur.Requests += st.Requests
			cur.PeakInFlight = max(cur.PeakInFlight, st.PeakInFlight)
			s.Stations[k] = cur
		}
	}
	return s
}

// floodTargets checks the targets for statusgate, with plain's figure for
// comparison.
func floodTargets(results map[string][]round) string {
	if len(results) == 0 {
		return ""
	}
	var b strings.Builder
	p, g := backendSummary(results[plain]), backendSummary(results[statusgate])
	line := func(met bool, format string, args ...any) {
		mark := "missed"
		if met {
			mark = "met   "
		}
		fmt.Fprintf(&b, "  [%s] %s\n", mark, fmt.Sprintf(format, args...))
	}
	b.WriteString("targets for statusgate (plain reverse_proxy beside)\n")
	line(g.PeakInFlight <= maxInFlight, "backend concurrency <= 8: statusgate %d, plain %d", g.PeakInFlight, p.PeakInFlight)
	// One /placeholders request's own main-thread work is at most the
	// resolve timeout, 2 s.
	line(g.MainThread.LagMax <= 2*time.Second, "main-thread tick lag <= one placeholders request's work (2 s): statusgate %s, plain %s",
		ms(g.MainThread.LagMax), ms(p.MainThread.LagMax))
	bot, pbot := merged(results[statusgate], classBot), merged(results[plain], classBot)
	line(bot.total() > 0 && bot.ok()*100 >= 99*bot.total() && harness.Percentile(bot.latencies, 99) <= 2*time.Second,
		"keyed bot >= 99%% ok with p99 <= 2 s: statusgate %s %s, plain %s %s",
		pct(bot.ok(), bot.total()), ms(harness.Percentile(bot.latencies, 99)), pct(pbot.ok(), pbot.total()), ms(harness.Percentile(pbot.latencies, 99)))
	st, pst := merged(results[statusgate], classStatus), merged(results[plain], classStatus)
	line(st.total() > 0 && harness.Percentile(st.latencies, 99) <= 50*time.Millisecond, "anonymous /status p99 <= 50 ms: statusgate %s, plain %s",
		ms(harness.Percentile(st.latencies, 99)), ms(harness.Percentile(pst.latencies, 99)))
	gs, ps := g.Stations["status"].Requests, p.Stations["status"].Requests
	line(ps > 0 && gs*50 <= ps, "backend /status requests >= 50x fewer than plain: statusgate %d, plain %d", gs, ps)
	line(leaked(results[statusgate]) == 0, "anonymous bodies with a protected field or keyed bytes: statusgate %d, plain %d",
		leaked(results[statusgate]), leaked(results[plain]))
	return b.String()
}

func pct(n, total int) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", 100*float64(n)/float64(total))
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
