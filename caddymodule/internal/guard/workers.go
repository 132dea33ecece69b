package guard

import "time"

// workers are goroutines kept between errands. A trip's goroutine grows its
// stack to the depth of reverse_proxy's call chain, and one new goroutine
// per trip paid for its start and for that growth on every request (about
// a third of what the errands cost a trip that the caller waits for); an
// idle worker takes the next errand with the stack it has. A worker left
// idle for workerIdle ends, so that a burst leaves nothing behind.
type workers struct {
	idle chan func()
}

// errandWorkers run every guard's errands (run recovers a trip's panic, so
// a worker outlives it).
var errandWorkers = workers{idle: make(chan func())}

// workerIdle is how long a worker waits for its next errand.
const workerIdle = 10 * time.Second

// start runs f on an idle worker, or on a new one when none is idle.
func (w *workers) start(f func()) {
	select {
	case w.idle <- f:
	default:
		go w.work(f)
	}
}

// work runs f, then each errand it is given, until none comes for
// workerIdle.
func (w *workers) work(f func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		t.Reset(workerIdle)
		select {
		case f = <-w.idle:
		case <-t.C:
			return
		}
	}
}
