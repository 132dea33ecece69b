package redislog

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// waitFor polls ok for up to a minute, which only a failing test uses up.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// An outage is two lines however many messages go-redis has: the first
// message at ERROR, then, once a ping goes through and go-redis has been
// silent for a probe, one line with the count. The next outage is logged
// again.
func TestOutageIsTwoLines(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	s := New(5*time.Millisecond, time.Hour)
	var up atomic.Bool
	s.join(use{load: "load-1", logger: zap.New(core).Named("redis"), ping: func(context.Context) error {
		if up.Load() {
			return nil
		}
		return errors.New("dial tcp: connection refused")
	}})
	for i := range 50 {
		s.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v", 5, i)
	}
	waitFor(t, "a failed probe", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.lastCount == 50 && logs.Len() == 1
	})
	// go-redis keeps failing, then Redis comes back.
	for range 10 {
		s.Printf(context.Background(), "redis: connection pool: failed to dial after 5 attempts")
	}
	up.Store(true)
	waitFor(t, "the line that Redis is back", func() bool { return logs.Len() == 2 })
	all := logs.All()
	if all[0].Level != zap.ErrorLevel || all[0].ContextMap()["error"] != "connection pool: failed to dial after 5 attempts: 0" || all[0].LoggerName != "redis" {
		t.Errorf("first line: %v %q %v %s", all[0].Level, all[0].Message, all[0].ContextMap(), all[0].LoggerName)
	}
	if f := all[1].ContextMap(); all[1].Message != "Redis answers again" || f["messages"] != int64(60) {
		t.Errorf("second line: %q %v", all[1].Message, f)
	}
	time.Sleep(20 * time.Millisecond) // four probes: a lower bound, safe
	if logs.Len() != 2 {
		t.Errorf("%d lines after the outage, want 2", logs.Len())
	}
	s.Printf(context.Background(), "redis: connection pool: failed to dial after 5 attempts")
	waitFor(t, "the next outage's two lines", func() bool { return logs.Len() == 4 })
}

// While another client keeps failing, a ping that goes through is not the
// end of the outage.
func TestOutageLastsWhileMessagesCome(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	s := New(5*time.Millisecond, time.Hour)
	var pings atomic.Int32
	s.join(use{load: "load-1", logger: zap.New(core), ping: func(context.Context) error { pings.Add(1); return nil }})
	s.Printf(context.Background(), "first")
	for pings.Load() < 10 {
		s.Printf(context.Background(), "again")
		time.Sleep(time.Millisecond)
	}
	if logs.Len() != 1 {
		t.Fatalf("%d lines while messages came, want 1", logs.Len())
	}
	waitFor(t, "the end of the outage", func() bool { return logs.Len() == 2 })
}

// Without a client to ping, an outage ends after quiet of silence.
func TestOutageWithoutPing(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	s := New(5*time.Millisecond, 50*time.Millisecond)
	s.join(use{load: "load-1", logger: zap.New(core)})
	start := time.Now()
	s.Printf(context.Background(), "redis: connection pool: failed to dial after 5 attempts")
	waitFor(t, "the end of the outage", func() bool { return logs.Len() == 2 })
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("ended after %v, before its quiet time", d)
	}
}

// closedAddr is a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// storage is a storage that hands out its go-redis client, as
// caddy-storage-redis does.
type storage struct{ client *redis.Client }

func (s storage) GetClient() any { return s.client }

// go-redis's messages reach the sink once it is go-redis's logger, and a
// storage that hands out its client gives the sink a ping: here a Redis
// that is not there, so the outage lasts.
func TestGoRedisLogsThroughTheSink(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	s := New(10*time.Millisecond, time.Hour)
	redis.SetLogger(s) // for the rest of the test binary: the pool's retries outlive the test
	client := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { client.Close() })
	s.Join("load-1", storage{client}, zap.New(core))
	s.mu.Lock()
	noPing := len(s.loads) != 1 || s.loads[0].ping == nil
	s.mu.Unlock()
	if noPing {
		t.Fatal("no ping taken from the storage's client")
	}
	for range 3 {
		if err := client.Ping(context.Background()).Err(); err == nil {
			t.Fatal("ping to nobody went through")
		}
	}
	waitFor(t, "the first line", func() bool { return logs.Len() == 1 })
	first := logs.All()[0]
	if !strings.Contains(first.ContextMap()["error"].(string), "failed to dial") || first.LoggerName != "redis" {
		t.Errorf("first line: %q %v from %q", first.Message, first.ContextMap(), first.LoggerName)
	}
	time.Sleep(50 * time.Millisecond) // five probes: a lower bound, safe
	if logs.Len() != 1 {
		t.Errorf("%d lines while Redis is not there, want 1", logs.Len())
	}
	s.Leave("load-1")
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.loads) != 0 {
		t.Error("the load stayed after it left")
	}
}
