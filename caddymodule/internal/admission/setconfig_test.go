package admission

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSetConfigLower: with 8 slots held, a limit lowered to 2 admits nobody
// new until fewer than 2 are held; the slots given back meanwhile go out of
// use, not to the waiters.
func TestSetConfigLower(t *testing.T) {
	l := New(Config{Limit: 8, Queue: 10, Wait: long})
	ctx := context.Background()
	var held []Permit
	for range 8 {
		held = append(held, mustAcquire(t, l, Anonymous))
	}
	waiter := queueUp(t, ctx, l, Keyed)
	l.SetConfig(Config{Limit: 2, Queue: 10, Wait: long})
	if s := l.Stats(); s.Limit != 2 || s.InFlight != 8 {
		t.Fatalf("after lowering: limit %d, in flight %d; want 2 and the 8 still counted", s.Limit, s.InFlight)
	}
	for i := range 6 { // 8 → 2 held: each release takes a slot out of use
		held[i].Release()
		select {
		case r := <-waiter:
			t.Fatalf("a waiter was admitted with %d held under a limit of 2 (err %v)", 8-i-1, r.err)
		default:
		}
	}
	if n := l.Stats().InFlight; n != 2 {
		t.Fatalf("in flight %d, want 2", n)
	}
	held[6].Release() // 1 held: now there is room
	r := recv(t, waiter)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := l.Stats().InFlight; n != 2 {
		t.Errorf("in flight %d after the waiter got in, want 2", n)
	}
	held[7].Release()
	r.p.Release()
	checkIdle(t, l)
}

// TestSetConfigRaise: a higher limit admits the waiters at once, keyed first.
func TestSetConfigRaise(t *testing.T) {
	l := New(Config{Limit: 1, Queue: 10, Wait: long})
	ctx := context.Background()
	holder := mustAcquire(t, l, Anonymous)
	anon := queueUp(t, ctx, l, Anonymous)
	keyed := queueUp(t, ctx, l, Keyed)
	l.SetConfig(Config{Limit: 2, Queue: 10, Wait: long})
	rk := recv(t, keyed)
	if rk.err != nil {
		t.Fatal(rk.err)
	}
	select {
	case <-anon:
		t.Fatal("both waiters admitted with room for one more")
	default:
	}
	l.SetConfig(Config{Limit: 3, Queue: 10, Wait: long})
	ra := recv(t, anon)
	if ra.err != nil {
		t.Fatal(ra.err)
	}
	for _, p := range []Permit{holder, rk.p, ra.p} {
		p.Release()
	}
	checkIdle(t, l)
}

// TestSetConfigLowerThenRaise: a raise after a lower limit first cancels the
// slots still due to go out of use, so the count stays exact.
func TestSetConfigLowerThenRaise(t *testing.T) {
	l := New(Config{Limit: 4, Queue: 4, Wait: long})
	var held []Permit
	for range 4 {
		held = append(held, mustAcquire(t, l, Anonymous))
	}
	l.SetConfig(Config{Limit: 1, Queue: 4, Wait: long}) // 3 due to go
	l.SetConfig(Config{Limit: 6, Queue: 4, Wait: long}) // 3 back, 2 new
	for range 2 {
		held = append(held, mustAcquire(t, l, Anonymous))
	}
	if _, err := l.acquireOne(done(), Anonymous); err == nil {
		t.Fatal("a 7th caller was admitted under a limit of 6")
	}
	for _, p := range held {
		p.Release()
	}
	checkIdle(t, l)
}

// TestSetConfigDisable: turned off, the limiter lets its waiters in at once;
// turned on again, the callers still holding slots count.
func TestSetConfigDisable(t *testing.T) {
	l := New(Config{Limit: 1, Queue: 10, Wait: long})
	ctx := context.Background()
	holder := mustAcquire(t, l, Anonymous)
	w := queueUp(t, ctx, l, Anonymous)
	l.SetConfig(Config{})
	if r := recv(t, w); r.err != nil {
		t.Fatal(r.err)
	}
	l.SetConfig(Config{Limit: 1, Queue: 0})
	if _, err := l.acquireOne(ctx, Keyed); !errors.Is(err, ErrBusy) {
		t.Fatalf("Acquire with the one slot still held from before: %v, want busy", err)
	}
	holder.Release()
	p := mustAcquire(t, l, Keyed)
	p.Release()
	checkIdle(t, l)
}

// TestSetConfigQueue: a shorter queue refuses newcomers, and the waiters
// already queued keep their places.
func TestSetConfigQueue(t *testing.T) {
	l := New(Config{Limit: 1, Queue: 3, Wait: long})
	ctx := context.Background()
	holder := mustAcquire(t, l, Anonymous)
	a := queueUp(t, ctx, l, Anonymous)
	b := queueUp(t, ctx, l, Anonymous)
	l.SetConfig(Config{Limit: 1, Queue: 1, Wait: time.Second})
	var be *BusyError
	if _, err := l.acquireOne(ctx, Anonymous); !errors.As(err, &be) || be.Reason != QueueFull || be.RetryAfter != time.Second {
		t.Fatalf("Acquire past the shorter queue: %v, want QueueFull with Retry-After 1s", err)
	}
	holder.Release()
	ra := recv(t, a)
	ra.p.Release()
	rb := recv(t, b)
	if ra.err != nil || rb.err != nil {
		t.Fatalf("queued callers: %v, %v", ra.err, rb.err)
	}
	rb.p.Release()
	checkIdle(t, l)
}

// TestSetConfigUnderLoad changes the limit back and forth while callers of
// both classes come and go, and checks with a counter kept outside the
// limiter that no more callers ever held a slot than the highest limit in
// force, and, once the last change has settled, no more than it. Run it with
// -race.
func TestSetConfigUnderLoad(t *testing.T) {
	const callers, rounds = 32, 30
	l := New(Config{Limit: 8, Queue: callers, Wait: long})
	var inside, peak, served atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var changer sync.WaitGroup
	changer.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			l.SetConfig(Config{Limit: []int{8, 2, 5, 1, 8}[i%5], Queue: callers, Wait: long})
			time.Sleep(100 * time.Microsecond)
		}
	})
	for i := range callers {
		wg.Go(func() {
			for range rounds {
				p, err := l.acquireOne(context.Background(), Class(i%2))
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				n := inside.Add(1)
				for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
				}
				time.Sleep(20 * time.Microsecond)
				inside.Add(-1)
				served.Add(1)
				p.Release()
			}
		})
	}
	wg.Wait()
	close(stop)
	changer.Wait()
	if p := peak.Load(); p > 8 {
		t.Errorf("peak %d callers inside, above the highest limit in force, 8", p)
	}
	if s := served.Load(); s != callers*rounds {
		t.Errorf("served %d, want %d", s, callers*rounds)
	}
	l.SetConfig(Config{Limit: 3, Queue: callers, Wait: long})
	var ps []Permit
	for range 3 {
		ps = append(ps, mustAcquire(t, l, Anonymous))
	}
	if _, err := l.acquireOne(done(), Keyed); err == nil {
		t.Error("a 4th caller admitted under a limit of 3 after the changes")
	}
	for _, p := range ps {
		p.Release()
	}
	checkIdle(t, l)
}

// done is an ended context: Acquire with it takes a free slot or returns at
// once.
func done() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
