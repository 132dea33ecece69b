// Package admission caps how many requests a fragile backend works on at once.
//
// The ServerAPI plugin serves HTTP from a fixed pool of threads (8 by default)
// with an unbounded queue in front of it, and some of its stations block for
// seconds (/player up to about 1.4 s for an offline player, /placeholders up to
// 2 s on the game's main thread). A gateway that forwards every request it
// allows would let one client's flood fill that queue, and every other caller,
// the operator's own bots included, would wait behind it. A Limiter keeps the
// queue in the gateway instead, where it is bounded in length and in time, and
// where callers with an accepted key go first.
//
// A Limiter admits at most Limit callers at once. The others wait in a queue
// of at most Queue callers for at most Wait; a caller refused past either bound
// gets a *BusyError (errors.Is(err, ErrBusy)) that says which bound refused it
// and what Retry-After to suggest; the gateway answers it with 503. When a slot
// frees it goes to the longest-waiting Keyed caller, and to an Anonymous one
// only when no Keyed caller waits (strict priority, first come first served
// within a class). A Keyed caller that finds the queue full takes the place of
// the most recently queued Anonymous one.
//
// Limiters compose: a station that runs on the game's main thread has its own
// small Limiter, acquired before the global one (see AcquireAll), so that a
// request waiting for its station's slot never holds a global slot meanwhile.
//
// A waiting caller waits in its own goroutine: the limiter starts none, and a
// caller that leaves (its context ends, its wait bound passes) leaves nothing
// behind. Its gauges and counters (Stats) are atomics that metrics read
// without taking the limiter's lock.
package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Class is how a caller ranks in the queue.
type Class uint8

const (
	// Anonymous callers presented no accepted key. They are admitted only
	// when no Keyed caller waits. The zero Class, so that a caller whose
	// class was never set gets the lower rank.
	Anonymous Class = iota
	// Keyed callers presented an accepted API key: the operator's own
	// clients, which must keep working during an anonymous flood.
	Keyed
)

// String returns "anonymous" or "keyed", for logs and metric labels.
func (c Class) String() string {
	if c == Keyed {
		return "keyed"
	}
	return "anonymous"
}

// Defaults for the limiter in front of the whole backend.
const (
	// DefaultLimit matches the plugin's default HTTP thread pool
	// (http.threads: 8): more requests in flight would only queue inside the
	// plugin, unbounded and without priority.
	DefaultLimit = 8
	// DefaultQueue is eight waiters per slot. Snapshot stations answer in
	// milliseconds, so a full queue of them drains well within DefaultWait;
	// when slow stations hold the slots, the wait bound sheds the excess
	// instead, and the queue only bounds memory and the work of refusing.
	DefaultQueue = 64
	// DefaultWait is above the longest single backend call (/placeholders'
	// 2 s resolve timeout; /player about 1.4 s), so a Keyed caller, who is
	// next whenever a slot frees, is not refused because one slow call was
	// ahead of it; and short enough that a Keyed caller's whole request can
	// stay within about two seconds in a flood.
	DefaultWait = 2 * time.Second
)

// Defaults for the limiter of the stations that run on the game's main thread
// (/placeholders).
const (
	// DefaultMainThreadLimit is one: work on the main thread delays the game
	// tick for every player, and two resolutions at once only lag it twice
	// as long; one at a time keeps the lag to one request's own work.
	DefaultMainThreadLimit = 1
	// DefaultMainThreadQueue lets a short burst wait: a resolution usually
	// takes a tick or two (50-100 ms), so eight waiters drain in under a
	// second.
	DefaultMainThreadQueue = 8
)

// ErrBusy matches (errors.Is) every refusal for lack of capacity.
var ErrBusy = errors.New("admission: backend busy")

// Reason is which bound refused a caller.
type Reason uint8

const (
	// QueueFull: every slot was taken and the queue was full when the caller
	// arrived; it was refused at once.
	QueueFull Reason = iota
	// WaitTimeout: the caller queued, and its wait bound passed before a slot
	// freed.
	WaitTimeout
	// Displaced: an Anonymous caller that had queued gave its place to a
	// Keyed caller who found the queue full.
	Displaced

	numReasons
)

// String returns "queue_full", "wait_timeout" or "displaced", for logs and
// metric labels.
func (r Reason) String() string {
	switch r {
	case QueueFull:
		return "queue_full"
	case WaitTimeout:
		return "wait_timeout"
	case Displaced:
		return "displaced"
	}
	return fmt.Sprintf("Reason(%d)", r)
}

// BusyError is the error of a caller refused for lack of capacity. A Limiter
// returns the same few *BusyError values over and over, so that refusing a
// flood allocates nothing: treat them as read-only.
type BusyError struct {
	// Reason is which bound refused the caller.
	Reason Reason
	// RetryAfter is what to tell the caller (the Retry-After header): the
	// limiter's wait bound rounded up to whole seconds, at least one. Retries
	// then come about when a queue full of waiters has been served or shed.
	RetryAfter time.Duration
}

func (e *BusyError) Error() string        { return ErrBusy.Error() + ": " + e.Reason.String() }
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Config sets a Limiter's bounds. The zero Config is a disabled limiter.
type Config struct {
	// Limit is the most callers admitted at once. 0 disables the limiter:
	// it admits everyone at once, at no cost, and counts nothing.
	Limit int
	// Queue is the most callers that wait for a slot; past it a caller is
	// refused at once. 0 means no waiting at all.
	Queue int
	// Wait is the longest a caller waits for a slot before it is refused.
	// It must be positive when Queue is: nobody waits without a bound.
	Wait time.Duration
}

// Validate reports a Config that New would not accept.
func (c Config) Validate() error {
	switch {
	case c.Limit < 0:
		return fmt.Errorf("admission: limit %d is negative", c.Limit)
	case c.Queue < 0:
		return fmt.Errorf("admission: queue %d is negative", c.Queue)
	case c.Wait < 0:
		return fmt.Errorf("admission: wait %v is negative", c.Wait)
	case c.Limit > 0 && c.Queue > 0 && c.Wait == 0:
		return errors.New("admission: a queue needs a positive wait bound")
	}
	return nil
}

// Limiter is an admission limiter. The nil *Limiter is a disabled one. Its
// methods are safe for concurrent use.
//
// Its bounds can change while callers hold slots and wait (SetConfig): a
// config reload changes the limits of the guard that stays, the way
// caddy-ratelimit updates a zone, and nobody in flight or waiting is
// forgotten.
type Limiter struct {
	cfg atomic.Pointer[bounds] // read without the lock; replaced under mu

	mu     sync.Mutex
	gens   []uint64 // per slot: bumped on every grant and release, so a stale Permit never matches
	free   []int32  // slots nobody holds; never non-empty while someone waits
	spare  []int32  // slots out of use after a lower limit, for a higher one to reuse
	excess int      // held slots to take out of use when they are given back, after a lower limit
	queues [2]queue // indexed by Class
	queued int

	// Mirrors of the slots held and of each queue's length, written under
	// mu, so that metrics can read them without the lock.
	inFlightN atomic.Int64
	queuedN   [2]atomic.Int64

	admitted atomic.Uint64
	waited   atomic.Uint64
	canceled atomic.Uint64
	refused  [numReasons]atomic.Uint64
}

// bounds is a Config as the Limiter applies it, with the refusals it returns;
// immutable once stored.
type bounds struct {
	limit, queueMax int
	wait            time.Duration
	busy            [numReasons]*BusyError
}

// New returns a Limiter for c. It panics if c.Validate fails: configuration is
// validated before it gets here.
func New(c Config) *Limiter {
	l := new(Limiter)
	l.SetConfig(c)
	return l
}

// SetConfig changes the Limiter's bounds at once, for the callers who hold
// slots and wait as for those to come. A lower limit takes free slots out of
// use and, as long as more callers hold slots than it allows, admits nobody
// new: each slot given back goes out of use until the callers holding slots
// are within it. A higher limit admits waiters at once. A shorter queue or
// wait bound applies to callers who arrive from now on; those waiting keep
// their places and their deadlines. Limit 0 disables the limiter: waiters
// are admitted at once, and the callers who still hold slots count again
// should a later config enable it. It panics if c.Validate fails:
// configuration is validated before it gets here.
func (l *Limiter) SetConfig(c Config) {
	if err := c.Validate(); err != nil {
		panic(err)
	}
	b := &bounds{limit: c.Limit, queueMax: c.Queue, wait: c.Wait}
	if c.Queue == 0 {
		b.wait = 0
	}
	retry := max(time.Second, (b.wait+time.Second-1)/time.Second*time.Second)
	for r := range b.busy {
		b.busy[r] = &BusyError{Reason: Reason(r), RetryAfter: retry}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg.Store(b)
	if c.Limit == 0 {
		for _, q := range []*queue{&l.queues[Keyed], &l.queues[Anonymous]} {
			for w := q.head; w != nil; w = q.head {
				l.dequeue(w)
				w.decide(Permit{}, nil)
			}
		}
		return
	}
	// The slots that exist and are not going out of use.
	inUse := len(l.gens) - len(l.spare) - l.excess
	switch {
	case c.Limit > inUse:
		back := min(l.excess, c.Limit-inUse)
		l.excess -= back
		for range c.Limit - inUse - back {
			if n := len(l.spare); n > 0 {
				l.free = append(l.free, l.spare[n-1])
				l.spare = l.spare[:n-1]
			} else {
				l.gens = append(l.gens, 0)
				l.free = append(l.free, int32(len(l.gens)-1))
			}
		}
	case c.Limit < inUse:
		drop := inUse - c.Limit
		n := min(drop, len(l.free))
		l.spare = append(l.spare, l.free[len(l.free)-n:]...)
		l.free = l.free[:len(l.free)-n]
		l.excess += drop - n
	}
	for len(l.free) > 0 {
		w := l.queues[Keyed].head
		if w == nil {
			w = l.queues[Anonymous].head
		}
		if w == nil {
			break
		}
		slot := l.free[len(l.free)-1]
		l.free = l.free[:len(l.free)-1]
		l.inFlightN.Add(1)
		l.dequeue(w)
		w.decide(l.grant(slot), nil)
	}
}

// Permit is one admitted caller's slot. Release it when the backend is done
// with the request; Release is idempotent, on copies too, and a Permit never
// frees a slot that has since gone to someone else. The zero Permit, which a
// disabled limiter gives, releases nothing.
type Permit struct {
	l    *Limiter
	slot int32
	gen  uint64
}

// Release gives the slot to the next waiter, or frees it.
func (p Permit) Release() {
	if p.l != nil {
		p.l.release(p.slot, p.gen)
	}
}

// acquire waits for a slot for a caller of class c. It returns a *BusyError
// when the queue is full or the wait bound passes (or deadline, when not
// zero: the one AcquireAll shares between its limiters, earlier than the
// limiter's own wait bound), and ctx.Err() as soon as ctx ends while the
// caller waits. On error the Permit is zero and nothing is held. A free slot
// is granted without looking at ctx: admitting costs nothing, and a caller
// whose context has ended finds out at its next step. Any Class other than
// Keyed counts as Anonymous.
func (l *Limiter) acquire(ctx context.Context, c Class, deadline time.Time) (Permit, error) {
	if l == nil || l.cfg.Load().limit == 0 {
		return Permit{}, nil
	}
	if c != Keyed {
		c = Anonymous
	}
	l.mu.Lock()
	b := l.cfg.Load() // again under the lock: the bounds the slots are counted by
	if b.limit == 0 {
		l.mu.Unlock()
		return Permit{}, nil
	}
	if n := len(l.free); n > 0 {
		slot := l.free[n-1]
		l.free = l.free[:n-1]
		l.inFlightN.Add(1)
		p := l.grant(slot)
		l.mu.Unlock()
		l.admitted.Add(1)
		return p, nil
	}
	if err := ctx.Err(); err != nil {
		l.mu.Unlock()
		l.canceled.Add(1)
		return Permit{}, err
	}
	wait := b.wait
	if !deadline.IsZero() {
		wait = min(wait, time.Until(deadline))
	}
	if wait <= 0 && b.queueMax > 0 {
		// A chain's shared deadline passed while an earlier limiter kept
		// the caller waiting.
		l.mu.Unlock()
		return Permit{}, l.refuse(b, WaitTimeout)
	}
	var displaced *waiter
	if l.queued >= b.queueMax {
		displaced = l.queues[Anonymous].tail
		if c != Keyed || displaced == nil {
			l.mu.Unlock()
			return Permit{}, l.refuse(b, QueueFull)
		}
		// The newest anonymous waiter has waited least; it makes way. Its
		// refusal is counted by its own goroutine when it returns.
		l.dequeue(displaced)
	}
	w := &waiter{class: c, ready: make(chan struct{})}
	// Counted before the queue shows it: Stats, which reads the counts
	// without the lock, never shows a queued caller that Waited leaves out.
	l.waited.Add(1)
	l.enqueue(w)
	if displaced != nil {
		// Woken only once the queue holds its successor, so that whatever
		// it reads of the queue's counts on waking is already true.
		displaced.decide(Permit{}, b.busy[Displaced])
	}
	l.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var p Permit
	var err error
	select {
	case <-w.ready:
		p, err = w.permit, w.err
	case <-ctx.Done():
		p, err = l.abandon(w, ctx.Err())
	case <-timer.C:
		p, err = l.abandon(w, b.busy[WaitTimeout])
	}
	if be, ok := err.(*BusyError); ok {
		l.refused[be.Reason].Add(1)
	} else if err != nil {
		l.canceled.Add(1)
	} else {
		l.admitted.Add(1)
	}
	return p, err
}

// refuse counts a refusal for r and returns its error.
func (l *Limiter) refuse(b *bounds, r Reason) error {
	l.refused[r].Add(1)
	return b.busy[r]
}

// abandon takes w out of the queue after its context ended or its wait bound
// passed. If a slot or a refusal was decided for w meanwhile, that decision
// stands, except that a slot granted to a caller whose context ended is passed
// on at once.
func (l *Limiter) abandon(w *waiter, err error) (Permit, error) {
	l.mu.Lock()
	decided := w.decided
	if !decided {
		l.dequeue(w)
	}
	l.mu.Unlock()
	switch {
	case !decided:
		return Permit{}, err
	case w.err != nil:
		if timedOut(err) {
			return Permit{}, w.err // displaced just as time ran out
		}
		return Permit{}, err // the context ended: say so, not busy
	case timedOut(err):
		return w.permit, nil // admitted just as time ran out
	default:
		w.permit.Release()
		return Permit{}, err
	}
}

// timedOut reports whether err is a refusal for the wait bound.
func timedOut(err error) bool {
	be, ok := err.(*BusyError)
	return ok && be.Reason == WaitTimeout
}

// grant hands out slot under l.mu.
func (l *Limiter) grant(slot int32) Permit {
	l.gens[slot]++
	return Permit{l: l, slot: slot, gen: l.gens[slot]}
}

func (l *Limiter) release(slot int32, gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gens[slot] != gen {
		return // released before
	}
	l.gens[slot]++
	if l.excess > 0 {
		// A lower limit is not reached yet: the slot goes out of use.
		l.excess--
		l.spare = append(l.spare, slot)
		l.inFlightN.Add(-1)
		return
	}
	w := l.queues[Keyed].head
	if w == nil {
		w = l.queues[Anonymous].head
	}
	if w == nil {
		l.free = append(l.free, slot)
		l.inFlightN.Add(-1)
		return
	}
	l.dequeue(w)
	w.decide(l.grant(slot), nil)
}

// Stats is a snapshot of a Limiter's gauges and counters, for metrics. The
// fields are read one by one, without the lock, so under load they need not
// add up exactly at any single instant.
type Stats struct {
	Limit    int // the configured limit
	InFlight int // callers holding a slot
	// QueuedKeyed and QueuedAnonymous are the callers waiting, by class.
	QueuedKeyed, QueuedAnonymous int

	// Counters since New.
	Admitted uint64 // callers granted a slot, at once or after waiting
	Waited   uint64 // callers that queued, whatever came of it
	Canceled uint64 // callers whose context ended before they were admitted
	// Refused counts *BusyError refusals, indexed by Reason.
	Refused [numReasons]uint64
}

// Stats returns the limiter's gauges and counters. A disabled limiter counts
// nothing and reports zeros.
func (l *Limiter) Stats() Stats {
	if l == nil {
		return Stats{}
	}
	s := Stats{
		Limit:           l.cfg.Load().limit,
		InFlight:        int(l.inFlightN.Load()),
		QueuedKeyed:     int(l.queuedN[Keyed].Load()),
		QueuedAnonymous: int(l.queuedN[Anonymous].Load()),
		Admitted:        l.admitted.Load(),
		Waited:          l.waited.Load(),
		Canceled:        l.canceled.Load(),
	}
	for r := range s.Refused {
		s.Refused[r] = l.refused[r].Load()
	}
	return s
}

// maxChain is the most limiters AcquireAll takes at once.
const maxChain = 4

// Permits are the slots AcquireAll took. Release is idempotent.
type Permits struct {
	p [maxChain]Permit
}

// Release releases every slot, the last acquired first.
func (ps Permits) Release() {
	for i := len(ps.p) - 1; i >= 0; i-- {
		ps.p[i].Release()
	}
}

// AcquireAll acquires a slot of each limiter in the order given, and on any
// refusal releases what it took and returns that refusal.
//
// Give the narrowest limiter first (a station's own, then the global one). A
// caller then waits for its station's slot without holding a global slot that
// other stations could use, and holds its station's slot while it waits for a
// global one, which is what keeps only one main-thread request in the
// plugin's queue. The order is also what makes the chain deadlock-free: as
// long as every caller takes shared limiters in the same order (station
// limiters are never shared between stations, and the global one always comes
// last), nobody holds a later limiter's slot while waiting for an earlier one.
//
// The whole chain waits at most the longest of its limiters' wait bounds, not
// their sum: time spent waiting for the station counts against the wait for
// the global limiter. ctx bounds the whole. Nil limiters are skipped. It panics
// if given more than maxChain limiters, or the same limiter twice (a caller
// would wait for a slot it holds itself).
func AcquireAll(ctx context.Context, c Class, ls ...*Limiter) (Permits, error) {
	var ps Permits
	if len(ls) > maxChain {
		panic(fmt.Sprintf("admission: AcquireAll of %d limiters; at most %d", len(ls), maxChain))
	}
	var longest time.Duration
	for i, l := range ls {
		if l == nil {
			continue
		}
		for _, prev := range ls[:i] {
			if prev == l {
				panic("admission: AcquireAll given the same limiter twice")
			}
		}
		longest = max(longest, l.cfg.Load().wait)
	}
	deadline := time.Now().Add(longest)
	for i, l := range ls {
		p, err := l.acquire(ctx, c, deadline)
		if err != nil {
			ps.Release()
			return Permits{}, err
		}
		ps.p[i] = p
	}
	return ps, nil
}

// waiter is one queued caller. Its fields after ready is closed are written
// once, under the limiter's mutex, by whoever decides for it.
type waiter struct {
	class      Class
	ready      chan struct{}
	decided    bool
	permit     Permit
	err        error
	prev, next *waiter
}

// decide settles w's wait, under the limiter's mutex.
func (w *waiter) decide(p Permit, err error) {
	w.decided = true
	w.permit, w.err = p, err
	close(w.ready)
}

// queue is a FIFO of waiters of one class, linked through the waiters so that
// one leaving from the middle costs nothing.
type queue struct{ head, tail *waiter }

func (l *Limiter) enqueue(w *waiter) {
	q := &l.queues[w.class]
	w.prev = q.tail
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	l.queued++
	l.queuedN[w.class].Add(1)
}

func (l *Limiter) dequeue(w *waiter) {
	q := &l.queues[w.class]
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = nil, nil
	l.queued--
	l.queuedN[w.class].Add(-1)
}
