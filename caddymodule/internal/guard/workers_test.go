package guard

import (
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
)

// job is a runner of a test's own.
type job func()

func (j job) run() { j() }

// TestWorkersKeptWhileIdle: an idle worker takes the next errand, with no
// new goroutine.
func TestWorkersKeptWhileIdle(t *testing.T) {
	w := workers{idle: make(chan runner), wait: fixture.Patience}
	ran := make(chan int, 1)
	w.start(job(func() { ran <- 1 }))
	fixture.Recv(t, ran, "the first errand")
	for i := 2; i <= 3; i++ {
		w.idle <- job(func() { ran <- i }) // only an idle worker takes it
		if got := fixture.Recv(t, ran, "an errand of the idle worker"); got != i {
			t.Fatalf("errand %d ran as %d", i, got)
		}
	}
	if n := w.live.Load(); n != 1 {
		t.Errorf("%d workers for errands one after another, want 1", n)
	}
}

// TestWorkersEndWhenIdle: a worker given no errand for its wait ends,
// whether it ran one errand or several (its idle timer is not reset after
// each).
func TestWorkersEndWhenIdle(t *testing.T) {
	w := workers{idle: make(chan runner), wait: 20 * time.Millisecond}
	ran := make(chan struct{}, 8)
	for range 8 {
		w.start(job(func() { ran <- struct{}{} }))
		fixture.Recv(t, ran, "an errand")
	}
	fixture.WaitFor(t, "the idle workers to end", func() bool { return w.live.Load() == 0 })
}

// BenchmarkWorkersHandOff is an errand's way to an idle worker and its
// word back, as a trip its caller waits for takes it (errand.await): the
// two wake-ups each trip pays for running in a goroutine of its own.
func BenchmarkWorkersHandOff(b *testing.B) {
	w := workers{idle: make(chan runner), wait: workerIdle}
	done := make(chan struct{}, 1)
	j := job(func() { done <- struct{}{} })
	for b.Loop() {
		w.start(j)
		<-done
	}
}
