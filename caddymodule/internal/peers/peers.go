// Package peers finds two gateway processes that share one Caddy instance
// ID, through the storage they share.
//
// caddy-ratelimit's distributed rate limit writes each process's counts
// under its instance ID (instance.uuid in Caddy's data directory) and skips
// the state under its own ID when it adds up the others'. Two processes
// started from one data directory have one ID: each overwrites the other's
// counts and ignores them, so the cluster admits the limit once per process,
// and nothing says so. Each gateway that declares itself one of several
// therefore writes a heartbeat under its instance ID, naming the process,
// and reads it back before each write: a fresh heartbeat there from another
// process is a second gateway with the same ID.
package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// DefaultInterval is how often a heartbeat is written (and the one before it
// read): a shared ID shows within about two of them.
const DefaultInterval = 2 * time.Second

// Prefix is where the heartbeats are kept in the storage, one per instance ID.
const Prefix = "statusgate/instances"

// Beat is one heartbeat: which process wrote it and when.
type Beat struct {
	Process string    `json:"process"` // random, one per process
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	At      time.Time `json:"at"`
}

// Config is what a Watch needs.
type Config struct {
	Storage    certmagic.Storage
	InstanceID string
	// DataDir is where the instance ID comes from, for the warning.
	DataDir string
	// Interval between heartbeats; 0: DefaultInterval.
	Interval time.Duration
	Logger   *zap.Logger
}

// self is this process's heartbeat identity, the same for every config load,
// so that a reload (an old and a new watch at once) is never taken for a
// second process.
var self = func() Beat {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	host, _ := os.Hostname()
	return Beat{Process: hex.EncodeToString(b), Host: host, PID: os.Getpid()}
}()

// warned holds the processes already warned about, so that each is named
// once, not at every heartbeat nor at every reload.
var warned sync.Map

// running holds the watches under way, by the key given to Start.
var running sync.Map

// Start runs a Watch for c until ctx ends, unless one runs for key already
// (one per config load is enough, however many handlers ask).
func Start(ctx context.Context, key any, c Config) {
	if _, dup := running.LoadOrStore(key, struct{}{}); dup {
		return
	}
	w := New(c)
	go func() {
		defer running.Delete(key)
		w.Run(ctx)
	}()
}

// Watch writes this process's heartbeat and warns when another process
// writes under the same instance ID.
type Watch struct {
	c     Config
	me    Beat
	key   string
	fresh time.Duration // a heartbeat younger than this is a live process
}

// New makes a Watch of this process.
func New(c Config) *Watch {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	return &Watch{c: c, me: self, key: path.Join(Prefix, c.InstanceID+".json"), fresh: 3 * c.Interval}
}

// Run beats until ctx ends.
func (w *Watch) Run(ctx context.Context) {
	t := time.NewTicker(w.c.Interval)
	defer t.Stop()
	for {
		w.Beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Beat reads the heartbeat under this instance ID, warns if another live
// process wrote it, and writes this process's. It returns the other process,
// if there is one. A storage that cannot be read or written (Redis down) is
// not this check's to report: the rate limiter logs that.
func (w *Watch) Beat(ctx context.Context) (other *Beat) {
	ctx, cancel := context.WithTimeout(ctx, w.c.Interval)
	defer cancel()
	if data, err := w.c.Storage.Load(ctx, w.key); err == nil {
		var b Beat
		if json.Unmarshal(data, &b) == nil && b.Process != w.me.Process && time.Since(b.At) < w.fresh {
			other = &b
			if _, done := warned.LoadOrStore(b.Process, true); !done && w.c.Logger != nil {
				w.c.Logger.Warn("another gateway process has this one's instance ID: the distributed rate limit counts the two as one, and admits its limit once per process; give each gateway its own data directory (XDG_DATA_HOME) (docs/cluster.md)",
					zap.String("instance_id", w.c.InstanceID), zap.String("data_dir", w.c.DataDir),
					zap.String("other_host", b.Host), zap.Int("other_pid", b.PID))
			}
		}
	}
	me := w.me
	me.At = time.Now()
	data, _ := json.Marshal(me)
	_ = w.c.Storage.Store(ctx, w.key, data)
	return other
}
