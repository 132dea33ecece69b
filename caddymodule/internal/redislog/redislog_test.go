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

// An outage is two lines however many messages go-redis has: the first
// message at ERROR, then, once a ping goes through and go-redis has said
// nothing since the probe before, one line with the count. While messages
// keep coming (another client of the process still fails), a ping that
// goes through does not end it. The next outage is logged again.
func TestOutageIsTwoLines(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	s := New(0, time.Hour)
	var up atomic.Bool
	s.join(use{load: testApp("load-1"), logger: zap.New(core).Named("redis"), ping: func(context.Context) error {
		if up.Load() {
			return nil
		}
		return errors.New("dial tcp: connection refused")
	}})
	ctx := context.Background()
	fail := func(n int) {
		for i := range n {
			s.Printf(ctx, "redis: connection pool: failed to dial after %d attempts: %v", 5, i)
		}
	}
	fail(50)
	if !s.Probe(ctx) {
		t.Fatal("a failed ping ended the outage")
	}
	up.Store(true)
	for range 5 {
		fail(2)
		if !s.Probe(ctx) {
			t.Fatal("the outage ended while go-redis still failed")
		}
	}
	if logs.Len() != 1 {
		t.Fatalf("%d lines during the outage, want 1", logs.Len())
	}
	if s.Probe(ctx) {
		t.Fatal("a ping through, and nothing from go-redis since: still down")
	}
	all := logs.All()
	if len(all) != 2 {
		t.Fatalf("%d lines, want 2", len(all))
	}
	if all[0].Level != zap.ErrorLevel || all[0].ContextMap()["error"] != "connection pool: failed to dial after 5 attempts: 0" || all[0].LoggerName != "redis" {
		t.Errorf("first line: %v %q %v %s", all[0].Level, all[0].Message, all[0].ContextMap(), all[0].LoggerName)
	}
	if f := all[1].ContextMap(); all[1].Message != "Redis answers again" || f["messages"] != int64(60) {
		t.Errorf("second line: %q %v", all[1].Message, f)
	}
	if s.Probe(ctx) || logs.Len() != 2 {
		t.Errorf("a probe after the outage: %d lines, want 2", logs.Len())
	}
	fail(1)
	s.Probe(ctx)
	if logs.Len() != 4 {
		t.Errorf("the next outage: %d lines in all, want 4", logs.Len())
	}
}

// Without a client to ping, an outage ends after quiet of silence.
func TestOutageWithoutPing(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	s := New(0, time.Hour)
	s.join(use{load: testApp("load-1"), logger: zap.New(core)})
	ctx := context.Background()
	s.Printf(ctx, "redis: connection pool: failed to dial after 5 attempts")
	if !s.Probe(ctx) || logs.Len() != 1 {
		t.Fatalf("ended before an hour of silence: %d lines", logs.Len())
	}
	s.quiet = 0
	if s.Probe(ctx) || logs.Len() != 2 {
		t.Errorf("silence long enough: %d lines, want 2", logs.Len())
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
	s := New(0, time.Hour)
	redis.SetLogger(s) // for the rest of the test binary: the pool's retries outlive the test
	client := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { client.Close() })
	s.Join(testApp("load-1"), storage{client}, zap.New(core))
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
	if logs.Len() != 1 {
		t.Fatalf("%d lines, want 1", logs.Len())
	}
	first := logs.All()[0]
	if !strings.Contains(first.ContextMap()["error"].(string), "failed to dial") || first.LoggerName != "redis" {
		t.Errorf("first line: %q %v from %q", first.Message, first.ContextMap(), first.LoggerName)
	}
	for range 3 {
		if !s.Probe(context.Background()) {
			t.Fatal("the outage ended with nobody to answer the ping")
		}
	}
	if logs.Len() != 1 {
		t.Errorf("%d lines while Redis is not there, want 1", logs.Len())
	}
	s.Leave(testApp("load-1"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.loads) != 0 {
		t.Error("the load stayed after it left")
	}
}

// testApp stands in for a config load's app, which names the load.
type testApp string

func (testApp) Start() error { return nil }
func (testApp) Stop() error  { return nil }
