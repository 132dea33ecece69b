// Command flood measures what a flood of callers does to the ServerAPI
// backend behind plain reverse_proxy and behind statusgate, side by side.
//
//	bash scripts/flood.sh                     # smoke run: 30 pollers, 5 s a round, 1 round each
//	bash scripts/flood.sh -pollers 300 -duration 60s -rounds 3 -abuser-conns 32   # the full run
//
// Each round loads one config into an in-process Caddy: the gateway on a
// loopback port in front of statusgate_sim, the capacity-modelled backend
// (8 HTTP threads with an unbounded queue, an offline player up to 1.4 s,
// /placeholders work up to 2 s on a 20 TPS main thread). The gateway is
// either plain reverse_proxy with the README's timeouts, or statusgate
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
// The bars for statusgate are printed as met or missed beside the
// plain figures; they are not enforced, because they measure mechanisms
// (admission control, coalescing, caching) that may not exist yet. The exit
// status is 1 when statusgate sent an anonymous caller a protected field or
// keyed bytes, 2 when the harness cannot run, and 0 otherwise.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/statusgate/statusgate/internal/sim"
	"github.com/statusgate/statusgate/test/internal/harness"
)

// config is the harness's flags.
type config struct {
	duration            time.Duration
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
}

func flags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "length of each round")
	fs.IntVar(&c.rounds, "rounds", 1, "rounds per gateway, interleaved")
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
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.duration <= 0 || c.rounds < 1 || c.pollers < 0 || c.abuserConns < 0 || c.placeholderCallers < 0 ||
		c.pollInterval <= 0 || c.placeholderInterval <= 0 || c.botInterval <= 0 || c.clientTimeout <= 0 || c.anonEvents < 1 || c.anonWindow <= 0 {
		return c, fmt.Errorf("durations, intervals and -rounds must be positive, counts not negative")
	}
	return c, nil
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
	if n := leaked(results[statusgate]); n > 0 {
		fmt.Printf("FAIL: statusgate sent %d anonymous bodies with a protected field or keyed bytes\n", n)
		os.Exit(1)
	}
}

// round is what one round measured.
type round struct {
	tallies map[string]*tally
	backend sim.Snapshot
}

// run alternates the gateways for c.rounds rounds each and returns the
// rounds by gateway.
func run(ctx context.Context, c config) (map[string][]round, error) {
	results := map[string][]round{}
	for r := range c.rounds {
		for _, v := range variants {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			res, err := runRound(ctx, c, v, r)
			if err != nil {
				return nil, fmt.Errorf("%s round %d: %v", v, r+1, err)
			}
			results[v] = append(results[v], res)
			fmt.Fprintf(os.Stderr, "flood: %s round %d: %d requests, backend peak in flight %d\n",
				v, r+1, res.requests(), res.backend.PeakInFlight)
		}
	}
	return results, nil
}

func runRound(ctx context.Context, c config, variant string, r int) (round, error) {
	gw, err := harness.FreePort()
	if err != nil {
		return round{}, err
	}
	be, err := harness.FreePort()
	if err != nil {
		return round{}, err
	}
	if err := load(site(c, variant, r, gw, be)); err != nil {
		return round{}, err
	}
	defer unload()
	st := sim.Lookup(simName)
	if st == nil {
		return round{}, fmt.Errorf("the sim did not register as %q", simName)
	}
	st.Reset()
	fctx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	tallies := flood(fctx, c, fmt.Sprintf("http://127.0.0.1:%d", gw))
	return round{tallies: tallies, backend: st.Snapshot()}, nil
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

func report(c config, results map[string][]round) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nflood: %d round(s) of %s per gateway, interleaved; %d pollers every %s, abuser on %d connections, %d placeholder callers every %s, keyed bot every %s\n\n",
		c.rounds, c.duration, c.pollers, c.pollInterval, c.abuserConns, c.placeholderCallers, c.placeholderInterval, c.botInterval)
	fmt.Fprintf(&b, "%-20s %-10s %7s %7s %9s %9s %6s %6s %6s %6s %6s\n", "class", "gateway", "reqs", "ok%", "p50", "p99", "429", "503", "504", "err", "leaks")
	for _, cl := range classes {
		for _, v := range variants {
			t := merged(results[v], cl)
			leaks := "-"
			if anonymous(cl) {
				leaks = fmt.Sprint(t.leaks + t.keyed + t.bad)
			}
			fmt.Fprintf(&b, "%-20s %-10s %7d %7s %9s %9s %6d %6d %6d %6d %6s\n", cl, v, t.total(), pct(t.ok(), t.total()),
				ms(harness.Percentile(t.latencies, 50)), ms(harness.Percentile(t.latencies, 99)),
				t.status[429], t.status[503], t.status[504], t.status[0], leaks)
		}
	}
	fmt.Fprintf(&b, "\nbackend (worst round; requests summed over rounds)\n")
	fmt.Fprintf(&b, "%-10s %9s %9s %9s %10s %10s %8s %8s %8s\n", "gateway", "peak in", "peak busy", "peak queue", "queue max", "tick lag", "tasks", "timeouts", "requests")
	for _, v := range variants {
		bk := backendSummary(results[v])
		fmt.Fprintf(&b, "%-10s %9d %9d %9d %10s %10s %8d %8d %8d\n", v, bk.PeakInFlight, bk.PeakBusy, bk.PeakQueued,
			ms(bk.QueueWaitMax), ms(bk.MainThread.LagMax), bk.MainThread.Tasks, bk.MainThread.Timeouts, bk.Requests)
	}
	fmt.Fprintf(&b, "\nbackend requests per station\n")
	for _, v := range variants {
		bk := backendSummary(results[v])
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(bk.Stations)) {
			parts = append(parts, fmt.Sprintf("%s %d", name, bk.Stations[name].Requests))
		}
		fmt.Fprintf(&b, "  %-10s %s\n", v, strings.Join(parts, ", "))
	}
	b.WriteString("\n" + bars(results))
	return b.String()
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

// bars checks the targets for statusgate, with plain's figure for
// comparison.
func bars(results map[string][]round) string {
	var b strings.Builder
	p, g := backendSummary(results[plain]), backendSummary(results[statusgate])
	line := func(met bool, format string, args ...any) {
		mark := "missed"
		if met {
			mark = "met   "
		}
		fmt.Fprintf(&b, "  [%s] %s\n", mark, fmt.Sprintf(format, args...))
	}
	b.WriteString("bars for statusgate (plain reverse_proxy beside)\n")
	line(g.PeakInFlight <= 8, "backend concurrency <= 8: statusgate %d, plain %d", g.PeakInFlight, p.PeakInFlight)
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
