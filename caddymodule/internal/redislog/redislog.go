// Package redislog sends go-redis's own messages to Caddy's log, sampled.
//
// go-redis, the client of caddy-storage-redis, writes its messages with a
// logger of its own, plain text straight to stderr: while Redis is away,
// every failed dial of every pool is a line ("redis: connection pool:
// failed to dial after 5 attempts: ..."), dozens a second per gateway, past
// Caddy's JSON logging, its levels and its sampling. Install makes this
// package go-redis's logger for the whole process (there is one per
// process). An outage then makes two lines in Caddy's log: one at its first
// message, with that message, and one when Redis answers again, with how
// long it failed and how many messages go-redis had in between; between the
// two, the messages are only counted.
//
// Redis "answers again" when a ping through the client of the newest
// config's storage succeeds and go-redis has said nothing since the last
// probe; a config whose storage is not caddy-storage-redis (or an older one
// that does not hand out its client) has nothing to ping, and then the
// outage is over once go-redis has been silent for a minute.
package redislog

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Install makes the process's sink go-redis's logger.
func Install() { redis.SetLogger(process) }

// process is the process's sink.
var process = New(time.Second, time.Minute)

// Join records that the config load of the app load (its app: one per
// load) logs with logger (named
// ".redis" below it) and, if its storage hands out a go-redis client
// (caddy-storage-redis's GetClient), pings through it to learn that Redis
// is back. The newest load's are used. Joining again does nothing.
func Join(load caddy.App, storage any, logger *zap.Logger) { process.Join(load, storage, logger) }

// Leave forgets the load: its storage's client is closed once it stops.
func Leave(load caddy.App) { process.Leave(load) }

// Sink is a go-redis logger that logs an outage as two lines.
type Sink struct {
	probeEvery, quiet time.Duration

	mu    sync.Mutex
	loads []use // newest last
	// The outage under way: since when, how many messages, and when the
	// last one came; a probe goroutine runs while down.
	down      bool
	since     time.Time
	messages  int
	lastAt    time.Time
	lastCount int // messages at the previous probe
}

type use struct {
	load   caddy.App
	logger *zap.Logger
	ping   func(context.Context) error
}

// New makes a sink that probes every probeEvery while Redis fails, and
// takes an outage without a client to ping as over after quiet of silence.
// probeEvery 0 starts no probe: the caller calls Probe (tests).
func New(probeEvery, quiet time.Duration) *Sink {
	return &Sink{probeEvery: probeEvery, quiet: quiet}
}

// pinger is go-redis's client, as much of it as the probe needs.
type pinger interface {
	Ping(ctx context.Context) *redis.StatusCmd
}

// Join: see the package's Join.
func (s *Sink) Join(load caddy.App, storage any, logger *zap.Logger) {
	u := use{load: load, logger: logger.Named("redis")}
	if st, ok := storage.(interface{ GetClient() any }); ok {
		if c, ok := st.GetClient().(pinger); ok {
			u.ping = func(ctx context.Context) error { return c.Ping(ctx).Err() }
		}
	}
	s.join(u)
}

func (s *Sink) join(u use) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.ContainsFunc(s.loads, func(x use) bool { return x.load == u.load }) {
		s.loads = append(s.loads, u)
	}
}

// Leave: see the package's Leave.
func (s *Sink) Leave(load caddy.App) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads = slices.DeleteFunc(s.loads, func(x use) bool { return x.load == load })
}

// newest is the newest load's use, or Caddy's default logger and no probe;
// under mu.
func (s *Sink) newest() use {
	if n := len(s.loads); n > 0 {
		return s.loads[n-1]
	}
	return use{logger: caddy.Log().Named("redis")}
}

// Printf is go-redis's logger: the first message of an outage is logged,
// the others counted.
func (s *Sink) Printf(_ context.Context, format string, v ...any) {
	s.mu.Lock()
	s.messages++
	s.lastAt = time.Now()
	if s.down {
		s.mu.Unlock()
		return // counted: only the first is formatted
	}
	s.down, s.since, s.messages, s.lastCount = true, s.lastAt, 1, 1
	logger := s.newest().logger
	s.mu.Unlock()
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	logger.Error("Redis is failing: go-redis's messages are counted, not logged, until it answers again", zap.String("error", msg))
	if s.probeEvery > 0 {
		go func() {
			for {
				time.Sleep(s.probeEvery)
				if !s.Probe(context.Background()) {
					return
				}
			}
		}()
	}
}

// Probe checks, while Redis fails, whether it answers again, and says so
// when it does. It reports whether the outage goes on.
func (s *Sink) Probe(ctx context.Context) (down bool) {
	s.mu.Lock()
	u := s.newest()
	s.mu.Unlock()
	ok := true
	if u.ping != nil {
		ctx, cancel := context.WithTimeout(ctx, max(s.probeEvery, time.Second))
		ok = u.ping(ctx) == nil
		cancel()
	}
	s.mu.Lock()
	// Back: the ping went through and go-redis has said nothing since the
	// last probe (another client of the process may still fail); without
	// a ping, go-redis has been silent for quiet.
	back := ok && s.messages == s.lastCount && (u.ping != nil || time.Since(s.lastAt) >= s.quiet)
	s.lastCount = s.messages
	if !s.down || !back {
		defer s.mu.Unlock()
		return s.down
	}
	s.down = false
	failing, messages := time.Since(s.since), s.messages
	s.mu.Unlock()
	u.logger.Info("Redis answers again", zap.Duration("failed_for", failing.Round(100*time.Millisecond)), zap.Int("messages", messages))
	return false
}
