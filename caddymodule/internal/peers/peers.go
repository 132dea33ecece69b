// Package peers lets the gateway processes that share one storage see each
// other, and says when what they see is a mistake.
//
// Several gateways in front of one backend share Caddy's storage (Redis):
// caddy-ratelimit's distributed rate limit writes each process's counts
// there under its instance ID (instance.uuid in Caddy's data directory),
// adds up the others' by zone name and key, and skips the state under its
// own ID. Nothing in that storage says which backend a state belongs to, and
// each gateway takes its share of the backend by a count (instances) that
// nobody checks. So each gateway process writes a heartbeat to the storage
// that names it (host, PID, instance ID) and, for every backend it fronts,
// the backend's name, its instances and whether the main-thread lane is open
// here, and reads everybody else's. It warns, once per finding and with the
// fix, about:
//
//   - another process with this one's instance ID (two gateways from one data
//     directory: the rate limit counts them as one);
//   - processes of another backend, or rate-limit states that no heartbeat
//     claims, in this storage (two deployments on one key_prefix: callers are
//     refused at one for what they did at the other);
//   - another gateway of one of this process's backends with a different
//     instances, more gateways of a backend than its instances, or a second
//     main-thread lane.
//
// A heartbeat is live while it changes: a process that is gone (stopped,
// killed, restarted) leaves one that does not, and raises no alarm; a
// graceful stop removes it. The comparisons of instances and lanes wait a
// few beats (settle), so that a rolling reload of the gateways one after the
// other does not warn.
package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// DefaultInterval is how often a process writes its heartbeat and reads the
// others': another live process shows within about two of them.
const DefaultInterval = 2 * time.Second

// Prefix is where the heartbeats are kept in the storage, one per process.
const Prefix = "statusgate/instances"

// rateLimitPrefix is where caddy-ratelimit's distributed states are kept,
// one per instance ID (<id>.rlstate).
const rateLimitPrefix = "rate_limit/instances"

// Config is what one handler tells its process's watch: the storage its
// config load shares with other gateways and the backend it fronts.
type Config struct {
	Storage    certmagic.Storage
	InstanceID string
	// DataDir is where the instance ID comes from, for the warning.
	DataDir string
	// Backend is what names the backend this gateway fronts: two gateways
	// of one deployment give the same.
	Backend string
	// Instances is how many gateways the handler says front the backend.
	Instances int
	// MainThreadLane is whether this gateway sends requests to the backend's
	// main thread itself: placeholders enabled, with a main-thread limit.
	MainThreadLane bool
	Logger         *zap.Logger
	// Active says whether the config load is the one running: a load being
	// validated, or one that fails, writes no heartbeat. nil: at once.
	Active func() bool
}

// Beat is one process's heartbeat.
type Beat struct {
	Process    string `json:"process"` // random, one per process
	Host       string `json:"host"`
	PID        int    `json:"pid"`
	InstanceID string `json:"instance_id"`
	DataDir    string `json:"data_dir,omitempty"`
	// Seq grows at every beat: a heartbeat is live while it changes, by the
	// reader's clock, whatever the writer's says.
	Seq      uint64    `json:"seq"`
	At       time.Time `json:"at"`
	Backends []Backend `json:"backends"`
}

// Backend is one backend a process fronts, as its heartbeat says.
type Backend struct {
	Name           string `json:"name"`
	Instances      int    `json:"instances"`
	MainThreadLane bool   `json:"main_thread_lane,omitempty"`
}

// Options are a Watch's timings; zero values take the defaults.
type Options struct {
	// Interval between heartbeats; default DefaultInterval.
	Interval time.Duration
	// Fresh is how long a heartbeat stays live after it last changed;
	// default 3 intervals.
	Fresh time.Duration
	// Settle is how long a disagreement about instances or the lane must
	// last before it is reported; default 5 intervals.
	Settle time.Duration
	// Purge is how long a heartbeat that does not change stays in the
	// storage before a reader deletes it; default 10 minutes.
	Purge time.Duration
}

// Watch is a process's heartbeat and its view of the others. The process
// has one (Join, Leave); tests make their own with New.
type Watch struct {
	opt Options
	me  Beat

	mu       sync.Mutex
	loads    []*load // in the order they joined
	stop     context.CancelFunc
	done     chan struct{}
	seq      uint64
	wrote    certmagic.Storage // where the heartbeat was last written
	wroteKey string

	// beatMu is held by Beat; what follows is Beat's alone.
	beatMu sync.Mutex
	// seen are the heartbeats and rate-limit states read, by storage key.
	seen map[string]*sighting
	// beatOf is when a heartbeat of each instance ID was last read, live
	// or not.
	beatOf map[string]time.Time
	// since is when each finding was first seen, while it holds.
	since  map[string]time.Time
	warned map[string]bool
}

// load is one config load's part in the watch.
type load struct {
	id       caddy.App // the load's app
	c        Config    // the storage, logger and identity of the load
	backends map[string]Backend
	active   bool // seen active once: from then on it is in force
}

// sighting is what a reader knows of a key: its last mark (a heartbeat's
// seq, a state's modification time) and, by the reader's clock, when it
// was first read and when the mark last changed.
type sighting struct {
	mark           string
	first, changed time.Time
	present        bool // in the last listing
}

// New makes a Watch of this process with the given timings.
func New(opt Options) *Watch {
	if opt.Interval <= 0 {
		opt.Interval = DefaultInterval
	}
	if opt.Fresh <= 0 {
		opt.Fresh = 3 * opt.Interval
	}
	if opt.Settle <= 0 {
		opt.Settle = 5 * opt.Interval
	}
	if opt.Purge <= 0 {
		opt.Purge = 10 * time.Minute
	}
	return &Watch{opt: opt, me: self, seen: map[string]*sighting{}, beatOf: map[string]time.Time{}, since: map[string]time.Time{}, warned: map[string]bool{}}
}

// self is this process's heartbeat identity, the same for every config load,
// so that a reload (an old and a new load at once) is never taken for a
// second process.
var self = func() Beat {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	host, _ := os.Hostname()
	return Beat{Process: hex.EncodeToString(b), Host: host, PID: os.Getpid()}
}()

// process is the process's watch.
var process = New(Options{})

// Join records that the config load of the app load (its app: one per
// load) has a handler configured as c; see Watch.Join.
func Join(load caddy.App, c Config) { process.Join(load, c) }

// Leave records that the config load of the app load has stopped; see
// Watch.Leave.
func Leave(load caddy.App) { process.Leave(load) }

// Join records that the config load of the app id has a handler configured
// as c, and starts the heartbeat if it is not running. The newest load that
// is active is in force: its storage, its logger and its backends. The lane
// is open for a backend when any handler of the load opens it.
func (w *Watch) Join(id caddy.App, c Config) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.add(id, c)
	if w.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w.stop, w.done = cancel, make(chan struct{})
		go w.run(ctx, w.done)
	}
}

// add is Join without the heartbeat's goroutine, under mu.
func (w *Watch) add(id caddy.App, c Config) {
	i := slices.IndexFunc(w.loads, func(l *load) bool { return l.id == id })
	if i < 0 {
		w.loads = append(w.loads, &load{id: id, c: c, backends: map[string]Backend{}})
		i = len(w.loads) - 1
	}
	l := w.loads[i]
	b := l.backends[c.Backend]
	b.Name, b.Instances = c.Backend, max(1, c.Instances)
	b.MainThreadLane = b.MainThreadLane || c.MainThreadLane
	l.backends[c.Backend] = b
}

// Leave records that the config load has stopped. When it was the last, the
// heartbeat stops and is deleted from the storage before Leave returns: a
// process that stops gracefully (SIGTERM, as systemctl restart sends) leaves
// nothing that looks like a second gateway to its successor. Leaving twice,
// or a load that never joined, does nothing.
func (w *Watch) Leave(id caddy.App) {
	w.mu.Lock()
	i := slices.IndexFunc(w.loads, func(l *load) bool { return l.id == id })
	if i < 0 {
		w.mu.Unlock()
		return
	}
	w.loads = slices.Delete(w.loads, i, i+1)
	if len(w.loads) > 0 {
		w.mu.Unlock()
		return
	}
	if stop, done := w.stop, w.done; stop != nil {
		w.stop, w.done = nil, nil
		w.mu.Unlock()
		stop()
		<-done
		w.mu.Lock()
	}
	st, key := w.wrote, w.wroteKey
	w.wrote = nil
	w.mu.Unlock()
	if st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), w.opt.Interval)
		defer cancel()
		_ = st.Delete(ctx, key)
	}
}

// run beats until ctx ends: at once, then every interval; while no load is
// active yet (the config is still being provisioned) it looks again soon,
// so that the first heartbeat follows the start closely.
func (w *Watch) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		wait := w.opt.Interval
		if !w.Beat(ctx, time.Now()) {
			wait = min(wait, 50*time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// current is the load in force: the newest that is or was active.
func (w *Watch) current() *load {
	for _, l := range slices.Backward(w.loads) {
		if !l.active && (l.c.Active == nil || l.c.Active()) {
			l.active = true
		}
		if l.active {
			return l
		}
	}
	return nil
}

// Beat writes this process's heartbeat, reads the others' and the rate-limit
// states, and warns about what it finds. now is the reader's clock. It
// reports whether a load was in force. A storage that cannot be read or
// written (Redis down) is not this check's to report: what talks to Redis
// logs that.
func (w *Watch) Beat(ctx context.Context, now time.Time) bool {
	w.beatMu.Lock()
	defer w.beatMu.Unlock()
	w.mu.Lock()
	l := w.current()
	if l == nil {
		w.mu.Unlock()
		return false
	}
	c := l.c
	w.seq++
	me := w.me
	me.InstanceID, me.DataDir, me.Seq, me.At = c.InstanceID, c.DataDir, w.seq, now
	for _, name := range slices.Sorted(maps.Keys(l.backends)) {
		me.Backends = append(me.Backends, l.backends[name])
	}
	w.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, w.opt.Interval)
	defer cancel()
	key := path.Join(Prefix, me.InstanceID+"."+me.Process+".json")
	if data, err := json.Marshal(me); err == nil && c.Storage.Store(ctx, key, data) == nil {
		w.mu.Lock()
		w.wrote, w.wroteKey = c.Storage, key
		w.mu.Unlock()
	}
	beats, ok := w.readBeats(ctx, c.Storage, key, now)
	if !ok {
		return true
	}
	found := findings(me, beats, w.readStates(ctx, c.Storage, me.InstanceID, now))
	for _, f := range found {
		w.report(c.Logger, f, now)
	}
	// A finding that no longer holds starts its settle time anew.
	for k := range w.since {
		if !slices.ContainsFunc(found, func(f finding) bool { return f.key == k }) {
			delete(w.since, k)
		}
	}
	w.purge(ctx, c.Storage, now)
	return true
}

// live is a heartbeat read from the storage, and whether it is live.
type live struct {
	Beat
	live bool
}

// readBeats reads every heartbeat but this process's and updates what is
// known of each; ok is false when the storage cannot be listed.
func (w *Watch) readBeats(ctx context.Context, st certmagic.Storage, own string, now time.Time) (beats []live, ok bool) {
	keys, err := st.List(ctx, Prefix, false)
	if err != nil {
		return nil, false
	}
	w.markAbsent(Prefix)
	for _, key := range keys {
		if key == own || !strings.HasSuffix(key, ".json") {
			continue
		}
		data, err := st.Load(ctx, key)
		if err != nil {
			continue
		}
		var b Beat
		if json.Unmarshal(data, &b) != nil || b.Process == w.me.Process {
			continue
		}
		w.beatOf[b.InstanceID] = now
		// A heartbeat of an earlier statusgate, without seq, changes its time.
		mark := strconv.FormatUint(b.Seq, 10) + " " + b.At.String()
		beats = append(beats, live{b, w.observe(key, mark, now)})
	}
	return beats, true
}

// readStates reads the modification time of every distributed rate-limit
// state but this instance's, and returns the instance IDs of those that are
// unclaimed: written to (changed while watched) within a minute, with no
// heartbeat of their instance ID read in the minute before the change. A
// limiter writes less often than a heartbeat (every 5 s by default), and
// goes on for a moment after its process deleted its heartbeat (a graceful
// stop); the heartbeat of a killed process stays.
func (w *Watch) readStates(ctx context.Context, st certmagic.Storage, ownID string, now time.Time) (ids []string) {
	keys, err := st.List(ctx, rateLimitPrefix, false)
	if err != nil {
		return nil
	}
	w.markAbsent(rateLimitPrefix)
	for _, key := range keys {
		id, isState := strings.CutSuffix(path.Base(key), ".rlstate")
		if !isState || id == ownID {
			continue
		}
		info, err := st.Stat(ctx, key)
		if err != nil {
			continue
		}
		mark := info.Modified.String() + " " + strconv.FormatInt(info.Size, 10)
		w.observe(key, mark, now)
		changed := w.seen[key].changed
		if w.changedWithin(key, now, time.Minute) && w.beatOf[id].Before(changed.Add(-time.Minute)) {
			ids = append(ids, id)
		}
	}
	for id, at := range w.beatOf {
		if now.Sub(at) > w.opt.Purge {
			delete(w.beatOf, id)
		}
	}
	return ids
}

// observe records the mark of key read at now and reports whether key is
// live: its mark changed, after it was first read, within Fresh.
func (w *Watch) observe(key, mark string, now time.Time) bool {
	s := w.seen[key]
	if s == nil {
		s = &sighting{mark: mark, first: now}
		w.seen[key] = s
	}
	s.present = true
	if s.mark != mark {
		s.mark, s.changed = mark, now
	}
	return w.changedWithin(key, now, w.opt.Fresh)
}

func (w *Watch) changedWithin(key string, now time.Time, d time.Duration) bool {
	s := w.seen[key]
	return s != nil && !s.changed.IsZero() && now.Sub(s.changed) < d
}

// markAbsent forgets, before a listing under prefix is read, that its keys
// were there: those not read again are gone.
func (w *Watch) markAbsent(prefix string) {
	for key, s := range w.seen {
		if strings.HasPrefix(key, prefix+"/") {
			s.present = false
		}
	}
}

// purge deletes the heartbeats that have not changed for Purge while this
// process watched (processes killed without a chance to delete theirs), and
// forgets the keys no longer in the storage.
func (w *Watch) purge(ctx context.Context, st certmagic.Storage, now time.Time) {
	for key, s := range w.seen {
		last := s.first
		if !s.changed.IsZero() {
			last = s.changed
		}
		switch {
		case !s.present:
			delete(w.seen, key)
		case strings.HasPrefix(key, Prefix+"/") && now.Sub(last) >= w.opt.Purge:
			if st.Delete(ctx, key) == nil {
				delete(w.seen, key)
			}
		}
	}
}

// report warns about f once it has held for its settle time, and only once.
func (w *Watch) report(logger *zap.Logger, f finding, now time.Time) {
	first, ok := w.since[f.key]
	if !ok {
		first = now
		w.since[f.key] = now
	}
	if w.warned[f.key] || (f.settle && now.Sub(first) < w.opt.Settle) {
		return
	}
	w.warned[f.key] = true
	if logger != nil {
		logger.Warn(f.msg, f.fields...)
	}
}
