package sim

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// The capacity model. The plugin serves HTTP from the JDK's HttpServer with
// a fixed thread pool (http.threads, default 8) fed by an unbounded FIFO
// queue, so a flood does not get refused: it waits, and every waiting
// request is still served when its turn comes, even if the client has long
// given up (the JDK only notices when it writes the reply). /player for an
// offline player blocks its thread on a LuckPerms lookup (timeout 1 s) and
// a stats file read (about 425 ms); /placeholders hands its work to the
// game's main thread and waits up to resolve-timeout-ms (2 s) for it, and
// that work delays the next game tick for every player on the server. The
// sim reproduces all three so that a gateway's admission control can be
// measured against something that breaks the way the real backend does.

// Span is a latency range: each request draws a duration uniformly from
// [Min, Max]. A Max below Min (or zero) means exactly Min.
type Span struct {
	Min caddy.Duration `json:"min,omitempty"`
	Max caddy.Duration `json:"max,omitempty"`
}

// draw picks one duration from the span.
func (s Span) draw() time.Duration {
	lo, hi := time.Duration(s.Min), time.Duration(s.Max)
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo+1)
}

// Latency keys that are not station names.
const (
	latencyAll           = "*"              // every key, before the specific ones apply
	latencyIndex         = "index"          // the endpoint index
	latencyPlayerOffline = "player_offline" // /player for a player who is not online
)

// defaultLatency is the realistic time each station holds a pool thread
// (for placeholders: the main-thread work). Snapshot stations only
// serialise a cached value; live stations read server state on the HTTP
// thread; punishments and network read a database or Redis; an offline
// player costs a stats file read (about 425 ms) plus a LuckPerms lookup
// that may run into its 1 s timeout; a placeholder expansion that queries
// a database from the main thread can take up to the 2 s resolve timeout.
var defaultLatency = map[string]Span{
	latencyIndex:         ms(1, 0),
	"status":             ms(1, 0),
	"worlds":             ms(1, 0),
	"gamerules":          ms(1, 0),
	"entities":           ms(1, 0),
	"spawnlimits":        ms(1, 0),
	customVotes:          ms(1, 0),
	"server":             ms(2, 0),
	"performance":        ms(2, 0),
	"plugins":            ms(2, 0),
	"whitelist":          ms(2, 0),
	"operators":          ms(2, 0),
	"bans":               ms(2, 5),
	"constants":          ms(1, 0),
	"punishments":        ms(5, 20),
	"network":            ms(2, 10),
	"player":             ms(5, 20),
	latencyPlayerOffline: ms(425, 1400),
	"placeholders":       ms(50, 2000),
}

func ms(lo, hi int) Span {
	return Span{Min: caddy.Duration(time.Duration(lo) * time.Millisecond), Max: caddy.Duration(time.Duration(hi) * time.Millisecond)}
}

// latencyTable merges the configured spans over the defaults: "*" first,
// then the specific keys.
func latencyTable(cfg map[string]Span) map[string]Span {
	t := make(map[string]Span, len(defaultLatency))
	for k, v := range defaultLatency {
		t[k] = v
	}
	if all, ok := cfg[latencyAll]; ok {
		for k := range t {
			t[k] = all
		}
	}
	for k, v := range cfg {
		if k != latencyAll {
			t[k] = v
		}
	}
	return t
}

// pool is the JDK HttpServer's executor: threads workers and an unbounded
// FIFO queue. A finishing request hands its thread straight to the oldest
// waiter, so nobody can overtake the queue.
type pool struct {
	threads int
	stats   *Stats

	mu    sync.Mutex
	busy  int
	queue []chan struct{} // oldest first; closed to hand over a thread
}

// acquire blocks until the caller holds a thread and returns how long it
// waited. It deliberately ignores the request's context: the JDK keeps a
// queued exchange even after its client has gone.
func (p *pool) acquire() time.Duration {
	p.mu.Lock()
	if p.busy < p.threads && len(p.queue) == 0 {
		p.busy++
		p.stats.pool(p.busy, 0)
		p.mu.Unlock()
		p.stats.waited(0)
		return 0
	}
	start := time.Now()
	ch := make(chan struct{})
	p.queue = append(p.queue, ch)
	p.stats.pool(p.busy, len(p.queue))
	p.mu.Unlock()
	<-ch
	wait := time.Since(start)
	p.stats.waited(wait)
	return wait
}

// release gives the thread to the oldest waiter, or back to the pool.
func (p *pool) release() {
	p.mu.Lock()
	if len(p.queue) > 0 {
		ch := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		close(ch)
	} else {
		p.busy--
	}
	p.stats.pool(p.busy, len(p.queue))
	p.mu.Unlock()
}

// Main-thread timing, as in the vanilla server loop.
const (
	tickInterval = 50 * time.Millisecond // 20 TPS
	// overloadThreshold is how far behind the loop may fall before it gives
	// up on the missed ticks ("Can't keep up!") and skips them.
	overloadThreshold = 2 * time.Second
	// minResolveTimeout is the plugin's floor for resolve-timeout-ms.
	minResolveTimeout = 200 * time.Millisecond
)

// mainThread is the game's main thread: a loop that starts a tick every
// 50 ms and, at the start of each tick, runs every task scheduled before it
// (Bukkit's callSyncMethod). A long task delays the next tick; how late a
// tick starts against its schedule is the lag players feel.
type mainThread struct {
	stats *Stats
	stop  <-chan struct{}

	mu      sync.Mutex
	pending []*task
	stopped bool
}

// task is one piece of main-thread work; done is closed when it has run.
type task struct {
	work time.Duration
	done chan struct{}
}

// submit schedules work for the next tick. After the loop has stopped the
// task completes at once, so no caller waits for a thread that is gone.
func (m *mainThread) submit(work time.Duration) *task {
	t := &task{work: work, done: make(chan struct{})}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		close(t.done)
		return t
	}
	m.pending = append(m.pending, t)
	m.stats.mainPending(len(m.pending))
	return t
}

// run is the tick loop; it returns when stop is closed.
func (m *mainThread) run() {
	next := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-m.stop:
			m.shutdown()
			return
		case <-timer.C:
		}
		lag := max(time.Since(next), 0)
		m.mu.Lock()
		batch := m.pending
		m.pending = nil
		m.stats.mainPending(0)
		m.mu.Unlock()
		m.stats.tick(lag)
		for _, t := range batch {
			sleep(t.work, m.stop)
			close(t.done)
			m.stats.taskRun(t.work)
		}
		next = next.Add(tickInterval)
		if behind := time.Since(next); behind > overloadThreshold {
			skipped := behind / tickInterval
			next = next.Add(skipped * tickInterval)
			m.stats.skipped(int64(skipped))
		}
		timer.Reset(time.Until(next))
	}
}

// shutdown completes every pending task, so that their callers return.
func (m *mainThread) shutdown() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	for _, t := range m.pending {
		close(t.done)
	}
	m.pending = nil
	m.stats.mainPending(0)
}

// sleep waits for d, or until stop is closed: once the config is unloaded
// the queue drains at once instead of holding Caddy's shutdown.
func sleep(d time.Duration, stop <-chan struct{}) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
}
