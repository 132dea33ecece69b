package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/statusgate/statusgate/internal/fixture"
)

// cluster is several simulated gateway processes on one storage, each with
// a Watch of its own, beating on a clock the test moves.
type cluster struct {
	t     *testing.T
	store certmagic.Storage
	now   time.Time
	logs  map[string]*observer.ObservedLogs
	w     map[string]*Watch
}

func newCluster(t *testing.T) *cluster {
	return &cluster{t: t, store: &certmagic.FileStorage{Path: t.TempDir()}, now: time.Unix(1e9, 0),
		logs: map[string]*observer.ObservedLogs{}, w: map[string]*Watch{}}
}

// process adds a gateway process named name, with the instance ID id,
// fronting the backends in cs (Backend, Instances, MainThreadLane).
func (c *cluster) process(name, id string, cs ...Config) *Watch {
	core, logs := observer.New(zap.WarnLevel)
	w := New(Options{Interval: time.Second})
	w.me.Process, w.me.PID = "proc-"+name, len(name)
	for _, bc := range cs {
		bc.Storage, bc.InstanceID, bc.DataDir, bc.Logger = c.store, id, "/data/"+name, zap.New(core)
		w.add(testApp("load-1"), bc)
	}
	c.w[name], c.logs[name] = w, logs
	return w
}

// beat moves the clock by d and has every process named beat in turn.
func (c *cluster) beat(d time.Duration, names ...string) {
	c.now = c.now.Add(d)
	for _, n := range names {
		if !c.w[n].Beat(context.Background(), c.now) {
			c.t.Fatalf("%s: no load in force", n)
		}
	}
}

// warnings are the warnings process name logged that contain snippet.
func (c *cluster) warnings(name, snippet string) []observer.LoggedEntry {
	return c.logs[name].FilterMessageSnippet(snippet).All()
}

func survival(instances int, lane bool) Config {
	return Config{Backend: "survival", Instances: instances, MainThreadLane: lane}
}

// Two processes with one instance ID find each other through the storage,
// and each names the other once, however many heartbeats follow; a process
// under another ID is not taken for a shared one; and none warns at the
// first sight of a heartbeat, before it is seen to change.
func TestSharedInstanceID(t *testing.T) {
	c := newCluster(t)
	c.process("a", "uuid-1", survival(3, true))
	c.process("b", "uuid-1", survival(3, false))
	c.process("c", "uuid-2", survival(3, false))
	c.beat(0, "a", "b", "c")
	for _, n := range []string{"a", "b", "c"} {
		if all := c.logs[n].All(); len(all) != 0 {
			t.Errorf("%s warned at the first sight of the others: %v", n, all[0].Message)
		}
	}
	for range 5 {
		c.beat(time.Second, "a", "b", "c")
	}
	for _, n := range []string{"a", "b"} {
		ws := c.warnings(n, "another gateway process has this one's instance ID")
		if len(ws) != 1 {
			t.Fatalf("%s: %d warnings, want one", n, len(ws))
		}
		f := ws[0].ContextMap()
		other := map[string]string{"a": "b", "b": "a"}[n]
		if f["instance_id"] != "uuid-1" || f["data_dir"] != "/data/"+n || f["other_pid"] != int64(len(other)) {
			t.Errorf("%s: warning fields %v", n, f)
		}
	}
	if all := c.logs["c"].All(); len(all) != 0 {
		t.Errorf("c, under its own ID and in agreement, warned: %v", all[0].Message)
	}
}

// A process that is gone leaves a heartbeat that no longer changes: its
// successor on the same data directory (a restart after a crash) never
// takes it for a second process, and readers delete it after Purge. A
// process that leaves (a graceful stop) deletes its own.
func TestGoneProcess(t *testing.T) {
	c := newCluster(t)
	old := c.process("old", "uuid-1", survival(1, true))
	for range 3 {
		c.beat(time.Second, "old")
	}
	c.process("new", "uuid-1", survival(1, true))
	for range 20 {
		c.beat(time.Second, "new")
	}
	if all := c.logs["new"].All(); len(all) != 0 {
		t.Errorf("the successor warned: %v %v", all[0].Message, all[0].ContextMap())
	}
	keys, _ := c.store.List(context.Background(), Prefix, false)
	if len(keys) != 2 {
		t.Fatalf("heartbeats %v, want the old one and the new one", keys)
	}
	c.w["new"].opt.Purge = 30 * time.Second
	c.beat(11*time.Second, "new")
	keys, _ = c.store.List(context.Background(), Prefix, false)
	if len(keys) != 1 || !strings.Contains(keys[0], "proc-new") {
		t.Errorf("after Purge: heartbeats %v, want the new one alone", keys)
	}

	// A graceful stop: the last load leaves, and the heartbeat goes.
	c.w["new"].Leave(testApp("load-1"))
	keys, _ = c.store.List(context.Background(), Prefix, false)
	if len(keys) != 0 {
		t.Errorf("after the last load left: heartbeats %v", keys)
	}
	old.Leave(testApp("load-1")) // never wrote since: nothing to do
}

// Gateways of another backend in the same storage (two deployments on one
// key_prefix) are named once by each side, and a process that fronts both
// backends is of both deployments.
func TestOtherBackend(t *testing.T) {
	c := newCluster(t)
	c.process("a", "uuid-a", survival(2, true))
	c.process("b", "uuid-b", survival(2, false))
	c.process("d", "uuid-d", Config{Backend: "creative", Instances: 1, MainThreadLane: true})
	// Live from the second beat, warned once it has lasted the settle time.
	for range 12 {
		c.beat(time.Second, "a", "b", "d")
	}
	for _, n := range []string{"a", "b"} {
		ws := c.warnings(n, "gateways of another backend write to this storage")
		if len(ws) != 1 {
			t.Fatalf("%s: %d warnings of another backend, want 1", n, len(ws))
		}
		if f := ws[0].ContextMap(); fmt.Sprint(f["other_backends"]) != "[creative]" || f["other_instance_id"] != "uuid-d" {
			t.Errorf("%s: fields %v", n, f)
		}
	}
	// d sees two gateways of survival: one warning for the backend.
	if ws := c.warnings("d", "gateways of another backend"); len(ws) != 1 || fmt.Sprint(ws[0].ContextMap()["other_backends"]) != "[survival]" {
		t.Errorf("d: %d warnings %v, want one naming survival", len(ws), ws)
	}

	// A reload that changes the declaration, one gateway after the other:
	// for a moment the two front two backends, and nobody warns.
	r := newCluster(t)
	r.process("a", "uuid-a", survival(2, true))
	r.process("b", "uuid-b", survival(2, false))
	for range 3 {
		r.beat(time.Second, "a", "b")
	}
	r.w["a"].loads[0].backends = map[string]Backend{"survival v2": {Name: "survival v2", Instances: 2, MainThreadLane: true}}
	for range 3 {
		r.beat(time.Second, "a", "b")
	}
	r.w["b"].loads[0].backends = map[string]Backend{"survival v2": {Name: "survival v2", Instances: 2}}
	for range 10 {
		r.beat(time.Second, "a", "b")
	}
	for _, n := range []string{"a", "b"} {
		if all := r.logs[n].All(); len(all) != 0 {
			t.Errorf("rolling reload of the declaration: %s warned %v", n, all[0].Message)
		}
	}

	both := newCluster(t)
	both.process("a", "uuid-a", survival(2, true))
	both.process("e", "uuid-e", survival(2, false), Config{Backend: "creative", Instances: 1})
	for range 6 {
		both.beat(time.Second, "a", "e")
	}
	for _, n := range []string{"a", "e"} {
		if all := both.logs[n].All(); len(all) != 0 {
			t.Errorf("%s warned: %v %v", n, all[0].Message, all[0].ContextMap())
		}
	}
}

// Gateways of one backend that disagree on instances, or both hold the
// main-thread lane, or are more than their instances, are warned about once
// the disagreement has lasted Settle, by every side that sees it, once; one
// that lasts less (a rolling reload) is not.
func TestDisagreements(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b    Config
		more    bool // a third gateway like b
		snippet string
		warn    []string
	}{
		{"instances 1 and 2", survival(1, true), survival(2, false), false, "different instances", []string{"a", "b"}},
		{"two lanes", survival(2, true), survival(2, true), false, "main-thread lane open too", []string{"a", "b"}},
		{"three gateways at instances 2", survival(2, true), survival(2, false), true, "more gateway processes of this backend", []string{"a", "b", "c"}},
		{"agreement", survival(2, true), survival(2, false), false, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			c.process("a", "uuid-a", tc.a)
			c.process("b", "uuid-b", tc.b)
			names := []string{"a", "b"}
			if tc.more {
				c.process("c", "uuid-c", tc.b)
				names = append(names, "c")
			}
			// Live from the second beat; the settle time is 5 s.
			for range 5 {
				c.beat(time.Second, names...)
			}
			for _, n := range names {
				if all := c.logs[n].All(); len(all) != 0 {
					t.Errorf("%s warned before the settle time: %v", n, all[0].Message)
				}
			}
			for range 10 {
				c.beat(time.Second, names...)
			}
			for _, n := range names {
				ws := c.logs[n].All()
				if want := slices.Contains(tc.warn, n); (len(ws) == 1) != want || len(ws) > 1 {
					t.Errorf("%s: %d warnings, want %v", n, len(ws), want)
					continue
				}
				if len(ws) == 1 && !strings.Contains(ws[0].Message, tc.snippet) {
					t.Errorf("%s: %q, want %q", n, ws[0].Message, tc.snippet)
				}
			}
		})
	}

	// A rolling reload: b goes from instances 2 to 3 three seconds after a.
	c := newCluster(t)
	c.process("a", "uuid-a", survival(2, true))
	c.process("b", "uuid-b", survival(2, false))
	for range 3 {
		c.beat(time.Second, "a", "b")
	}
	c.w["a"].loads[0].backends["survival"] = Backend{Name: "survival", Instances: 3, MainThreadLane: true}
	for range 3 {
		c.beat(time.Second, "a", "b")
	}
	c.w["b"].loads[0].backends["survival"] = Backend{Name: "survival", Instances: 3}
	for range 10 {
		c.beat(time.Second, "a", "b")
	}
	for _, n := range []string{"a", "b"} {
		if all := c.logs[n].All(); len(all) != 0 {
			t.Errorf("rolling reload: %s warned %v", n, all[0].Message)
		}
	}
}

// A distributed rate-limit state that keeps changing under an instance ID
// no heartbeat names is another deployment's limiter in this storage. The
// states of gateways of this backend are not, nor are those they leave when
// they go: killed (the heartbeat stays, the state stops changing) or
// stopped gracefully (the heartbeat goes, the limiter writes once more).
func TestRateLimitStates(t *testing.T) {
	c := newCluster(t)
	c.process("a", "uuid-a", survival(3, true))
	c.process("b", "uuid-b", survival(3, false))
	c.process("k", "uuid-k", survival(3, false))
	ctx := context.Background()
	state := func(id string, size int) {
		if err := c.store.Store(ctx, rateLimitPrefix+"/"+id+".rlstate", make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	state("uuid-gone", 1) // a state nobody writes any more
	for i := range 5 {
		for _, id := range []string{"uuid-b", "uuid-k", "uuid-x"} {
			state(id, i+1)
		}
		c.beat(time.Second, "a", "b", "k")
	}
	// k is killed; b stops gracefully, and its limiter writes once more.
	c.w["b"].Leave(testApp("load-1"))
	state("uuid-b", 100)
	for i := range 15 {
		state("uuid-x", 10+i) // a Caddy without statusgate
		c.beat(time.Second, "a")
	}
	ws := c.warnings("a", "another Caddy instance writes distributed rate-limit states")
	if len(ws) != 1 || ws[0].ContextMap()["other_instance_id"] != "uuid-x" {
		t.Fatalf("a: %v, want one warning naming uuid-x", ws)
	}
	if all := c.logs["a"].All(); len(all) != 1 {
		t.Errorf("a logged %d warnings, want 1: %v", len(all), all)
	}
}

// Join writes nothing for a load that is not active (being validated), and
// from its first beat for one that is; the newest active load is in force;
// Leave of an older load keeps the heartbeat, and of the last deletes it
// before it returns.
func TestJoinLeave(t *testing.T) {
	store := &certmagic.FileStorage{Path: t.TempDir()}
	ctx := context.Background()
	w := New(Options{Interval: 20 * time.Millisecond})
	heartbeats := func() []string {
		keys, _ := store.List(ctx, Prefix, false)
		return keys
	}
	read := func() Beat {
		var b Beat
		keys := heartbeats()
		if len(keys) == 1 {
			data, _ := store.Load(ctx, keys[0])
			_ = json.Unmarshal(data, &b)
		}
		return b
	}
	// A load being validated is asked at every beat whether it is active:
	// a second question means the beat of the first has run, and wrote
	// nothing.
	var asked atomic.Int32
	never := func() bool { asked.Add(1); return false }
	w.Join(testApp("validate"), Config{Storage: store, InstanceID: "uuid-j", Backend: "survival", Instances: 2, Active: never})
	fixture.WaitFor(t, "two beats of a load never active", func() bool { return asked.Load() >= 2 })
	if keys := heartbeats(); len(keys) != 0 {
		t.Fatalf("a load never active wrote %v", keys)
	}
	w.Leave(testApp("validate"))

	w.Join(testApp("load-1"), Config{Storage: store, InstanceID: "uuid-j", Backend: "survival", Instances: 2, MainThreadLane: true})
	w.Join(testApp("load-1"), Config{Storage: store, InstanceID: "uuid-j", Backend: "survival", Instances: 2})
	fixture.WaitFor(t, "load-1's heartbeat", func() bool { b := read(); return len(b.Backends) == 1 && b.Backends[0].Instances == 2 })
	if b := read(); !b.Backends[0].MainThreadLane || b.InstanceID != "uuid-j" || b.PID == 0 {
		t.Errorf("heartbeat %+v: the lane is open when one handler opens it", b)
	}
	w.Join(testApp("load-2"), Config{Storage: store, InstanceID: "uuid-j", Backend: "survival", Instances: 3})
	fixture.WaitFor(t, "load-2 in force", func() bool { b := read(); return len(b.Backends) == 1 && b.Backends[0].Instances == 3 })
	seq := read().Seq
	w.Leave(testApp("load-1"))
	fixture.WaitFor(t, "load-2's heartbeat going on after load-1 left", func() bool {
		b := read()
		return b.Seq > seq+2 && len(b.Backends) == 1 && b.Backends[0].Instances == 3
	})
	w.Leave(testApp("load-2"))
	if keys := heartbeats(); len(keys) != 0 {
		t.Errorf("after the last load left: %v", keys)
	}
	w.Leave(testApp("load-2"))
}

// testApp stands in for a config load's app, which names the load.
type testApp string

func (testApp) Start() error { return nil }
func (testApp) Stop() error  { return nil }
