package coalesce

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
)

// waiting is how many followers wait for key's leader now.
func waiting(g *Group, key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.calls[key]; c != nil {
		return c.waiting
	}
	return -1
}

type outcome struct {
	res *Result
	how Outcome
	err error
}

func doAsync(ctx context.Context, g *Group, key string, fn func(context.Context) (*Result, error)) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, how, err := do(g, ctx, key, fn)
		ch <- outcome{res, how, err}
	}()
	return ch
}

func recv(t *testing.T, ch <-chan outcome) outcome { return fixture.Recv(t, ch, "Do") }

// leader is a fn that blocks until release is closed, then returns res and
// err, recording its context and how often it ran.
type leader struct {
	started chan struct{}
	release chan struct{}
	res     *Result
	err     error
	runs    atomic.Int32
	ctx     chan context.Context
}

func newLeader(res *Result, err error) *leader {
	return &leader{started: make(chan struct{}), release: make(chan struct{}), res: res, err: err, ctx: make(chan context.Context, 1)}
}

func (l *leader) fn(ctx context.Context) (*Result, error) {
	if l.runs.Add(1) == 1 {
		l.ctx <- ctx
		close(l.started)
	}
	select {
	case <-l.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return l.res, l.err
}

// own is a follower's own fn: it counts its runs and returns a Result that
// names it.
func own(name string, runs *atomic.Int32) func(context.Context) (*Result, error) {
	return func(context.Context) (*Result, error) {
		runs.Add(1)
		return &Result{Status: 200, Body: []byte(name)}, nil
	}
}

func ok(body string) *Result {
	return &Result{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
}

// TestShare: followers that join while the leader runs get the leader's very
// Result, and fn runs once.
func TestShare(t *testing.T) {
	g := New(Config{})
	ctx := context.Background()
	res := ok(`{"ok":true}`)
	ld := newLeader(res, nil)
	lead := doAsync(ctx, g, "a|/api/v1/status", ld.fn)
	<-ld.started
	var ownRuns atomic.Int32
	const n = 5
	var followers []<-chan outcome
	for i := range n {
		followers = append(followers, doAsync(ctx, g, "a|/api/v1/status", own(fmt.Sprint("f", i), &ownRuns)))
	}
	fixture.WaitFor(t, "followers to wait", func() bool { return waiting(g, "a|/api/v1/status") == n })
	if st := g.Stats(); st.InFlight != 1 || st.Waiting != n || st.Led != 1 {
		t.Errorf("while running: %+v", st)
	}
	close(ld.release)
	if o := recv(t, lead); o.res != res || o.how != Led || o.err != nil {
		t.Errorf("leader: %+v", o)
	}
	for i, ch := range followers {
		if o := recv(t, ch); o.res != res || o.how != Shared || o.err != nil {
			t.Errorf("follower %d: %+v, want the leader's Result, Shared", i, o)
		}
	}
	if ld.runs.Load() != 1 || ownRuns.Load() != 0 {
		t.Errorf("leader fn ran %d times, followers' fns %d times; want 1 and 0", ld.runs.Load(), ownRuns.Load())
	}
	if st := g.Stats(); st != (Stats{Led: 1, Shared: n}) {
		t.Errorf("Stats = %+v", st)
	}
	// Coalescing is not caching: the next caller runs fn again.
	var again atomic.Int32
	if res, how, err := do(g, ctx, "a|/api/v1/status", own("later", &again)); string(res.Body) != "later" || how != Led || err != nil || again.Load() != 1 {
		t.Errorf("a call after the leader finished: %v %v %v", res, how, err)
	}
}

// TestNotShared: a result that is not shareable stays the leader's, and each
// follower runs its own fn.
func TestNotShared(t *testing.T) {
	errBackend := errors.New("backend broke off")
	big := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name  string
		res   *Result
		err   error
		share bool
	}{
		{"200", ok("{}"), nil, true},
		{"404 is an answer about the request", &Result{Status: 404, Body: []byte("{}")}, nil, true},
		// Answers to what the leader's caller asked for (a Range, a
		// validator), not to the request the followers share.
		{"304", &Result{Status: 304}, nil, false},
		{"206", &Result{Status: 206, Body: []byte("{}")}, nil, false},
		{"body at the limit", ok(big), nil, true},
		{"body over the limit", ok(big + "x"), nil, false},
		{"no result: the leader failed", nil, errBackend, false},
		{"nil result: the leader answered its client itself", nil, nil, false},
		{"429", &Result{Status: 429}, nil, false},
		// Refusals made for the leader's caller (CallersOwn).
		{"401", &Result{Status: 401, Body: []byte("{}")}, nil, false},
		{"403", &Result{Status: 403, Body: []byte("{}")}, nil, false},
		{"407", &Result{Status: 407, Body: []byte("{}")}, nil, false},
		{"431", &Result{Status: 431, Body: []byte("{}")}, nil, false},
		{"508", &Result{Status: 508, Body: []byte("{}")}, nil, false},
		{"500", &Result{Status: 500}, nil, false},
		{"503", &Result{Status: 503}, nil, false},
		{"504", &Result{Status: 504}, nil, false},
		{"status 0", &Result{}, nil, false},
		{"1xx", &Result{Status: 103}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New(Config{MaxBody: len(big)})
			ctx := context.Background()
			ld := newLeader(tc.res, tc.err)
			lead := doAsync(ctx, g, "k", ld.fn)
			<-ld.started
			var runs atomic.Int32
			f1 := doAsync(ctx, g, "k", own("f1", &runs))
			f2 := doAsync(ctx, g, "k", own("f2", &runs))
			fixture.WaitFor(t, "followers to wait", func() bool { return waiting(g, "k") == 2 })
			close(ld.release)
			if o := recv(t, lead); o.res != tc.res || o.err != tc.err || o.how != Led {
				t.Errorf("leader got %+v, want its own result and error", o)
			}
			for name, ch := range map[string]<-chan outcome{"f1": f1, "f2": f2} {
				o := recv(t, ch)
				switch {
				case tc.share && (o.res != tc.res || o.how != Shared || o.err != nil):
					t.Errorf("%s: %+v, want the shared result", name, o)
				case !tc.share && (o.res == nil || string(o.res.Body) != name || o.how != Alone || o.err != nil):
					t.Errorf("%s: %+v, want its own result, Alone", name, o)
				}
			}
			if want := map[bool]int32{true: 0, false: 2}[tc.share]; runs.Load() != want {
				t.Errorf("followers' fns ran %d times, want %d", runs.Load(), want)
			}
			want := Stats{Led: 1, Shared: 2}
			if !tc.share {
				want = Stats{Led: 1, Alone: 2, Unshareable: 1}
			}
			if st := g.Stats(); st != want {
				t.Errorf("Stats = %+v, want %+v", st, want)
			}
		})
	}
}

// TestKeys: different keys never share, whatever their callers.
func TestKeys(t *testing.T) {
	g := New(Config{})
	ctx := context.Background()
	anon := newLeader(ok(`{"anon":1}`), nil)
	keyed := newLeader(ok(`{"keyed":1}`), nil)
	a := doAsync(ctx, g, "anon|/api/v1/server", anon.fn)
	<-anon.started
	k := doAsync(ctx, g, "keyed|/api/v1/server", keyed.fn)
	<-keyed.started // both leaders run at once
	fa := doAsync(ctx, g, "anon|/api/v1/server", func(context.Context) (*Result, error) { panic("not run") })
	fk := doAsync(ctx, g, "keyed|/api/v1/server", func(context.Context) (*Result, error) { panic("not run") })
	fixture.WaitFor(t, "followers", func() bool {
		return waiting(g, "anon|/api/v1/server") == 1 && waiting(g, "keyed|/api/v1/server") == 1
	})
	if st := g.Stats(); st.InFlight != 2 || st.Waiting != 2 {
		t.Errorf("two leaders with a follower each: %+v", st)
	}
	close(keyed.release)
	if o := recv(t, fk); o.res != keyed.res {
		t.Errorf("keyed follower got %+v", o)
	}
	close(anon.release)
	if o := recv(t, fa); o.res != anon.res {
		t.Errorf("anonymous follower got %+v", o)
	}
	recv(t, a)
	recv(t, k)
}

// TestFollowerGivesUp: a follower whose context ends returns at once; the
// leader and the other followers are unaffected.
func TestFollowerGivesUp(t *testing.T) {
	g := New(Config{})
	ld := newLeader(ok("{}"), nil)
	lead := doAsync(context.Background(), g, "k", ld.fn)
	<-ld.started
	fctx, cancel := context.WithCancel(context.Background())
	quitter := doAsync(fctx, g, "k", func(context.Context) (*Result, error) { panic("not run") })
	stayer := doAsync(context.Background(), g, "k", func(context.Context) (*Result, error) { panic("not run") })
	fixture.WaitFor(t, "followers", func() bool { return waiting(g, "k") == 2 })
	cancel()
	if o := recv(t, quitter); o.res != nil || o.how != Abandoned || !errors.Is(o.err, context.Canceled) {
		t.Errorf("quitter: %+v", o)
	}
	if st := g.Stats(); st.Waiting != 1 {
		t.Errorf("one follower left of two: Waiting %d", st.Waiting)
	}
	lctx := <-ld.ctx
	if lctx.Err() != nil {
		t.Fatalf("a follower giving up cancelled the leader's request: %v", lctx.Err())
	}
	close(ld.release)
	if o := recv(t, stayer); o.res != ld.res || o.how != Shared {
		t.Errorf("stayer: %+v", o)
	}
	if o := recv(t, lead); o.res != ld.res || o.how != Led {
		t.Errorf("leader: %+v", o)
	}
	if st := g.Stats(); st != (Stats{Led: 1, Shared: 1, Abandoned: 1}) {
		t.Errorf("Stats = %+v", st)
	}
}

type ctxKey struct{}

// TestLeaderCancelled: the leader's client hanging up does not fail the
// followers: the request runs on, detached, with the leader's values.
func TestLeaderCancelled(t *testing.T) {
	g := New(Config{})
	lctxParent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "replacer"))
	ld := newLeader(ok("{}"), nil)
	lead := doAsync(lctxParent, g, "k", ld.fn)
	<-ld.started
	f := doAsync(context.Background(), g, "k", func(context.Context) (*Result, error) { panic("not run") })
	fixture.WaitFor(t, "the follower", func() bool { return waiting(g, "k") == 1 })
	cancel()
	lctx := <-ld.ctx
	time.Sleep(5 * time.Millisecond) // give a wrong cancellation the time to propagate
	if lctx.Err() != nil {
		t.Fatalf("the leader's client cancelled the request a follower waits for: %v", lctx.Err())
	}
	if lctx.Value(ctxKey{}) != "replacer" {
		t.Error("the detached context lost the leader's values")
	}
	close(ld.release)
	if o := recv(t, f); o.res != ld.res || o.how != Shared || o.err != nil {
		t.Errorf("follower: %+v", o)
	}
	if o := recv(t, lead); o.res != ld.res || o.how != Led {
		t.Errorf("leader: %+v", o)
	}
}

// TestLeaderDeadline: the leader's deadline is a budget, which its request
// keeps.
func TestLeaderDeadline(t *testing.T) {
	g := New(Config{})
	want := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), want)
	defer cancel()
	do(g, ctx, "k", func(lctx context.Context) (*Result, error) {
		if d, ok := lctx.Deadline(); !ok || !d.Equal(want) {
			t.Errorf("deadline %v %v, want the leader's %v", d, ok, want)
		}
		return nil, nil
	})
	// Without one, there is none: while the leader's client waits, its
	// request is bounded like any other.
	do(g, context.Background(), "k", func(lctx context.Context) (*Result, error) {
		if d, ok := lctx.Deadline(); ok {
			t.Errorf("deadline %v from nowhere", d)
		}
		return nil, nil
	})
}

// TestOrphanTimeout: once the leader's client is gone, its request runs on
// for the followers for at most Timeout.
func TestOrphanTimeout(t *testing.T) {
	const timeout = 30 * time.Millisecond
	g := New(Config{Timeout: timeout})
	lparent, lcancel := context.WithCancel(context.Background())
	ld := newLeader(ok("{}"), nil) // never released: a hung backend
	lead := doAsync(lparent, g, "k", ld.fn)
	<-ld.started
	lctx := <-ld.ctx
	var runs atomic.Int32
	f := doAsync(context.Background(), g, "k", own("f", &runs))
	fixture.WaitFor(t, "the follower", func() bool { return waiting(g, "k") == 1 })
	time.Sleep(2 * timeout)
	if lctx.Err() != nil {
		t.Fatal("Timeout ran while the leader's client was still there")
	}
	start := time.Now()
	lcancel()
	o := recv(t, f)
	if d := time.Since(start); d < timeout {
		t.Errorf("the follower's wait ended %v after the leader left, before Timeout %v", d, timeout)
	}
	if o.how != Alone || string(o.res.Body) != "f" || runs.Load() != 1 {
		t.Errorf("follower of a timed-out orphan: %+v, want its own result", o)
	}
	if o := recv(t, lead); !errors.Is(o.err, context.Canceled) {
		t.Errorf("leader: %+v", o)
	}
}

// TestOrphan: once the leader's client is gone and no follower waits, the
// request is cancelled, and a new caller leads a fresh one instead of joining
// it.
func TestOrphan(t *testing.T) {
	for _, withFollower := range []bool{false, true} {
		t.Run(fmt.Sprint("follower=", withFollower), func(t *testing.T) {
			g := New(Config{})
			lparent, lcancel := context.WithCancel(context.Background())
			ld := newLeader(ok("{}"), nil)
			lead := doAsync(lparent, g, "k", ld.fn)
			<-ld.started
			lctx := <-ld.ctx
			fctx, fcancel := context.WithCancel(context.Background())
			defer fcancel()
			var f <-chan outcome
			if withFollower {
				f = doAsync(fctx, g, "k", func(context.Context) (*Result, error) { panic("not run") })
				fixture.WaitFor(t, "the follower", func() bool { return waiting(g, "k") == 1 })
			}
			lcancel()
			if withFollower {
				time.Sleep(5 * time.Millisecond)
				if lctx.Err() != nil {
					t.Fatal("cancelled while a follower still waited")
				}
				fcancel()
				if o := recv(t, f); o.how != Abandoned {
					t.Errorf("follower: %+v", o)
				}
			}
			fixture.WaitFor(t, "the orphaned request to be cancelled", func() bool { return lctx.Err() != nil })
			if o := recv(t, lead); !errors.Is(o.err, context.Canceled) || o.how != Led {
				t.Errorf("leader: %+v, want its fn's context.Canceled", o)
			}
			var runs atomic.Int32
			if res, how, _ := do(g, context.Background(), "k", own("fresh", &runs)); how != Led || string(res.Body) != "fresh" {
				t.Errorf("after the orphan: %v %v", res, how)
			}
		})
	}
	// A new caller that arrives while the orphan is still winding down leads
	// its own request.
	g := New(Config{})
	lparent, lcancel := context.WithCancel(context.Background())
	slow := make(chan struct{})
	orphanDone := make(chan struct{})
	go func() {
		defer close(orphanDone)
		do(g, lparent, "k", func(ctx context.Context) (*Result, error) {
			<-ctx.Done()
			<-slow // still running after its context ended
			return nil, ctx.Err()
		})
	}()
	fixture.WaitFor(t, "the leader", func() bool { return waiting(g, "k") == 0 })
	lcancel()
	fixture.WaitFor(t, "the orphan to leave the map", func() bool { return waiting(g, "k") == -1 })
	var runs atomic.Int32
	if res, how, err := do(g, context.Background(), "k", own("fresh", &runs)); how != Led || err != nil || string(res.Body) != "fresh" {
		t.Errorf("caller during the orphan's wind-down: %v %v %v", res, how, err)
	}
	close(slow)
	<-orphanDone

	// A leader whose client is gone before it starts runs nothing for
	// nobody: its request's context is cancelled from the start.
	dead, kill := context.WithCancel(context.Background())
	kill()
	_, how, err := do(g, dead, "k", func(ctx context.Context) (*Result, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return ok("{}"), nil
		}
	})
	if how != Led || !errors.Is(err, context.Canceled) {
		t.Errorf("leader with a dead context: %v %v, want its fn cancelled", how, err)
	}
}

// TestPanic: a leader's panic goes on up its stack, and its followers run
// their own fn instead of hanging.
func TestPanic(t *testing.T) {
	g := New(Config{})
	started, release := make(chan struct{}), make(chan struct{})
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		do(g, context.Background(), "k", func(context.Context) (*Result, error) {
			close(started)
			<-release
			panic(http.ErrAbortHandler)
		})
	}()
	<-started
	var runs atomic.Int32
	f := doAsync(context.Background(), g, "k", own("f", &runs))
	fixture.WaitFor(t, "the follower", func() bool { return waiting(g, "k") == 1 })
	close(release)
	if p := <-panicked; p != http.ErrAbortHandler {
		t.Errorf("recovered %v, want the leader's panic", p)
	}
	if o := recv(t, f); o.how != Alone || string(o.res.Body) != "f" {
		t.Errorf("follower of a panicked leader: %+v", o)
	}
	if g.Stats().InFlight != 0 {
		t.Error("a panicked leader stayed in the map")
	}
}

func TestNilGroup(t *testing.T) {
	var g *Group
	var runs atomic.Int32
	for range 3 {
		if res, how, err := do(g, context.Background(), "k", own("x", &runs)); how != Led || err != nil || string(res.Body) != "x" {
			t.Fatalf("%v %v %v", res, how, err)
		}
	}
	if runs.Load() != 3 || g.Stats() != (Stats{}) {
		t.Errorf("nil group: %d runs, %+v", runs.Load(), g.Stats())
	}
}

func TestNewDefaults(t *testing.T) {
	g := New(Config{})
	if g.maxBody.Load() != 0 || time.Duration(g.timeout.Load()) != DefaultTimeout {
		t.Errorf("defaults %d %v", g.maxBody.Load(), time.Duration(g.timeout.Load()))
	}
	defer func() {
		if recover() == nil {
			t.Error("New accepted a negative limit")
		}
	}()
	New(Config{MaxBody: -1})
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{Led: "led", Shared: "shared", Alone: "alone", Abandoned: "abandoned", 9: "Outcome(9)"} {
		if o.String() != want {
			t.Errorf("%d: %q", o, o.String())
		}
	}
}

// TestRace: many callers over a few keys, some giving up, some results not
// shareable. Every caller gets a result for its own key (never another key's),
// the outcomes add up, and nothing is left behind.
func TestRace(t *testing.T) {
	g := New(Config{MaxBody: 64})
	before := runtime.NumGoroutine()
	var backend atomic.Int64
	var wg sync.WaitGroup
	const callers, rounds = 32, 50
	var outcomes [4]atomic.Int64
	for i := range callers {
		wg.Go(func() {
			for j := range rounds {
				key := fmt.Sprintf("key%d", (i+j)%3)
				ctx, cancel := context.WithCancel(context.Background())
				if j%7 == 0 {
					go cancel()
				}
				res, how, err := do(g, ctx, key, func(ctx context.Context) (*Result, error) {
					backend.Add(1)
					time.Sleep(100 * time.Microsecond)
					status := 200
					if j%5 == 0 {
						status = 503
					}
					return &Result{Status: status, Body: []byte(key)}, nil
				})
				cancel()
				outcomes[how].Add(1)
				switch {
				case how == Abandoned:
					if err == nil || res != nil {
						t.Errorf("abandoned with %v %v", res, err)
					}
				case err != nil:
					t.Errorf("%v: %v", how, err)
				case string(res.Body) != key:
					t.Errorf("caller for %s got the body of %s", key, res.Body)
				case how == Shared && res.Status != 200:
					t.Errorf("a %d was shared", res.Status)
				}
			}
		})
	}
	wg.Wait()
	st := g.Stats()
	if got := st.Led + st.Shared + st.Alone + st.Abandoned; got != callers*rounds {
		t.Errorf("outcomes add up to %d, want %d: %+v", got, callers*rounds, st)
	}
	for o := range outcomes {
		if want := [4]uint64{st.Led, st.Shared, st.Alone, st.Abandoned}[o]; uint64(outcomes[o].Load()) != want {
			t.Errorf("%v: callers saw %d, Stats %d", Outcome(o), outcomes[o].Load(), want)
		}
	}
	if uint64(backend.Load()) != st.Led+st.Alone {
		t.Errorf("backend ran %d times, want leaders+alone = %d", backend.Load(), st.Led+st.Alone)
	}
	if st.Shared == 0 {
		t.Error("nothing was shared: the test did not exercise coalescing")
	}
	if st.InFlight != 0 {
		t.Errorf("%d calls left in the map", st.InFlight)
	}
	fixture.WaitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// BenchmarkLead is the cost of coalescing for a caller nobody joins: the
// common case for anything but a hot key.
func BenchmarkLead(b *testing.B) {
	g := New(Config{})
	res := ok("{}")
	fn := func(context.Context) (*Result, error) { return res, nil }
	ctx, cancel := context.WithCancel(context.Background()) // a request's context is cancelable
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		do(g, ctx, "anon|/api/v1/status", fn)
	}
}

// BenchmarkHotKey: parallel callers of one key, where followers share.
func BenchmarkHotKey(b *testing.B) {
	g := New(Config{})
	res := ok("{}")
	fn := func(context.Context) (*Result, error) {
		time.Sleep(10 * time.Microsecond)
		return res, nil
	}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for pb.Next() {
			do(g, ctx, "anon|/api/v1/status", fn)
		}
	})
	st := g.Stats()
	b.ReportMetric(float64(st.Shared)/float64(st.Led+st.Shared), "shared/op")
}

// TestRelease checks that a leader that calls Release frees its followers at
// once: they run their own fn while the leader's fn is still running, and its
// result, returned later, goes to the leader alone.
func TestRelease(t *testing.T) {
	g := New(Config{})
	released := make(chan struct{})
	finish := make(chan struct{})
	leaderDone := make(chan outcome, 1)
	go func() {
		res, how, err := do(g, context.Background(), "k", func(ctx context.Context) (*Result, error) {
			Release(ctx)
			close(released)
			<-finish
			return &Result{Status: 200, Body: []byte("leader's")}, nil
		})
		leaderDone <- outcome{res, how, err}
	}()
	<-released
	var runs atomic.Int32
	res, how, err := do(g, context.Background(), "k", own("own", &runs))
	if how != Led || err != nil || string(res.Body) != "own" || runs.Load() != 1 {
		t.Fatalf("a caller after Release: %v %v %q, want to lead its own call", how, err, res.Body)
	}
	close(finish)
	if o := <-leaderDone; o.how != Led || string(o.res.Body) != "leader's" {
		t.Fatalf("leader: %v %q", o.how, o.res.Body)
	}
	Release(context.Background()) // no call: nothing happens
	// Released once; the answer returned after it is neither shared nor
	// counted as unshareable.
	if st := g.Stats(); st != (Stats{Led: 2, Released: 1}) {
		t.Errorf("Stats = %+v, want two leaders, one released", st)
	}
}

// TestReleaseFreesWaitingFollowers checks that followers already waiting when
// the leader calls Release run their own fn at once, and that the leader's
// request is cancelled when its own context ends after Release.
func TestReleaseFreesWaitingFollowers(t *testing.T) {
	g := New(Config{})
	lctx, lcancel := context.WithCancel(context.Background())
	gotCtx := make(chan context.Context, 1)
	release := make(chan struct{})
	go do(g, lctx, "k", func(ctx context.Context) (*Result, error) {
		gotCtx <- ctx
		<-release
		Release(ctx)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ctx := <-gotCtx
	var runs atomic.Int32
	f := doAsync(context.Background(), g, "k", func(context.Context) (*Result, error) {
		runs.Add(1)
		return &Result{Status: 200, Body: []byte("mine")}, nil
	})
	fixture.WaitFor(t, "the follower", func() bool { return waiting(g, "k") == 1 })
	close(release)
	o := <-f
	if o.how != Alone || string(o.res.Body) != "mine" || runs.Load() != 1 {
		t.Fatalf("follower after Release: %v %q", o.how, o.res.Body)
	}
	lcancel()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the released leader's request was not cancelled when its context ended")
	}
}

// TestFollowersCounted checks that the leader learns whether anyone shares
// its Result: 0 when nobody followed, the followers' number otherwise.
func TestFollowersCounted(t *testing.T) {
	g := New(Config{})
	res, _, _ := do(g, context.Background(), "alone", func(context.Context) (*Result, error) {
		return &Result{Status: 200, Body: []byte("x")}, nil
	})
	if res.Followers != 0 {
		t.Errorf("nobody followed, Followers %d", res.Followers)
	}
	l := newLeader(&Result{Status: 200, Body: []byte("y")}, nil)
	led := doAsync(context.Background(), g, "k", l.fn)
	<-l.started
	f1 := doAsync(context.Background(), g, "k", func(context.Context) (*Result, error) { panic("not run") })
	f2 := doAsync(context.Background(), g, "k", func(context.Context) (*Result, error) { panic("not run") })
	fixture.WaitFor(t, "followers", func() bool { return waiting(g, "k") == 2 })
	close(l.release)
	o := <-led
	<-f1
	<-f2
	if o.res.Followers != 2 {
		t.Errorf("two followers, Followers %d", o.res.Followers)
	}
}

// do is Do for a test's fn that fails with an error: the error stays in the
// closure, as the gateway's verdicts do, and a failed fn has no result to
// share. An abandoned call's error is its context's.
func do(g *Group, ctx context.Context, key string, fn func(context.Context) (*Result, error)) (*Result, Outcome, error) {
	var err error
	res, how := g.Do(ctx, key, func(ctx context.Context) *Result {
		var res *Result
		if res, err = fn(ctx); err != nil {
			return nil
		}
		return res
	})
	if how == Abandoned {
		err = ctx.Err()
	}
	return res, how, err
}

// TestCommit: once fn has said its request is at the backend, the leader's
// client hanging up with nobody following cancels nothing, and a caller who
// asks for the key meanwhile joins the request instead of making another;
// its deadline still holds.
func TestCommit(t *testing.T) {
	g := New(Config{Timeout: time.Millisecond})
	want := time.Now().Add(time.Hour)
	lparent, lcancel := context.WithDeadline(context.Background(), want)
	ld := newLeader(ok("{}"), nil)
	committed := make(chan struct{})
	lead := doAsync(lparent, g, "k", func(ctx context.Context) (*Result, error) {
		Commit(ctx)
		close(committed)
		return ld.fn(ctx)
	})
	<-committed
	lctx := <-ld.ctx
	lcancel()
	var runs atomic.Int32
	f := doAsync(context.Background(), g, "k", own("f", &runs))
	fixture.WaitFor(t, "the caller after the hang-up to follow", func() bool { return waiting(g, "k") == 1 })
	if lctx.Err() != nil {
		t.Fatalf("a committed request was cancelled when its leader's client left: %v", lctx.Err())
	}
	if d, ok := lctx.Deadline(); !ok || !d.Equal(want) {
		t.Errorf("deadline %v %v, want the leader's %v", d, ok, want)
	}
	close(ld.release)
	if o := recv(t, f); o.res != ld.res || o.how != Shared || runs.Load() != 0 {
		t.Errorf("the caller after the hang-up: %+v, %d runs of its own; want the committed request's answer", o, runs.Load())
	}
	if o := recv(t, lead); o.res != ld.res || o.how != Led {
		t.Errorf("leader: %+v", o)
	}
	Commit(context.Background()) // no call: nothing happens
}

// TestHand: a leader whose committed request outlives its fn (Hand) leaves
// with fn's nil, and the call stays open: a follower that joined before and
// a caller that comes after the leader left both get the request's answer
// when finish is called, and run nothing of their own. Without Commit, Hand
// hands nothing.
func TestHand(t *testing.T) {
	g := New(Config{})
	answer := ok(`{"late":true}`)
	handed := make(chan func(*Result), 1)
	joined := make(chan struct{})
	lead := doAsync(context.Background(), g, "k", func(ctx context.Context) (*Result, error) {
		if Hand(ctx) != nil {
			t.Error("Hand before Commit handed the call")
		}
		Commit(ctx)
		<-joined
		handed <- Hand(ctx)
		return nil, nil
	})
	fixture.WaitFor(t, "the leader's call", func() bool { return waiting(g, "k") == 0 })
	var runs atomic.Int32
	before := doAsync(context.Background(), g, "k", own("before", &runs))
	fixture.WaitFor(t, "a follower", func() bool { return waiting(g, "k") == 1 })
	close(joined)
	finish := fixture.Recv(t, handed, "Hand")
	if finish == nil {
		t.Fatal("Hand of a committed call returned nil")
	}
	if o := recv(t, lead); o.res != nil || o.how != Led {
		t.Errorf("leader: %+v, want nil, led", o)
	}
	after := doAsync(context.Background(), g, "k", own("after", &runs))
	fixture.WaitFor(t, "a caller after the leader left to follow", func() bool { return waiting(g, "k") == 2 })
	finish(answer)
	for _, ch := range []<-chan outcome{before, after} {
		if o := recv(t, ch); o.res != answer || o.how != Shared {
			t.Errorf("follower: %+v, want the handed request's answer", o)
		}
	}
	if runs.Load() != 0 || answer.Followers != 2 {
		t.Errorf("%d runs of the followers' own, %d followers counted; want 0 and 2", runs.Load(), answer.Followers)
	}
	if waiting(g, "k") != -1 {
		t.Error("the call is still open after finish")
	}
	if Hand(context.Background()) != nil {
		t.Error("Hand without a call handed something")
	}
}
