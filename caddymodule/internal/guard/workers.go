package guard

import (
	"sync/atomic"
	"time"
)

// workers are goroutines kept between errands. A trip's goroutine grows its
// stack to the depth of reverse_proxy's call chain, and one new goroutine
// per trip paid for its start and for that growth on every request (about
// a third of what the errands cost a trip that the caller waits for); an
// idle worker takes the next errand with the stack it has. A worker left
// idle for workerIdle ends, so that a burst leaves nothing behind. How many
// there are is bounded by the trips at the backend at once: each errand
// holds an admission slot until it ends.
type workers struct {
	idle chan runner
	wait time.Duration // how long a worker waits for its next errand
	live atomic.Int32  // workers running or idle
}

// runner is a worker's work: an errand (an interface, rather than a func
// value, so that handing one over allocates no closure).
type runner interface{ run() }

// errandWorkers run every guard's errands (run recovers a trip's panic, so
// a worker outlives it).
var errandWorkers = workers{idle: make(chan runner), wait: workerIdle}

// workerIdle is how long a worker of errandWorkers waits for its next
// errand.
const workerIdle = 10 * time.Second

// start runs e on an idle worker, or on a new one when none is idle.
func (w *workers) start(e runner) {
	select {
	case w.idle <- e:
	default:
		w.live.Add(1)
		go w.work(e)
	}
}

// work runs e, then each errand it is given, until none comes for w.wait.
// The idle timer is not reset after each errand, which would move it in
// the runtime's timer heap on every trip: it fires once per w.wait at
// most, and the worker then waits on for what is left of w.wait since its
// last errand, or ends.
func (w *workers) work(e runner) {
	defer w.live.Add(-1)
	t := time.NewTimer(w.wait)
	defer t.Stop()
	for {
		e.run()
		last := time.Now()
		for e = nil; e == nil; {
			select {
			case e = <-w.idle:
			case <-t.C:
				left := w.wait - time.Since(last)
				if left <= 0 {
					return
				}
				t.Reset(left)
			}
		}
	}
}
