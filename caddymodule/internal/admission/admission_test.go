package admission

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
)

// long is a wait bound no test reaches unless it means to.
const long = time.Minute

// queued is how many callers of either class wait.
func queued(l *Limiter) int { return l.Stats().QueuedKeyed + l.Stats().QueuedAnonymous }

// acquireAsync starts Acquire in a goroutine and returns where its result goes.
type result struct {
	p   Permit
	err error
}

func acquireAsync(ctx context.Context, l *Limiter, c Class) <-chan result {
	ch := make(chan result, 1)
	go func() {
		p, err := l.acquireOne(ctx, c)
		ch <- result{p, err}
	}()
	return ch
}

// queueUp starts an Acquire and waits until it is queued, so that the order
// of arrival is the order of the calls.
func queueUp(t *testing.T, ctx context.Context, l *Limiter, c Class) <-chan result {
	t.Helper()
	before := queued(l)
	ch := acquireAsync(ctx, l, c)
	fixture.WaitFor(t, "the caller to queue", func() bool { return queued(l) == before+1 })
	return ch
}

func mustAcquire(t *testing.T, l *Limiter, c Class) Permit {
	t.Helper()
	p, err := l.acquireOne(context.Background(), c)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return p
}

func recv(t *testing.T, ch <-chan result) result { return fixture.Recv(t, ch, "Acquire") }

func checkIdle(t *testing.T, l *Limiter) {
	t.Helper()
	if n := l.Stats().InFlight; n != 0 {
		t.Errorf("InFlight = %d after every permit was released, want 0", n)
	}
	if n := queued(l); n != 0 {
		t.Errorf("Queued = %d after every caller returned, want 0", n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit := l.cfg.Load().limit; len(l.free) != limit || l.excess != 0 || l.queued != 0 || l.queues[0].head != nil || l.queues[1].head != nil {
		t.Errorf("internal state not idle: %d of %d slots free, %d going out of use, %d queued", len(l.free), limit, l.excess, l.queued)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c  Config
		ok bool
	}{
		{Config{}, true},
		{Config{Limit: 8, Queue: 64, Wait: time.Second}, true},
		{Config{Limit: 8}, true},
		{Config{Limit: 0, Queue: 5}, true}, // disabled: the queue is never used
		{Config{Limit: -1}, false},
		{Config{Limit: 1, Queue: -1, Wait: time.Second}, false},
		{Config{Limit: 1, Queue: 1, Wait: -time.Second}, false},
		{Config{Limit: 1, Queue: 1}, false}, // waiting without a bound
	} {
		if err := tc.c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate = %v, want ok=%v", tc.c, err, tc.ok)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("New accepted an invalid Config")
		}
	}()
	New(Config{Limit: 1, Queue: 1})
}

func TestDisabled(t *testing.T) {
	for name, l := range map[string]*Limiter{"zero limit": New(Config{}), "nil": nil} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // even a dead context: admitting costs nothing, and the caller finds out on its own
		var ps []Permit
		for range 1000 {
			p, err := l.acquireOne(ctx, Anonymous)
			if err != nil {
				t.Fatalf("%s: Acquire: %v", name, err)
			}
			ps = append(ps, p)
		}
		if l.Stats().InFlight != 0 || queued(l) != 0 || l.Stats().Limit != 0 {
			t.Errorf("%s: gauges %d/%d/%d, want zeros", name, l.Stats().InFlight, queued(l), l.Stats().Limit)
		}
		for _, p := range ps {
			p.Release()
		}
		allocs := testing.AllocsPerRun(100, func() {
			p, _ := l.acquireOne(context.Background(), Keyed)
			p.Release()
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Acquire/Release, want 0", name, allocs)
		}
	}
}

// TestPeakUnderLoad hammers a limiter from many goroutines of both classes and
// checks, with a counter kept outside the limiter, that no more than Limit
// callers ever held a slot at once, and that everyone got through.
func TestPeakUnderLoad(t *testing.T) {
	const limit, callers, rounds = 4, 64, 20
	l := New(Config{Limit: limit, Queue: callers, Wait: long})
	var inside, peak, served atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			c := Class(i % 2)
			for range rounds {
				p, err := l.acquireOne(context.Background(), c)
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				n := inside.Add(1)
				for {
					old := peak.Load()
					if n <= old || peak.CompareAndSwap(old, n) {
						break
					}
				}
				if g := l.Stats().InFlight; g > limit {
					t.Errorf("InFlight = %d > limit %d", g, limit)
				}
				time.Sleep(50 * time.Microsecond)
				inside.Add(-1)
				served.Add(1)
				p.Release()
				p.Release() // idempotent: must not free a second slot
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Errorf("peak concurrency %d, limit %d", p, limit)
	} else if p < limit {
		t.Errorf("peak concurrency %d never reached the limit %d: the limiter admits too few", p, limit)
	}
	if s := served.Load(); s != callers*rounds {
		t.Errorf("served %d, want %d", s, callers*rounds)
	}
	if st := l.Stats(); st.Admitted != callers*rounds || st.Refused != [numReasons]uint64{} || st.Canceled != 0 {
		t.Errorf("Stats = %+v, want %d admitted and nothing else", st, callers*rounds)
	}
	checkIdle(t, l)
}

// TestPriority: when a slot frees, every waiting Keyed caller goes before any
// Anonymous one, each class in arrival order.
func TestPriority(t *testing.T) {
	l := New(Config{Limit: 1, Queue: 10, Wait: long})
	ctx := context.Background()
	holder := mustAcquire(t, l, Anonymous)
	order := []Class{Anonymous, Keyed, Anonymous, Keyed, Anonymous, Keyed}
	chans := make([]<-chan result, len(order))
	for i, c := range order {
		chans[i] = queueUp(t, ctx, l, c)
	}
	want := []int{1, 3, 5, 0, 2, 4} // keyed in arrival order, then anonymous in arrival order
	prev := holder
	for _, i := range want {
		prev.Release()
		r := recv(t, chans[i])
		if r.err != nil {
			t.Fatalf("caller %d: %v", i, r.err)
		}
		for j, ch := range chans {
			select {
			case r := <-ch:
				t.Fatalf("caller %d admitted while caller %d should hold the only slot (err %v)", j, i, r.err)
			default:
			}
		}
		if l.Stats().InFlight != 1 {
			t.Fatalf("InFlight = %d, want 1", l.Stats().InFlight)
		}
		prev = r.p
	}
	prev.Release()
	checkIdle(t, l)
}

// TestPriorityAfterArrival: a Keyed caller that arrives after Anonymous ones
// have waited a long time still goes first.
func TestKeyedOvertakes(t *testing.T) {
	l := New(Config{Limit: 2, Queue: 10, Wait: long})
	ctx := context.Background()
	a, b := mustAcquire(t, l, Anonymous), mustAcquire(t, l, Anonymous)
	anon := queueUp(t, ctx, l, Anonymous)
	keyed := queueUp(t, ctx, l, Keyed)
	a.Release()
	r := recv(t, keyed)
	if r.err != nil {
		t.Fatal(r.err)
	}
	select {
	case <-anon:
		t.Fatal("anonymous caller admitted ahead of a keyed one")
	default:
	}
	b.Release()
	ra := recv(t, anon)
	if ra.err != nil {
		t.Fatal(ra.err)
	}
	r.p.Release()
	ra.p.Release()
	checkIdle(t, l)
}

func TestQueueFull(t *testing.T) {
	l := New(Config{Limit: 1, Queue: 2, Wait: long})
	ctx := context.Background()
	holder := mustAcquire(t, l, Keyed)
	a1 := queueUp(t, ctx, l, Anonymous)
	a2 := queueUp(t, ctx, l, Anonymous)

	start := time.Now()
	_, err := l.acquireOne(ctx, Anonymous)
	var be *BusyError
	if !errors.Is(err, ErrBusy) || !errors.As(err, &be) {
		t.Fatalf("anonymous caller at a full queue: %v, want a BusyError", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusal at a full queue took %v; it must be immediate", d)
	}
	if be.RetryAfter != time.Minute || be.Reason != QueueFull {
		t.Errorf("refusal %+v, want QueueFull with the wait bound, 1m0s", *be)
	}

	// A keyed caller takes the place of the newest anonymous waiter.
	k := acquireAsync(ctx, l, Keyed)
	if r := recv(t, a2); !errors.As(r.err, &be) || be.Reason != Displaced {
		t.Fatalf("displaced anonymous waiter: %v, want a Displaced BusyError", r.err)
	}
	if l.Stats().QueuedKeyed != 1 || l.Stats().QueuedAnonymous != 1 {
		t.Fatalf("queued keyed %d anonymous %d, want 1 and 1 (the keyed caller and a1)", l.Stats().QueuedKeyed, l.Stats().QueuedAnonymous)
	}
	// With the queue full of keyed callers, a keyed caller is refused too.
	k2 := acquireAsync(ctx, l, Keyed) // displaces a1
	if r := recv(t, a1); !errors.As(r.err, &be) || be.Reason != Displaced {
		t.Fatalf("second displaced anonymous waiter: %v, want a Displaced BusyError", r.err)
	}
	if l.Stats().QueuedKeyed != 2 || l.Stats().QueuedAnonymous != 0 {
		t.Fatalf("queued keyed %d anonymous %d, want 2 and 0", l.Stats().QueuedKeyed, l.Stats().QueuedAnonymous)
	}
	if _, err := l.acquireOne(ctx, Keyed); !errors.As(err, &be) || be.Reason != QueueFull {
		t.Fatalf("keyed caller at a queue full of keyed callers: %v, want QueueFull", err)
	}
	st := l.Stats()
	if st.Refused != [numReasons]uint64{QueueFull: 2, Displaced: 2} || st.Admitted != 1 || st.Waited != 4 || st.InFlight != 1 || st.QueuedKeyed != 2 {
		t.Errorf("Stats = %+v", st)
	}

	holder.Release()
	r := recv(t, k)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.p.Release()
	r2 := recv(t, k2)
	if r2.err != nil {
		t.Fatal(r2.err)
	}
	r2.p.Release()
	checkIdle(t, l)
}

// TestNoAllocs: the uncontended path and refusals at a full queue allocate
// nothing, so that a flood costs the gateway no garbage.
func TestNoAllocs(t *testing.T) {
	l := New(Config{Limit: DefaultLimit, Queue: DefaultQueue, Wait: DefaultWait})
	ctx := context.Background()
	if a := testing.AllocsPerRun(1000, func() {
		p, _ := l.acquireOne(ctx, Anonymous)
		p.Release()
	}); a != 0 {
		t.Errorf("uncontended Acquire/Release: %v allocations, want 0", a)
	}
	full := New(Config{Limit: 1})
	holder := mustAcquire(t, full, Keyed)
	if a := testing.AllocsPerRun(1000, func() {
		if _, err := full.acquireOne(ctx, Anonymous); err == nil {
			t.Fatal("admitted past the limit")
		}
	}); a != 0 {
		t.Errorf("refusal: %v allocations, want 0", a)
	}
	holder.Release()
	checkIdle(t, full)
}

func TestNoQueue(t *testing.T) {
	l := New(Config{Limit: 1})
	p := mustAcquire(t, l, Keyed)
	if _, err := l.acquireOne(context.Background(), Keyed); !errors.Is(err, ErrBusy) {
		t.Fatalf("Queue 0: %v, want ErrBusy at once", err)
	}
	p.Release()
	mustAcquire(t, l, Anonymous).Release()
	checkIdle(t, l)
}

func TestWaitBound(t *testing.T) {
	const wait = 30 * time.Millisecond
	l := New(Config{Limit: 1, Queue: 4, Wait: wait})
	holder := mustAcquire(t, l, Anonymous)
	for _, c := range []Class{Anonymous, Keyed} {
		start := time.Now()
		_, err := l.acquireOne(context.Background(), c)
		d := time.Since(start)
		var be *BusyError
		if !errors.As(err, &be) {
			t.Fatalf("%v: %v, want a BusyError after the wait bound", c, err)
		}
		if be.RetryAfter != time.Second || be.Reason != WaitTimeout {
			t.Errorf("refusal %+v, want WaitTimeout with RetryAfter 1s (the wait bound rounded up)", *be)
		}
		if d < wait {
			t.Errorf("%v: refused after %v, before the wait bound %v", c, d, wait)
		}
		if queued(l) != 0 {
			t.Errorf("Queued = %d after a timeout, want 0", queued(l))
		}
	}
	holder.Release()
	checkIdle(t, l)
}

func TestCancelWhileWaiting(t *testing.T) {
	l := New(Config{Limit: 1, Queue: 4, Wait: long})
	holder := mustAcquire(t, l, Anonymous)
	ctx, cancel := context.WithCancel(context.Background())
	ch := queueUp(t, ctx, l, Keyed)
	other := queueUp(t, context.Background(), l, Anonymous)
	cancel()
	r := recv(t, ch)
	if !errors.Is(r.err, context.Canceled) || r.p != (Permit{}) {
		t.Fatalf("canceled waiter: %+v, want context.Canceled and no permit", r)
	}
	if queued(l) != 1 {
		t.Fatalf("Queued = %d, want 1: the canceled caller must leave the queue", queued(l))
	}
	// The slot goes to the remaining waiter, not to the departed one.
	holder.Release()
	ro := recv(t, other)
	if ro.err != nil {
		t.Fatal(ro.err)
	}
	ro.p.Release()
	checkIdle(t, l)

	// A context that is already over does not queue.
	holder = mustAcquire(t, l, Anonymous)
	if _, err := l.acquireOne(ctx, Keyed); !errors.Is(err, context.Canceled) {
		t.Fatalf("dead context: %v", err)
	}
	holder.Release()
	checkIdle(t, l)

	// A deadline is a context end like any other.
	holder = mustAcquire(t, l, Anonymous)
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer dcancel()
	if _, err := l.acquireOne(dctx, Keyed); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v", err)
	}
	holder.Release()
	checkIdle(t, l)
}

// TestCancelRace races grants against cancellations and timeouts: whatever
// wins, no slot is lost or doubled, and nobody is left queued.
func TestCancelRace(t *testing.T) {
	const limit = 2
	l := New(Config{Limit: limit, Queue: 16, Wait: 2 * time.Millisecond})
	var inside, over atomic.Int64
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			for j := range 200 {
				ctx, cancel := context.WithCancel(context.Background())
				if (i+j)%3 == 0 {
					go cancel()
				}
				p, err := l.acquireOne(ctx, Class(j%2))
				if err == nil {
					if inside.Add(1) > limit {
						over.Add(1)
					}
					runtime.Gosched()
					inside.Add(-1)
					p.Release()
				} else if !errors.Is(err, ErrBusy) && !errors.Is(err, context.Canceled) {
					t.Errorf("unexpected error %v", err)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if over.Load() != 0 {
		t.Errorf("limit exceeded %d times", over.Load())
	}
	checkIdle(t, l)
}

func TestReleaseIdempotent(t *testing.T) {
	l := New(Config{Limit: 1, Queue: 1, Wait: long})
	p := mustAcquire(t, l, Anonymous)
	cp := p
	p.Release()
	p.Release()
	cp.Release()
	// The slot is reused; the stale permit must not free it.
	q := mustAcquire(t, l, Anonymous)
	p.Release()
	if l.Stats().InFlight != 1 {
		t.Fatalf("a stale Release freed the new holder's slot: InFlight = %d", l.Stats().InFlight)
	}
	waiting := queueUp(t, context.Background(), l, Keyed)
	p.Release()
	select {
	case <-waiting:
		t.Fatal("a stale Release handed the slot to a waiter")
	case <-time.After(5 * time.Millisecond):
	}
	q.Release()
	r := recv(t, waiting)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.p.Release()
	Permit{}.Release()
	checkIdle(t, l)
}

// TestAcquireAll: the station limiter is taken first, so a request waiting for
// the station's slot holds no global slot, and a refusal by the global
// limiter gives back the station's slot.
func TestAcquireAll(t *testing.T) {
	station := New(Config{Limit: 1, Queue: 4, Wait: long})
	global := New(Config{Limit: 2, Queue: 4, Wait: 20 * time.Millisecond})
	ctx := context.Background()

	first, err := AcquireAll(ctx, Keyed, station, global)
	if err != nil {
		t.Fatal(err)
	}
	if station.Stats().InFlight != 1 || global.Stats().InFlight != 1 {
		t.Fatalf("in flight: station %d global %d, want 1 and 1", station.Stats().InFlight, global.Stats().InFlight)
	}
	type chainResult struct {
		ps  Permits
		err error
	}
	second := make(chan chainResult, 1)
	go func() {
		ps, err := AcquireAll(ctx, Keyed, station, global)
		second <- chainResult{ps, err}
	}()
	fixture.WaitFor(t, "the second request to wait for the station", func() bool { return queued(station) == 1 })
	if global.Stats().InFlight != 1 {
		t.Fatalf("a request waiting for its station holds a global slot: global in flight %d", global.Stats().InFlight)
	}
	// The global slot it does not hold serves another station meanwhile.
	other, err := AcquireAll(ctx, Anonymous, nil, global)
	if err != nil {
		t.Fatalf("another station could not get the free global slot: %v", err)
	}
	// A third request for the global limiter queues; first's global slot
	// will go to it, so that the second request finds the global limiter
	// full when it gets the station's slot.
	third := acquireAsync(context.Background(), global, Keyed)
	fixture.WaitFor(t, "the third request to queue", func() bool { return queued(global) == 1 })

	first.Release()
	r3 := recv(t, third)
	if r3.err != nil {
		t.Fatal(r3.err)
	}
	var r chainResult
	select {
	case r = <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("second AcquireAll did not return")
	}
	var be *BusyError
	if !errors.As(r.err, &be) || be.Reason != WaitTimeout {
		t.Fatalf("second request: %v, want WaitTimeout from the global limiter", r.err)
	}
	if station.Stats().InFlight != 0 {
		t.Fatalf("a refusal by the global limiter kept the station's slot")
	}
	if r.ps != (Permits{}) {
		t.Fatalf("refused AcquireAll returned permits")
	}
	other.Release()
	other.Release()
	r3.p.Release()
	checkIdle(t, station)
	checkIdle(t, global)
}

// TestAcquireAllSharedDeadline: the chain waits at most its longest wait
// bound in all; time spent on the station counts against the global wait.
// What is measured is how long the chain still waited after the station
// was given: two bounds would make it a whole wait or more (a timer never
// fires early), one bound ends at the chain's deadline, a quarter of a wait
// after the station's release at most, which leaves 1.5 s for a busy
// machine to delay the timer.
func TestAcquireAllSharedDeadline(t *testing.T) {
	const wait = 2 * time.Second
	station := New(Config{Limit: 1, Queue: 4, Wait: wait})
	global := New(Config{Limit: 1, Queue: 4, Wait: wait})
	ctx := context.Background()
	sHold := mustAcquire(t, station, Anonymous)
	gHold := mustAcquire(t, global, Anonymous)
	done := make(chan chainResultT, 1)
	start := time.Now()
	go func() {
		ps, err := AcquireAll(ctx, Keyed, station, global)
		done <- chainResultT{ps, err, time.Since(start)}
	}()
	fixture.WaitFor(t, "the chain to wait for the station", func() bool { return queued(station) == 1 })
	time.Sleep(wait / 4)
	released := time.Now()
	sHold.Release() // the station is granted; the global limiter is still held
	r := fixture.Recv(t, done, "AcquireAll")
	var be *BusyError
	if !errors.As(r.err, &be) || be.Reason != WaitTimeout {
		t.Fatalf("chain: %v, want WaitTimeout", r.err)
	}
	if after := start.Add(r.took).Sub(released); r.took < wait || after >= wait {
		t.Errorf("chain refused after %v, %v of it after the station was given; want one wait bound (%v) in all, not a second one on the global limiter", r.took, after, wait)
	}
	gHold.Release()
	checkIdle(t, station)
	checkIdle(t, global)

	// A chain whose deadline passed before it reaches a limiter with a
	// queue is refused there with WaitTimeout, without queueing.
	past := time.Now().Add(-time.Second)
	gHold = mustAcquire(t, global, Anonymous)
	if _, err := global.acquire(ctx, Keyed, past); !errors.As(err, &be) || be.Reason != WaitTimeout {
		t.Fatalf("past deadline: %v, want WaitTimeout", err)
	}
	gHold.Release()
	checkIdle(t, global)
}

type chainResultT struct {
	ps   Permits
	err  error
	took time.Duration
}

func TestAcquireAllPanics(t *testing.T) {
	l := New(Config{Limit: 1})
	for name, ls := range map[string][]*Limiter{
		"too many":     make([]*Limiter, maxChain+1),
		"same limiter": {l, nil, l},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: AcquireAll did not panic", name)
				}
			}()
			AcquireAll(context.Background(), Keyed, ls...)
		}()
	}
	checkIdle(t, l)
}

// TestNoGoroutineLeak: the limiter starts no goroutines and leaves none
// behind, however its callers leave.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	l := New(Config{Limit: 1, Queue: 8, Wait: 5 * time.Millisecond})
	holder := mustAcquire(t, l, Anonymous)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			c := context.Background()
			if i%2 == 0 {
				c = ctx
			}
			if p, err := l.acquireOne(c, Class(i%2)); err == nil {
				p.Release()
			}
		})
	}
	cancel()
	wg.Wait()
	holder.Release()
	checkIdle(t, l)
	fixture.WaitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestStrings(t *testing.T) {
	for got, want := range map[string]string{
		Keyed.String():                            "keyed",
		Anonymous.String():                        "anonymous",
		Class(7).String():                         "anonymous",
		QueueFull.String():                        "queue_full",
		WaitTimeout.String():                      "wait_timeout",
		Displaced.String():                        "displaced",
		Reason(9).String():                        "Reason(9)",
		(&BusyError{Reason: WaitTimeout}).Error(): "admission: backend busy: wait_timeout",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestDefaults(t *testing.T) {
	for _, c := range []Config{
		{Limit: DefaultLimit, Queue: DefaultQueue, Wait: DefaultWait},
		{Limit: DefaultMainThreadLimit, Queue: DefaultMainThreadQueue, Wait: DefaultWait},
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if DefaultLimit != 8 || DefaultMainThreadLimit != 1 {
		t.Error("default limits: 8 for the backend, 1 for the main thread")
	}
	// Retry-After is the wait bound rounded up to whole seconds.
	for wait, want := range map[time.Duration]time.Duration{
		time.Millisecond: time.Second, 2 * time.Second: 2 * time.Second, 2001 * time.Millisecond: 3 * time.Second,
	} {
		l := New(Config{Limit: 1, Queue: 1, Wait: wait})
		if got := l.cfg.Load().busy[QueueFull].RetryAfter; got != want {
			t.Errorf("wait %v: RetryAfter %v, want %v", wait, got, want)
		}
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	l := New(Config{Limit: DefaultLimit, Queue: DefaultQueue, Wait: DefaultWait})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, _ := l.acquireOne(ctx, Anonymous)
		p.Release()
	}
}

func BenchmarkAcquireAll(b *testing.B) {
	station := New(Config{Limit: DefaultMainThreadLimit, Queue: DefaultMainThreadQueue, Wait: DefaultWait})
	global := New(Config{Limit: DefaultLimit, Queue: DefaultQueue, Wait: DefaultWait})
	ls := []*Limiter{station, global}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ps, _ := AcquireAll(ctx, Keyed, ls...)
		ps.Release()
	}
}

func BenchmarkDisabled(b *testing.B) {
	l := New(Config{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, _ := l.acquireOne(ctx, Anonymous)
		p.Release()
	}
}

// BenchmarkContended: more goroutines than slots, so callers queue and slots
// are handed over.
func BenchmarkContended(b *testing.B) {
	l := New(Config{Limit: 2, Queue: 1 << 20, Wait: long})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := l.acquireOne(ctx, Anonymous)
			if err != nil {
				b.Error(err)
				return
			}
			p.Release()
		}
	})
}

// acquireOne is one limiter's acquire, with no deadline of AcquireAll's.
func (l *Limiter) acquireOne(ctx context.Context, c Class) (Permit, error) {
	return l.acquire(ctx, c, time.Time{})
}
