package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/internal/sim"
	"github.com/statusgate/statusgate/test/internal/harness"
)

// The keys the gateways accept: the first, then the one it is rotated to.
const (
	oldKey = "cluster-old-key-5d0f2a9c71e4"
	newKey = "cluster-new-key-b83e6f0d4a12"
)

// alex is a player who is always online: /placeholders for him reaches the
// main thread.
const alex = "40094f2f-ca8f-4826-8b31-11e0f4c449df"

// The beginnings of what the gateways log about each other (internal/peers)
// and about Redis (internal/redislog).
const (
	warnSharedID     = "another gateway process has this one's instance ID"
	warnOtherBackend = "gateways of another backend write to this storage"
	warnUnclaimed    = "another Caddy instance writes distributed rate-limit states"
	warnInstances    = "another gateway of this backend has a different instances"
	warnGateways     = "more gateway processes of this backend"
	warnLane         = "another gateway of this backend has the main-thread lane open too"
	redisFailing     = "Redis is failing"
	redisBack        = "Redis answers again"
	// caddy-ratelimit's line for a state it listed and could not load.
	rateLimitLoadFailed = "http.handlers.rate_limit: unable to load distributed rate limiter state"
)

// waitWarned waits until each gateway has logged, since its offset, a line
// that starts with msg, and returns how long each took from start.
func waitWarned(t *testing.T, start time.Time, msg string, gws []*gateway, offsets map[*gateway]int64) map[string]time.Duration {
	t.Helper()
	took := map[string]time.Duration{}
	for deadline := time.Now().Add(fixture.Patience); len(took) < len(gws); time.Sleep(100 * time.Millisecond) {
		for _, g := range gws {
			if _, done := took[g.name]; !done && len(g.warnings(offsets[g], msg)) > 0 {
				took[g.name] = time.Since(start)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: after %v only %v had warned", msg, fixture.Patience, took)
		}
	}
	return took
}

// beats is the seq of g's heartbeat, 0 while it has none.
func (r *redisServer) beats(t *testing.T, g *gateway) uint64 {
	t.Helper()
	hb, _, err := r.heartbeat(g)
	if err != nil {
		t.Fatal(err)
	}
	return hb.Seq
}

// cluster is what each test starts: a sim backend process (8 threads, the
// plugin's unbounded queue and main thread), a redis-server, and the two
// gateway processes a and b of survival, with their own data directories
// and the shared Redis storage, at instances 2 and oldKey; a owns the
// main-thread lane, b forwards /placeholders to it. Each test has its own,
// on ports of its own, so that the two run at once (t.Parallel): what they
// measure is each its own cluster's, and together they take the time of
// the longer.
type cluster struct {
	ctx        context.Context
	root       string
	bin        string
	rds        *redisServer // the Redis of the moment: a test restarts it
	simPort    int
	survival   string // how the gateways of survival name their backend in heartbeats and warnings
	dirA, dirB string
	a, b       *gateway // b of the moment: a test kills and restarts it
}

// startCluster starts a cluster, stopped when the test ends; it skips the
// test where there is no redis-server, unless STATUSGATE_REQUIRE_REDIS is
// set.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("runs five processes for about a minute and a half")
	}
	c := &cluster{ctx: context.Background(), root: t.TempDir()}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// One build per checkout, kept between runs: Build reuses it while it
	// is newer than every source of the binary, and builds it once for
	// the tests and packages that want it at once.
	c.bin = harness.CheckoutBinary(repo)
	msg, err := harness.Build(repo, c.bin, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(msg)

	c.rds, err = startRedis(c.ctx, c.root)
	if errors.Is(err, ErrNoRedis) && os.Getenv("STATUSGATE_REQUIRE_REDIS") == "" {
		t.Skip("the cluster test needs Redis: " + err.Error() + "; STATUSGATE_REQUIRE_REDIS=1 makes this a failure")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.rds.kill() })

	c.simPort, err = harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	simProc, err := harness.Start(c.ctx, c.bin, c.dir(t, "sim"), "sim", c.simPort, simCaddyfile(c.simPort))
	// How the gateways of survival name their backend in heartbeats and
	// warnings: the upstream they declare.
	c.survival = "127.0.0.1:" + strconv.Itoa(c.simPort) + " (declaration "
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(simProc.Stop)

	c.dirA, c.dirB = c.dir(t, "a"), c.dir(t, "b")
	c.a, err = startGateway(c.ctx, c.bin, c.dirA, "a", c.conf(oldKey, 2, nil), c.rds.port, c.simPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.a.proc.Stop)
	c.b, err = startGateway(c.ctx, c.bin, c.dirB, "b", c.conf(oldKey, 2, c.a), c.rds.port, c.simPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.b.proc.Stop() })
	return c
}

// dir is the cluster's folder name, made if need be.
func (c *cluster) dir(t *testing.T, name string) string {
	d := filepath.Join(c.root, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// conf is a gateway of survival: key accepted, instances, and the gateway
// that owns the main-thread lane (nil: this one).
func (c *cluster) conf(key string, instances int, owner *gateway) gatewayConfig {
	gc := gatewayConfig{instances: instances, key: key}
	if owner != nil {
		gc.placeholdersTo = "127.0.0.1:" + strconv.Itoa(owner.port)
	}
	return gc
}

// TestTwoGateways runs docs/cluster.md: a sim backend process (8 threads,
// the plugin's unbounded queue and main thread), a redis-server, and two
// gateway processes with their own data directories and the shared Redis
// storage (startCluster), then checks what the backend and the rate limit
// see: the backend's concurrency held to one gateway's worth by instances 2
// (and doubled without it), the main-thread lane on one gateway, a key
// rotated by reloading each, two deployments on one Redis, and Redis
// killed. It also starts a third gateway on the second's data directory,
// which shares its instance ID, and checks that the gateways say so.
// TestTwoGatewaysOneKilled, beside it, measures the distributed rate limit
// and kills a gateway. About a minute and a half each; the figures go to
// the test log (go test -v) and docs/cluster.md.
func TestTwoGateways(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx, root, bin, simPort, survival, conf := c.ctx, c.root, c.bin, c.simPort, c.survival, c.conf
	dir := func(name string) string { return c.dir(t, name) }
	rds, a, b, dirB := c.rds, c.a, c.b, c.dirB
	both := []*gateway{a, b}

	t.Run("startup logs the share", func(t *testing.T) {
		for _, g := range both {
			lines, _ := g.logLines(0)
			i := slices.IndexFunc(lines, func(m map[string]any) bool {
				return strings.HasPrefix(fmt.Sprint(m["msg"]), "one of several gateways")
			})
			if i < 0 {
				t.Errorf("%s logged no share at startup", g.name)
				continue
			}
			m := lines[i]
			if m["instances"] != 2.0 || m["max_in_flight"] != 4.0 || m["queue_length"] != 32.0 {
				t.Errorf("%s: share %v", g.name, m)
			}
			t.Logf("%s: %v", g.name, m["main_thread_lane"])
		}
	})

	t.Run("a shared data directory is warned about", func(t *testing.T) {
		// c is started from b's data directory: b's instance ID.
		c, err := startGateway(ctx, bin, dirB, "c", conf(oldKey, 2, a), rds.port, simPort)
		start := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		defer c.proc.Stop()
		// How soon each warned is counted in its own beats since c
		// started (c's count from none), which a busy machine spaces out
		// but cannot make more of: another live process shows within two.
		from := map[*gateway]uint64{b: rds.beats(t, b), c: 0}
		took, beats := map[string]time.Duration{}, map[string]uint64{}
		fixture.WaitEvery(t, "both gateways on one data directory to warn of it", 100*time.Millisecond, func() bool {
			for g := range from {
				if _, done := beats[g.name]; done {
					continue
				}
				if w := g.warnings(0, warnSharedID); len(w) > 0 {
					at, err := rds.warnedAt(g, w[0])
					if err != nil {
						t.Fatal(err)
					}
					took[g.name], beats[g.name] = time.Since(start), at-from[g]
				}
			}
			return len(beats) == len(from)
		})
		t.Logf("the two gateways on one data directory warned %v after the second started, at beat %v of their own since", took, beats)
		within := uint64(10 * time.Second / beatInterval)
		for name, n := range beats {
			if n > within {
				t.Errorf("%s warned of the shared instance ID at its beat %d since the second process started, want within %d (10 s at the default interval)", name, n, within)
			}
		}
		if w := a.warnings(0, warnSharedID); len(w) > 0 {
			t.Errorf("a, with a data directory of its own, warned of a shared instance ID: %v", w)
		}
		// Until now every gateway of the cluster agreed, in a storage of
		// its own: nobody warned of anything else.
		for _, g := range both {
			if w := g.warnings(0, warnOtherBackend, warnUnclaimed, warnInstances, warnLane); len(w) > 0 {
				t.Errorf("%s warned: %v", g.name, w)
			}
		}
	})

	currentKey := oldKey // the key the gateways accept at the moment
	// A slow /player flood from 24 clients and keyed /placeholders from 4,
	// to both gateways in turn, as a load balancer would send them.
	backendFlood := func(t *testing.T, gws []*gateway, d time.Duration) (sim.Snapshot, map[string]map[int]int, map[string]map[int]int) {
		if _, err := simStats(simPort); err != nil {
			t.Fatal(err)
		}
		var players, placeholders []result
		var wg sync.WaitGroup
		wg.Go(func() {
			players = flood(ctx, gws, 24, d, func(w int) (string, string, http.Header) {
				return "/api/v1/player/" + randomUUID(), fmt.Sprintf("10.0.0.%d", w+1), nil
			})
		})
		wg.Go(func() {
			placeholders = flood(ctx, gws, 4, d, func(w int) (string, string, http.Header) {
				return "/api/v1/placeholders?uuid=" + alex + "&p=player_name", fmt.Sprintf("10.0.1.%d", w+1), http.Header{"X-Api-Key": {currentKey}}
			})
		})
		wg.Wait()
		snap, err := simStats(simPort)
		if err != nil {
			t.Fatal(err)
		}
		for what, rs := range map[string][]result{"player": players, "placeholders": placeholders} {
			if e := firstErrors(rs, 3); e != "" {
				t.Errorf("%s: requests without an answer: %s", what, e)
			}
		}
		return snap, tally(players), tally(placeholders)
	}

	t.Run("instances 2 holds the backend to 8", func(t *testing.T) {
		snap, players, placeholders := backendFlood(t, both, 10*time.Second)
		ph := snap.Stations["placeholders"]
		t.Logf("instances 2: backend peak in flight %d (busy %d, queued %d), %d /player, main-thread peak %d (%d tasks, %d skipped ticks, %d timeouts); /player %v, /placeholders %v",
			snap.PeakInFlight, snap.PeakBusy, snap.PeakQueued, snap.Stations["player"].Requests, ph.PeakInFlight, snap.MainThread.Tasks, snap.MainThread.SkippedTicks, snap.MainThread.Timeouts, players, placeholders)
		if snap.PeakInFlight > 8 || snap.PeakQueued != 0 {
			t.Errorf("backend peak in flight %d, queued %d; want at most 8 and an empty queue", snap.PeakInFlight, snap.PeakQueued)
		}
		if ph.PeakInFlight > 1 {
			t.Errorf("main-thread station peak %d, want 1", ph.PeakInFlight)
		}
		if snap.Stations["player"].Requests == 0 || ph.Requests == 0 || placeholders["b"][http.StatusOK] == 0 {
			t.Errorf("the flood did not reach the backend through both: %v %v", players, placeholders)
		}
	})

	t.Run("instances 1 against 2 warns on both", func(t *testing.T) {
		offsets := map[*gateway]int64{a: a.logSize(), b: b.logSize()}
		if err := a.reload(conf(oldKey, 1, nil), rds.port, simPort); err != nil {
			t.Fatal(err)
		}
		took := waitWarned(t, time.Now(), warnInstances, both, offsets)
		t.Logf("a at instances 1, b at 2: both warned, after %v", took)
		for _, g := range both {
			w := g.warnings(offsets[g], warnInstances)
			if len(w) != 1 {
				t.Errorf("%s warned %d times, want once", g.name, len(w))
			}
			want := map[string][2]float64{"a": {1, 2}, "b": {2, 1}}[g.name]
			if w[0]["instances"] != want[0] || w[0]["other_instances"] != want[1] || !strings.HasPrefix(fmt.Sprint(w[0]["backend"]), survival) {
				t.Errorf("%s: %v", g.name, w[0])
			}
		}
	})

	t.Run("control: each gateway at 8 doubles it", func(t *testing.T) {
		offsets := map[*gateway]int64{a: a.logSize(), b: b.logSize()}
		for _, g := range both {
			if err := g.reload(conf(oldKey, 1, nil), rds.port, simPort); err != nil {
				t.Fatal(err)
			}
		}
		lanes := time.Now()
		snap, players, placeholders := backendFlood(t, both, 10*time.Second)
		ph := snap.Stations["placeholders"]
		t.Logf("control: backend peak in flight %d (busy %d, queued %d, longest wait %v), main-thread peak %d (%d skipped ticks, %d timeouts); /player %v, /placeholders %v",
			snap.PeakInFlight, snap.PeakBusy, snap.PeakQueued, snap.QueueWaitMax.Round(time.Millisecond), ph.PeakInFlight, snap.MainThread.SkippedTicks, snap.MainThread.Timeouts, players, placeholders)
		if snap.PeakInFlight <= 8 {
			t.Errorf("control: backend peak %d, want more than 8: the flood does not show what instances prevents", snap.PeakInFlight)
		}
		if ph.PeakInFlight <= 1 {
			t.Errorf("control: main-thread peak %d, want more than 1", ph.PeakInFlight)
		}
		// Both hold the main-thread lane, which each says.
		took := waitWarned(t, lanes, warnLane, both, offsets)
		t.Logf("the main-thread lane open on both: both warned, after %v", took)
	})

	t.Run("a key rotated by reloading each gateway", func(t *testing.T) {
		// Back to the cluster, with the new key instead of the old one,
		// one gateway after the other, while keyed callers ask with the
		// new key throughout.
		var began, reloaded atomic.Int64 // since start: the first reload begins, both are done
		start := time.Now()
		errs := make(chan error, 1)
		go func() {
			time.Sleep(2 * time.Second)
			began.Store(int64(time.Since(start)))
			if err := a.reload(conf(newKey, 2, nil), rds.port, simPort); err != nil {
				errs <- err
				return
			}
			time.Sleep(time.Second)
			err := b.reload(conf(newKey, 2, a), rds.port, simPort)
			reloaded.Store(int64(time.Since(start)))
			errs <- err
		}()
		rs := flood(ctx, both, 6, 7*time.Second, func(w int) (string, string, http.Header) {
			return "/api/v1/server", fmt.Sprintf("10.0.2.%d", w+1), http.Header{"X-Api-Key": {newKey}}
		})
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		after := time.Duration(reloaded.Load())
		var before, late []result
		for _, r := range rs {
			if r.at < time.Duration(began.Load()) {
				before = append(before, r)
			} else if r.at > after {
				late = append(late, r)
			}
		}
		t.Logf("new key before the reloads %v, after both %v", tally(before), tally(late))
		for _, r := range late {
			if r.status != http.StatusOK {
				t.Errorf("new key after both reloads: %s answered %d (err %v) at %v", r.gateway, r.status, r.err, r.at)
				break
			}
		}
		if len(late) == 0 {
			t.Error("no request with the new key after both reloads")
		}
		for _, g := range both {
			if code, err := get(ctx, g.base(), "/api/v1/server", "10.0.2.99", http.Header{"X-Api-Key": {oldKey}}); code != http.StatusNotFound {
				t.Errorf("%s: the old key after the rotation: %d %v, want 404", g.name, code, err)
			}
		}
		currentKey = newKey
	})

	n := zoneEvents
	t.Run("two deployments on one Redis", func(t *testing.T) {
		// d fronts another backend (creative; here the same sim process,
		// for what counts is the name), alone, with a key_prefix of its
		// own, the same zone and the same client key.
		creative := gatewayConfig{instances: 1, key: newKey, backend: "creative", keyPrefix: "creative"}
		d, err := startGateway(ctx, bin, dir("d"), "d", creative, rds.port, simPort)
		if err != nil {
			t.Fatal(err)
		}
		defer d.proc.Stop()
		// exhaust sends a client's N requests and more to a, until a
		// refuses it.
		exhaust := func(client string) {
			for i := 0; ; i++ {
				code, err := get(ctx, a.base(), "/api/v1/status", client, nil)
				if code == http.StatusTooManyRequests {
					return
				}
				if err != nil || i > 3*n {
					t.Fatalf("%s at a: %d %v after %d requests, want 429 after about %d", client, code, err, i, n)
				}
			}
		}
		refused := "198.51.100.7"
		exhaust(refused)
		// d is asked once a's count of the client is in the storage, where
		// d would read it within a sync interval on a's key_prefix, and
		// over several intervals.
		fixture.WaitEvery(t, "a's count of the refused client in Redis", syncInterval/5, func() bool {
			count, err := rds.rateLimitCount("caddy", a, "status", refused)
			if err != nil {
				t.Fatal(err)
			}
			return count >= n
		})
		var codes []int
		for range 20 {
			code, _ := get(ctx, d.base(), "/api/v1/status", refused, nil)
			codes = append(codes, code)
			time.Sleep(syncInterval / 4)
		}
		// a refusing it still, its count was over the limit in the
		// storage while d was asked.
		if code, err := get(ctx, a.base(), "/api/v1/status", refused, nil); code != http.StatusTooManyRequests {
			t.Fatalf("a answered %d %v to the client after d was asked, want 429: its window ended before d's requests did, which then tested nothing", code, err)
		}
		t.Logf("a client refused at survival, at creative with its own key_prefix: %v", codes)
		if slices.ContainsFunc(codes, func(c int) bool { return c != http.StatusOK }) {
			t.Errorf("creative, with its own key_prefix, answered %v to a client refused at survival", codes)
		}
		for _, g := range []*gateway{a, b, d} {
			if w := g.warnings(0, warnOtherBackend, warnUnclaimed); len(w) > 0 {
				t.Errorf("%s warned with a key_prefix per deployment: %v", g.name, w)
			}
		}

		// One key_prefix for both: d (and the gateways of survival) warn.
		offsets := map[*gateway]int64{a: a.logSize(), d: d.logSize()}
		creative.keyPrefix = ""
		if err := d.reload(creative, rds.port, simPort); err != nil {
			t.Fatal(err)
		}
		took := waitWarned(t, time.Now(), warnOtherBackend, []*gateway{d, a}, offsets)
		t.Logf("one key_prefix for two deployments: warned after %v", took)
		if w := d.warnings(offsets[d], warnOtherBackend); !strings.HasPrefix(fmt.Sprint(w[0]["other_backends"]), "["+survival) {
			t.Errorf("d: %v", w[0])
		}
		// And the mistake it warns of: a client refused at survival is
		// refused at creative, where it sent nothing; creative's own count
		// of it stays under the limit, or that would be why.
		exhaust("198.51.100.8")
		let := 0
		fixture.WaitEvery(t, "creative to refuse a client refused at survival, with one key_prefix", 100*time.Millisecond, func() bool {
			code, _ := get(ctx, d.base(), "/api/v1/status", "198.51.100.8", nil)
			if code != http.StatusTooManyRequests {
				let++
			}
			return code == http.StatusTooManyRequests
		})
		t.Logf("one key_prefix: a client refused at survival is refused at creative, which let %d of its own through first", let)
		if let >= n {
			t.Errorf("one key_prefix: creative let %d of the client's through before refusing it, its own limit: the refusal was not survival's", let)
		}
	})

	t.Run("Redis killed", func(t *testing.T) {
		offsets := map[string]int64{a.name: a.logSize(), b.name: b.logSize()}
		rds.kill()
		killed := time.Now()
		d := 31 * time.Second
		rs := paced(ctx, 50, d, func(seq int) *gateway { return both[seq%2] }, "/api/v1/status", "198.51.100.3", nil)
		ws := windows(rs, 50, d)
		t.Logf("Redis down: windows %s (%s); %v", counts(ws), ratios(ws, n), tally(rs))
		t.Logf("let through each second: %s", perSecond(rs))
		for _, r := range rs {
			if r.status != http.StatusOK && r.status != http.StatusTooManyRequests {
				t.Errorf("with Redis down %s answered %d (err %v) at %v", r.gateway, r.status, r.err, r.at)
				break
			}
		}
		for i, w := range ws {
			if w.passed > n*215/100 {
				t.Errorf("with Redis down window %d let %d through, want at most about 2N (%d)", i, w.passed, 2*n)
			}
		}
		if len(ws) < 2 {
			t.Errorf("only %d whole windows", len(ws))
		}
		// What the outage put in the logs: a line for each failed sync
		// would be 8 a second per gateway; a line per request, 25; one per
		// go-redis message, dozens a second, on stderr past the log.
		for _, g := range []*gateway{a, b} {
			if stray := g.strayLines(offsets[g.name]); len(stray) > 0 {
				t.Errorf("%s wrote %d lines outside its log with Redis down, the first: %s", g.name, len(stray), stray[0])
			}
			lines, _ := g.logLines(offsets[g.name])
			msgs := map[string]int{}
			for _, m := range lines {
				if m["level"] == "error" || m["level"] == "warn" || strings.HasSuffix(fmt.Sprint(m["logger"]), ".redis") {
					msgs[fmt.Sprint(m["logger"], ": ", m["msg"])]++
				}
			}
			total := 0
			for _, c := range msgs {
				total += c
			}
			t.Logf("%s logged %d lines about %v of Redis down: %v", g.name, total, time.Since(killed).Round(time.Second), msgs)
			// With the docs' sampling block each message is logged once:
			// statusgate's, and caddy-ratelimit's failed read and failed
			// write, 3 lines; a fourth, caddy-ratelimit's "unable to load
			// distributed rate limiter state", comes only when Redis goes
			// away between a sync's listing and its loading (1 run in 10).
			for m, c := range msgs {
				if c > 1 {
					t.Errorf("%s logged %q %d times in %v of Redis down, want once", g.name, m, c, d)
				}
			}
			if want := 3 + msgs[rateLimitLoadFailed]; total > want {
				t.Errorf("%s logged %d lines about %v of Redis down: %v; want at most %d", g.name, total, d, msgs, want)
			}
			if len(g.warnings(offsets[g.name], redisFailing)) != 1 {
				t.Errorf("%s did not say once that Redis is failing: %v", g.name, msgs)
			}
		}
		// A reload needs the storage: caddy-storage-redis pings Redis
		// when the config loads, so a reload while it is down is refused
		// and the running config stays.
		err := a.reload(conf(newKey, 2, nil), rds.port, simPort)
		code, _ := get(ctx, a.base(), "/api/v1/status", "198.51.100.4", nil)
		t.Logf("reload with Redis down: %v; the gateway then answers %d", err, code)
		if err == nil {
			t.Error("a reload with Redis down was taken")
		}
		if code != http.StatusOK {
			t.Errorf("after a reload with Redis down the gateway answers %d", code)
		}

		// Redis back, empty: each gateway says so once, with what it
		// counted in between.
		if rds, err = rds.restart(ctx, root); err != nil {
			t.Fatal(err)
		}
		c.rds = rds
		back := waitWarned(t, time.Now(), redisBack, []*gateway{a, b}, map[*gateway]int64{a: offsets[a.name], b: offsets[b.name]})
		for _, g := range []*gateway{a, b} {
			w := g.warnings(offsets[g.name], redisBack)
			t.Logf("%s: Redis back after %v: %v", g.name, back[g.name], w)
			messages, counted := 0.0, false
			if len(w) == 1 {
				messages, counted = w[0]["messages"].(float64)
			}
			if !counted || messages < 2 {
				t.Errorf("%s: %v, want one line counting go-redis's messages", g.name, w)
			}
			if stray := g.strayLines(offsets[g.name]); len(stray) > 0 {
				t.Errorf("%s wrote %d lines outside its log, the first: %s", g.name, len(stray), stray[0])
			}
		}
	})
}

// TestTwoGatewaysOneKilled runs a cluster as TestTwoGateways does, beside
// it, and checks the distributed rate limit within a few percent of its
// limit across both gateways (and doubled without distributed), then kills
// one: the survivor keeps the limit and the backend's share, and the killed
// one comes back from its data directory and is restarted without either
// being taken for a second gateway on it.
func TestTwoGatewaysOneKilled(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx, bin, simPort, conf := c.ctx, c.bin, c.simPort, c.conf
	rds, a, b, dirB := c.rds, c.a, c.b, c.dirB

	n := zoneEvents
	t.Run("distributed rate limit, then one gateway killed", func(t *testing.T) {
		var killed atomic.Bool
		killAt := 42 * time.Second
		pick := func(seq int) *gateway {
			if killed.Load() || seq%2 == 0 {
				return a
			}
			return b
		}
		var limited, control []result
		var stateKeys []string
		var backend sim.Snapshot
		var players []result
		var wg sync.WaitGroup
		wg.Go(func() {
			limited = paced(ctx, 50, killAt+30*time.Second, pick, "/api/v1/status", "198.51.100.1", nil)
		})
		wg.Go(func() {
			control = paced(ctx, 50, 41*time.Second, pick, "/api/v1/status", "198.51.100.2", http.Header{"X-Control": {"1"}})
		})
		wg.Go(func() {
			time.Sleep(20 * time.Second)
			stateKeys, _ = rds.keys("*.rlstate")
		})
		wg.Go(func() {
			// A slow /player flood through the survivor, from just
			// before the kill: the backend stays within its share. Three
			// callers, fewer than its 4 slots: a flood that filled them
			// would queue the /status trips the rate limit counts behind
			// 1.4 s lookups, and the windows would measure the queue.
			time.Sleep(killAt - 2*time.Second)
			if _, err := simStats(simPort); err != nil {
				t.Error(err)
			}
			players = flood(ctx, []*gateway{a}, 3, 25*time.Second, func(w int) (string, string, http.Header) {
				return "/api/v1/player/" + randomUUID(), fmt.Sprintf("10.0.3.%d", w+1), nil
			})
			backend, _ = simStats(simPort)
		})
		time.Sleep(killAt)
		_ = b.proc.Cmd.Process.Kill() // SIGKILL: no goodbye to the storage
		killed.Store(true)
		wg.Wait()

		if len(stateKeys) != 2 {
			t.Errorf("rate-limit state entries in Redis: %v, want one per gateway", stateKeys)
		}
		dist := windows(limited, 50, killAt+30*time.Second)
		ctl := windows(control, 50, 41*time.Second)
		t.Logf("N=%d per %v, distributed at %v, 50 req/s across both: windows %s (%s); after the kill at %v: survivor %v",
			n, zoneWindow, syncInterval, counts(dist), ratios(dist, n), killAt, tally(limited)["a"])
		t.Logf("control without distributed: windows %s (%s)", counts(ctl), ratios(ctl, n))
		t.Logf("let through each second: distributed %s; control %s", perSecond(limited), perSecond(control))
		if len(dist) < 7 {
			t.Fatalf("only %d whole windows: %v", len(dist), dist)
		}
		// The limit is never exceeded by more than the sync allows, paced
		// or not; it is reached in every window the clients paced.
		for i, w := range dist[:4] {
			if w.passed > n*115/100 || (w.paced && w.passed < n*95/100) {
				t.Errorf("window %d let %d through, want %d to %d", i, w.passed, n*95/100, n*115/100)
			}
		}
		// Window 4 holds the kill; 5 is the first after it, 6 the second.
		if w := dist[6]; w.passed > n*110/100 || (w.paced && w.passed < n*90/100) {
			t.Errorf("second window after the kill let %d through, want %d to %d", w.passed, n*90/100, n*110/100)
		}
		// Without distributed each gateway lets N through: about 2 N.
		paced := 0
		for _, w := range ctl {
			if w.paced {
				paced++
				if w.passed < n*3/2 {
					t.Errorf("control: a window let %d through; without distributed each gateway lets about %d", w.passed, n)
				}
			}
		}
		if paced == 0 {
			t.Errorf("control: no window the clients could pace (%s): the machine is too busy for this test", counts(ctl))
		}
		for _, r := range slices.Concat(limited, players) {
			if r.gateway == "a" && r.status != http.StatusOK && r.status != http.StatusNotFound && r.status != http.StatusTooManyRequests && r.status != http.StatusServiceUnavailable {
				t.Errorf("the survivor answered %d (err %v) at %v", r.status, r.err, r.at)
				break
			}
		}
		t.Logf("through the survivor: /player %v, backend peak in flight %d, queued %d", tally(players), backend.PeakInFlight, backend.PeakQueued)
		if backend.PeakInFlight > 8 || backend.PeakInFlight == 0 {
			t.Errorf("backend peak in flight %d through the survivor, want 1 to 8", backend.PeakInFlight)
		}
	})

	// b was killed: it comes back, as a service manager restarts a crashed
	// process, from its data directory (the same instance ID), then is
	// restarted as systemctl restart does (SIGTERM, then a new process).
	// Neither start may be taken for a second gateway on b's data
	// directory; they are checked in the next subtest, once a and b have
	// beaten often enough for either to have been warned of.
	offsetA := a.logSize()
	var aRestarted uint64 // a's beats when b was restarted
	var crashed *gateway
	t.Run("a restart removes the heartbeat", func(t *testing.T) {
		var err error
		crashed, err = startGateway(ctx, bin, dirB, "b-crashed", conf(oldKey, 2, a), rds.port, simPort)
		if err != nil {
			t.Fatal(err)
		}
		defer crashed.proc.Stop() // stopped below; here if the subtest fails first
		beats := func() []string {
			keys, _ := rds.keys("*statusgate/instances/" + instanceID(dirB) + ".*")
			return keys
		}
		// The killed b's heartbeat, which stopped changing, and the new one's.
		fixture.WaitEvery(t, "b's heartbeats: the killed one's and the new one's", 50*time.Millisecond, func() bool { return len(beats()) >= 2 })
		before := beats()
		// What is checked is a graceful stop's: a busy machine may take
		// longer than Stop's few seconds over it, and a kill leaves the
		// heartbeat.
		if crashed.proc.StopWithin(fixture.Patience) {
			t.Fatalf("b-crashed did not stop within %v of SIGTERM: had to kill it", fixture.Patience)
		}
		if after := beats(); len(after) != 1 || !slices.Contains(before, after[0]) {
			t.Errorf("heartbeats after a graceful stop: %v, want one of %v: the stopped process's deleted", after, before)
		}
		b, err = startGateway(ctx, bin, dirB, "b", conf(oldKey, 2, a), rds.port, simPort)
		if err != nil {
			t.Fatal(err)
		}
		c.b = b
		aRestarted = rds.beats(t, a)
	})

	t.Run("the restarts warned nothing", func(t *testing.T) {
		// What a and b see of each other is warned of once it has lasted
		// settleBeats beats after it is seen (a heartbeat is live from its
		// second reading): enough beats of both since b's last start, b's
		// counted from none, for any of it to have been warned of.
		enough := uint64(settleBeats + 3)
		fixture.WaitEvery(t, fmt.Sprintf("%d beats of a and of b since b's restart", enough), beatInterval/4, func() bool {
			return rds.beats(t, b) >= enough && rds.beats(t, a) >= aRestarted+enough
		})
		for g, offset := range map[*gateway]int64{a: offsetA, crashed: 0, b: 0} {
			if g == nil {
				continue
			}
			if w := g.warnings(offset, warnSharedID, warnUnclaimed, warnInstances, warnGateways, warnLane); len(w) > 0 {
				t.Errorf("%s warned after b was restarted: %v", g.name, w)
			}
		}
	})

}

// ratios gives each window's count as a multiple of n.
func ratios(ws []window, n int) string {
	var s []string
	for _, w := range ws {
		s = append(s, strconv.FormatFloat(float64(w.passed)/float64(n), 'f', 2, 64)+"N")
	}
	return strings.Join(s, " ")
}
