// Package cluster runs statusgate the way docs/cluster.md sets it up: two
// gateway processes in front of one game server, sharing a Redis through
// Caddy's storage. Its test (cluster_test.go) starts every part as a real
// process, because caddy-ratelimit's zones live in a process-wide pool and
// its instance ID comes from the data directory: two gateways in one
// process would prove nothing.
package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/internal/sim"
	"github.com/statusgate/statusgate/test/internal/harness"
)

// Limits of the rate-limit zone every gateway has: events per window.
const (
	zoneEvents = 100
	zoneWindow = 10 * time.Second
	// syncInterval is the distributed limiter's read and write interval:
	// a fortieth of the window (docs/cluster.md).
	syncInterval = 250 * time.Millisecond
)

// gatewayConfig is what differs between the gateways and between the
// phases of the test.
type gatewayConfig struct {
	instances int    // statusgate's instances; 1 leaves the line out
	key       string // the key statusgate accepts
	// placeholdersTo is the gateway that owns the main-thread lane, for the
	// others: they forward /placeholders to it. "": this gateway serves it.
	placeholdersTo string
	// backend names the backend the gateway fronts (guard <name>), for a
	// deployment whose gateways declare the same upstream as another's;
	// "": the declared upstream names it.
	backend string
	// keyPrefix is the storage's key_prefix, one per deployment; "": the
	// default, caddy.
	keyPrefix string
}

// caddyfile is one gateway's config, as docs/cluster.md gives it: the shared
// Redis storage, the load balancer (here the test's clients, all on
// loopback) trusted for X-Forwarded-For, statusgate with its share of the
// backend, a rate_limit zone per client distributed through the storage at
// syncInterval, and a control zone that is not distributed (asked with the
// header X-Control). caddy-ratelimit logs each refusal at INFO, and each
// failed sync at ERROR every interval; the log blocks keep the first and
// sample the second to once a minute, as docs/cluster.md recommends.
func caddyfile(c gatewayConfig, port, admin, redisPort, simPort int) string {
	var b strings.Builder
	prefix := ""
	if c.keyPrefix != "" {
		prefix = "\n\t\tkey_prefix " + c.keyPrefix
	}
	fmt.Fprintf(&b, `{
	admin 127.0.0.1:%d
	auto_https off
	persist_config off
	grace_period 1s
	order rate_limit after statusgate
	storage redis {
		address 127.0.0.1:%d%s
	}
	servers {
		trusted_proxies static 127.0.0.0/8
		trusted_proxies_strict
		client_ip_headers X-Forwarded-For
	}
	log default {
		level INFO
		exclude http.handlers.rate_limit
	}
	log rate_limit {
		include http.handlers.rate_limit
		level ERROR
		sampling {
			interval 1m
			first 1
			thereafter 1000000
		}
	}
}

http://:%d {
	bind 127.0.0.1
`, admin, redisPort, prefix, port)
	if c.placeholdersTo != "" {
		fmt.Fprintf(&b, `	@placeholders path /api/placeholders /api/placeholders/* /api/v1/placeholders /api/v1/placeholders/*
	handle @placeholders {
		reverse_proxy %s
	}
`, c.placeholdersTo)
	}
	// The gateways of one deployment declare the same backend, which names
	// it in their heartbeats; another deployment here fronts the same sim
	// process, and names its backend with guard <name>.
	fmt.Fprintf(&b, "\thandle {\n\t\tstatusgate 127.0.0.1:%d {\n\t\t\tkey %s\n", simPort, c.key)
	if c.backend != "" {
		fmt.Fprintf(&b, "\t\t\tguard %s\n", c.backend)
	}
	if c.instances > 1 {
		fmt.Fprintf(&b, "\t\t\tinstances %d\n", c.instances)
	}
	if c.placeholdersTo != "" {
		b.WriteString("\t\t\tdisable placeholders\n")
	}
	// The rate limit counts trips to the backend (cache hits and
	// coalesced followers are not: docs/backend-protection.md), so that
	// every /status the test sends is one, nothing is cached or shared.
	b.WriteString("\t\t\tcache status off\n\t\t\tcoalesce off\n")
	fmt.Fprintf(&b, `		}
		@limited {
			path /api/v1/status
			not header X-Control *
		}
		rate_limit @limited {
			distributed {
				read_interval %s
				write_interval %s
			}
			zone status {
				key {http.statusgate.client}
				events %d
				window %s
			}
		}
		@control {
			path /api/v1/status
			header X-Control *
		}
		rate_limit @control {
			zone control {
				key {http.statusgate.client}
				events %d
				window %s
			}
		}
	}
}
`, syncInterval, syncInterval, zoneEvents, zoneWindow, zoneEvents, zoneWindow)
	return b.String()
}

// gateway is one gateway process: its folder holds its config, its log and
// its data directory (XDG_DATA_HOME, where its instance ID lives).
type gateway struct {
	name, dir   string
	port, admin int
	proc        *harness.Process
}

func (g *gateway) base() string { return "http://127.0.0.1:" + strconv.Itoa(g.port) }

// startGateway starts caddy run for c in dir.
func startGateway(ctx context.Context, bin, dir, name string, c gatewayConfig, redisPort, simPort int) (*gateway, error) {
	port, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	admin, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	g := &gateway{name: name, dir: dir, port: port, admin: admin}
	g.proc, err = harness.Start(ctx, bin, dir, name, port, caddyfile(c, port, admin, redisPort, simPort))
	return g, err
}

// reload loads c into the running gateway through its admin endpoint, as
// `caddy reload --force` does (an unchanged config is loaded anew too), and
// returns once the new config alone serves: the load returns while the old
// config's socket still listens beside the new one, and a connection the
// kernel hands the old socket then is reset when it closes (one flood in 20
// stress runs met one), so reload waits for that socket to close.
func (g *gateway) reload(c gatewayConfig, redisPort, simPort int) error {
	body := caddyfile(c, g.port, g.admin, redisPort, simPort)
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(g.admin)+"/load", strings.NewReader(body))
	req.Header.Set("Content-Type", "text/caddyfile")
	req.Header.Set("Cache-Control", "must-revalidate")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: reload: %d %s", g.name, resp.StatusCode, msg)
	}
	for deadline := time.Now().Add(fixture.Patience); ; time.Sleep(2 * time.Millisecond) {
		listening, known := harness.ListeningTCP()
		if !known || listening[uint(g.port)] <= 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the old config's listener on port %d is still open %v after the reload", g.name, g.port, fixture.Patience)
		}
	}
}

// logLines are the gateway's log lines since offset bytes, and the offset
// at their end.
func (g *gateway) logLines(offset int64) ([]map[string]any, int64) {
	f, err := os.Open(g.proc.LogPath)
	if err != nil {
		return nil, offset
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset
	}
	var lines []map[string]any
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break
		}
		offset += int64(len(line))
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines, offset
}

// strayLines are the lines of the gateway's output since offset bytes that
// are not Caddy's log (a JSON object each): what something in the process
// wrote to stderr past the log.
func (g *gateway) strayLines(offset int64) []string {
	b, err := os.ReadFile(g.proc.LogPath)
	if err != nil || int64(len(b)) < offset {
		return nil
	}
	var stray []string
	for line := range strings.Lines(string(b[offset:])) {
		var m map[string]any
		if line = strings.TrimSpace(line); line != "" && json.Unmarshal([]byte(line), &m) != nil {
			stray = append(stray, line)
		}
	}
	return stray
}

// warnings are the gateway's log lines since offset whose message starts
// with one of prefixes.
func (g *gateway) warnings(offset int64, prefixes ...string) []map[string]any {
	lines, _ := g.logLines(offset)
	var out []map[string]any
	for _, m := range lines {
		msg := fmt.Sprint(m["msg"])
		if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(msg, p) }) {
			out = append(out, m)
		}
	}
	return out
}

// instanceID is the instance ID of the gateways started from dir.
func instanceID(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "caddy-home", "caddy", "instance.uuid"))
	return strings.TrimSpace(string(b))
}

// logSize is the length of the gateway's log, to read what follows.
func (g *gateway) logSize() int64 {
	fi, err := os.Stat(g.proc.LogPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// simCaddyfile serves the demo backend with the plugin's capacity model (8
// threads, an unbounded queue, the main thread) and its counters at
// /_sim/stats.
func simCaddyfile(port int) string {
	return fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
	grace_period 1s
	log {
		level ERROR
	}
}

http://:%d {
	bind 127.0.0.1
	statusgate_sim {
		seed 1
		frozen off
		stats_endpoint
	}
}
`, port)
}

// simStats reads the backend's counters and starts a new measurement.
func simStats(simPort int) (sim.Snapshot, error) {
	var s sim.Snapshot
	resp, err := http.Post("http://127.0.0.1:"+strconv.Itoa(simPort)+"/_sim/stats", "", nil)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&s)
	return s, err
}

// ErrNoRedis is why the test cannot run: no redis-server on the PATH.
var ErrNoRedis = errors.New("redis-server not found (apt-get install -y redis-server)")

// redisServer is a redis-server on a loopback port with no persistence.
type redisServer struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts redis-server on a free loopback port, with nothing
// saved to disk, and returns once it accepts connections.
func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	port, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	return startRedisOn(ctx, bin, dir, port)
}

// restart starts a new redis-server, empty, on the port of r, which was
// killed: Redis back after an outage.
func (r *redisServer) restart(ctx context.Context, dir string) (*redisServer, error) {
	return startRedisOn(ctx, r.cmd.Path, dir, r.port)
}

func startRedisOn(ctx context.Context, bin, dir string, port int) (*redisServer, error) {
	logf, err := os.OpenFile(filepath.Join(dir, "redis.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	r := &redisServer{port: port, done: make(chan struct{})}
	r.cmd = exec.Command(bin, "--save", "", "--appendonly", "no", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { r.cmd.Wait(); logf.Close(); close(r.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := r.keys("*"); err == nil {
			return r, nil
		}
		select {
		case <-r.done:
			return nil, fmt.Errorf("redis-server exited: %s", harness.Tail(filepath.Join(dir, "redis.log"), 10))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.kill()
			return nil, errors.New("redis-server did not come up")
		}
	}
}

// kill ends redis-server at once (SIGKILL), as a crash would.
func (r *redisServer) kill() {
	if r == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}

// keys runs KEYS pattern.
func (r *redisServer) keys(pattern string) ([]string, error) {
	return r.do("KEYS", pattern)
}

// get runs GET key: its value, or nil when there is none.
func (r *redisServer) get(key string) ([]byte, error) {
	reply, err := r.do("GET", key)
	if err != nil || len(reply) == 0 {
		return nil, err
	}
	return []byte(reply[0]), nil
}

// do runs a command in Redis's own protocol (RESP), so that the test needs
// no redis-cli, and returns its reply: an array's strings, or a bulk
// string as one (none when it is nil).
func (r *redisServer) do(args ...string) ([]string, error) {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.port), time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	cmd := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		cmd += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, cmd); err != nil {
		return nil, err
	}
	br := bufio.NewReader(c)
	bulk := func(hdr string) (string, bool, error) {
		size, _ := strconv.Atoi(strings.TrimSpace(hdr[1:]))
		if size < 0 {
			return "", false, nil
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", false, err
		}
		return string(buf[:size]), true, nil
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasPrefix(line, "$"):
		v, ok, err := bulk(line)
		if !ok {
			return nil, err
		}
		return []string{v}, nil
	case !strings.HasPrefix(line, "*"):
		return nil, fmt.Errorf("%s: %q", args[0], strings.TrimSpace(line))
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	out := make([]string, 0, n)
	for range n {
		hdr, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		v, _, err := bulk(hdr)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// stored is what Caddy's Redis storage (caddy-storage-redis, uncompressed
// and unencrypted, as the gateways here store) keeps at key: nil when the
// key is not there.
func (r *redisServer) stored(key string) ([]byte, error) {
	raw, err := r.get(key)
	if raw == nil || err != nil {
		return nil, err
	}
	var sd struct {
		Value       []byte `json:"value"`
		Compression int    `json:"compression"`
		Encryption  int    `json:"encryption"`
	}
	if err := json.Unmarshal(raw, &sd); err != nil {
		return nil, fmt.Errorf("%s: %v", key, err)
	}
	if sd.Compression != 0 || sd.Encryption != 0 {
		return nil, fmt.Errorf("%s: compressed or encrypted", key)
	}
	return sd.Value, nil
}

// heartbeat is what the test reads of a gateway's heartbeat
// (caddymodule/internal/peers.Beat): seq grows at every beat.
type heartbeat struct {
	PID int       `json:"pid"`
	Seq uint64    `json:"seq"`
	At  time.Time `json:"at"`
}

// The heartbeat's timings (caddymodule/internal/peers, DefaultInterval and
// Options.Settle): a disagreement about instances, the gateways or the lane,
// or a rate-limit state nobody claims, is warned of once it has lasted
// settleBeats beats.
const (
	beatInterval = 2 * time.Second
	settleBeats  = 5
)

// heartbeat is g's process's heartbeat in Redis (storage prefix caddy); ok
// is false while there is none.
func (r *redisServer) heartbeat(g *gateway) (hb heartbeat, ok bool, err error) {
	keys, err := r.keys("caddy/statusgate/instances/" + instanceID(g.dir) + ".*")
	if err != nil {
		return hb, false, err
	}
	for _, key := range keys {
		data, err := r.stored(key)
		if err != nil || data == nil {
			continue // deleted since the listing
		}
		if err := json.Unmarshal(data, &hb); err != nil {
			return hb, false, fmt.Errorf("%s: %v", key, err)
		}
		if hb.PID == g.proc.Pid() {
			return hb, true, nil
		}
	}
	return heartbeat{}, false, nil
}

// warnedAt is the seq of g's beat that logged the warning w (a log line), read
// once w is seen: g's latest beat, or the one before when the latest began
// after w was logged. A beat logs its warnings after it began, and the next
// begins after they are logged; only a stall of a beat interval between
// seeing w and reading the heartbeat counts one beat too many.
func (r *redisServer) warnedAt(g *gateway, w map[string]any) (uint64, error) {
	ts, ok := w["ts"].(float64)
	if !ok {
		return 0, fmt.Errorf("%s: a log line without a time: %v", g.name, w)
	}
	hb, ok, err := r.heartbeat(g)
	if err != nil || !ok {
		return 0, fmt.Errorf("%s: no heartbeat in Redis (%v)", g.name, err)
	}
	logged := time.Unix(0, int64(ts*1e9))
	if hb.At.After(logged) {
		return hb.Seq - 1, nil
	}
	return hb.Seq, nil
}

// rateLimitCount is the count of client's events in zone that g's
// distributed rate-limit state, in Redis under the storage's key prefix,
// gives (caddy-ratelimit's gob-encoded rlState): 0 when it has none.
func (r *redisServer) rateLimitCount(prefix string, g *gateway, zone, client string) (int, error) {
	data, err := r.stored(prefix + "/rate_limit/instances/" + instanceID(g.dir) + ".rlstate")
	if data == nil || err != nil {
		return 0, err
	}
	var state struct {
		Timestamp time.Time
		Zones     map[string]map[string]struct {
			Count       int
			OldestEvent time.Time
		}
	}
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&state); err != nil {
		return 0, fmt.Errorf("%s's rate-limit state: %v", g.name, err)
	}
	return state.Zones[zone][client].Count, nil
}

// randomUUID is a player nobody has seen: /player takes the plugin's slow
// path (a stats file read and a LuckPerms lookup, 425 ms to 1.4 s), and no
// two requests can share an answer.
func randomUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
