package peers

import (
	"context"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Two processes with one instance ID find each other through the storage,
// and each is named once, however many heartbeats follow; a reload of the
// same process (a second watch of it) and a process under another ID are
// not taken for a shared ID, nor is a heartbeat too old to be a live one.
func TestSharedInstanceID(t *testing.T) {
	warned.Clear() // the process-wide "named once" of an earlier run (-count)
	store := &certmagic.FileStorage{Path: t.TempDir()}
	ctx := context.Background()
	core, logs := observer.New(zap.WarnLevel)
	watch := func(id, process string) *Watch {
		w := New(Config{Storage: store, InstanceID: id, DataDir: "/data", Interval: time.Second, Logger: zap.New(core)})
		w.me.Process, w.me.PID = process, len(process)
		return w
	}
	a, b := watch("uuid-1", "proc-a"), watch("uuid-1", "proc-b")
	reload := watch("uuid-1", "proc-a")
	elsewhere := watch("uuid-2", "proc-c")

	if other := a.Beat(ctx); other != nil {
		t.Fatalf("first heartbeat found %+v", other)
	}
	if other := reload.Beat(ctx); other != nil {
		t.Errorf("a reload of the same process found %+v", other)
	}
	if other := elsewhere.Beat(ctx); other != nil {
		t.Errorf("another instance ID found %+v", other)
	}
	if other := b.Beat(ctx); other == nil || other.Process != "proc-a" {
		t.Errorf("b found %+v, want proc-a", other)
	}
	if other := a.Beat(ctx); other == nil || other.Process != "proc-b" {
		t.Errorf("a found %+v, want proc-b", other)
	}
	for range 3 {
		b.Beat(ctx)
		a.Beat(ctx)
	}
	warnings := logs.FilterMessageSnippet("another gateway process has this one's instance ID").All()
	if len(warnings) != 2 {
		t.Fatalf("%d warnings, want one for each process", len(warnings))
	}
	f := warnings[0].ContextMap()
	if f["instance_id"] != "uuid-1" || f["data_dir"] != "/data" || f["other_pid"] != int64(len("proc-a")) {
		t.Errorf("warning fields %v", f)
	}

	// A heartbeat older than three intervals is a process that is gone.
	old := watch("uuid-3", "proc-old")
	old.Beat(ctx)
	later := watch("uuid-3", "proc-new")
	later.fresh = time.Nanosecond
	time.Sleep(time.Millisecond)
	if other := later.Beat(ctx); other != nil {
		t.Errorf("a stale heartbeat counted: %+v", other)
	}
}

// Start runs one watch per key, and it ends with its context.
func TestStartOncePerKey(t *testing.T) {
	store := &certmagic.FileStorage{Path: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	c := Config{Storage: store, InstanceID: "uuid-s", Interval: 10 * time.Millisecond}
	Start(ctx, "load-1", c)
	Start(ctx, "load-1", c)
	if _, ok := running.Load("load-1"); !ok {
		t.Fatal("no watch running")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := store.Load(ctx, Prefix+"/uuid-s.json"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	for {
		if _, ok := running.Load("load-1"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch outlived its context")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
