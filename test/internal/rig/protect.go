package rig

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
)

// HeldTogether sends n requests at once while the backend holds its answers
// (holdAnswers), and lets the answers go once every caller is where it is
// going to be: at the backend, waiting to share a trip (the coalesce_waiting
// gauge of every guard), or answered (refused, or out of the queue). It
// returns the responses in order. However slow the machine, no caller comes
// after a trip it should have shared has ended, as one could after
// sendSlow's 1.5 s.
func HeldTogether(t *testing.T, be *Backend, n int, req func(i int) Response) []Response {
	t.Helper()
	be.HoldAnswers()
	defer be.Release()
	out := make([]Response, n)
	var answered atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			out[i] = req(i)
			answered.Add(1)
		})
	}
	fixture.WaitFor(t, fmt.Sprintf("%d callers at the backend, sharing a trip or answered", n), func() bool {
		return be.AtBackend()+CoalesceWaiting(t)+int(answered.Load()) >= n
	})
	be.Release()
	wg.Wait()
	return out
}

// CoalesceWaiting is how many callers wait to share a trip, in every guard.
func CoalesceWaiting(t *testing.T) int {
	t.Helper()
	got, _ := ScrapeAdmin(t)
	waiting := 0
	for series, v := range got {
		if strings.HasPrefix(series, "caddy_http_statusgate_coalesce_waiting{") {
			waiting += int(v)
		}
	}
	return waiting
}

// AwaitKeptTrips waits until no guard keeps a trip past its caller: the
// trips whose callers got their 504 hold their places (their client's
// among them) until the backend has answered them.
func AwaitKeptTrips(t *testing.T) {
	t.Helper()
	fixture.WaitFor(t, "the trips kept past their callers answered", func() bool {
		got, _ := ScrapeAdmin(t)
		for series, v := range got {
			if strings.HasPrefix(series, "caddy_http_statusgate_backend_trips_kept{") && v != 0 {
				return false
			}
		}
		return true
	})
}

// SharedByClass sends 2×each callers of one player record at once to a slow
// backend, every other one with the headers of the filtered class and the
// rest with those of the whole class, and checks that each got its class's
// answer (the filtered document, or the backend's bytes) and that each class
// made one trip to the backend.
func SharedByClass(t *testing.T, be *Backend, target string, each int, filtered, whole []string) {
	t.Helper()
	out := HeldTogether(t, be, 2*each, func(i int) Response {
		if i%2 == 0 {
			return Send(t, "GET", target, filtered...)
		}
		return Send(t, "GET", target, whole...)
	})
	for i, r := range out {
		if i%2 == 0 {
			WantFiltered(t, r, target, PlayerFields...)
		} else {
			WantBackendBytes(t, r, target)
		}
	}
	if seen := be.Take(); len(seen) != 2 {
		t.Errorf("%d callers in two classes made %d trips to the backend, want 2", 2*each, len(seen))
	}
}
