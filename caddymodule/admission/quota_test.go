package admission

import (
	"sync"
	"testing"
)

func TestQuota(t *testing.T) {
	q := NewQuota(2)
	if !q.Take("a") || !q.Take("a") {
		t.Fatal("the first two places were refused")
	}
	if q.Take("a") {
		t.Error("a third place was granted")
	}
	if !q.Take("b") {
		t.Error("another client was refused")
	}
	q.Give("a")
	if !q.Take("a") {
		t.Error("a freed place was not granted again")
	}
	q.Give("a")
	q.Give("a")
	q.Give("b")
	if n := len(q.n); n != 0 {
		t.Errorf("%d clients left after every place was given back", n)
	}
	var nilQ *Quota
	if !nilQ.Take("x") {
		t.Error("the nil Quota refused")
	}
	nilQ.Give("x")
}

func TestQuotaConcurrent(t *testing.T) {
	q := NewQuota(3)
	var mu sync.Mutex
	open, peak := 0, 0
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 200 {
				if !q.Take("c") {
					continue
				}
				mu.Lock()
				open++
				peak = max(peak, open)
				mu.Unlock()
				mu.Lock()
				open--
				mu.Unlock()
				q.Give("c")
			}
		})
	}
	wg.Wait()
	if peak > 3 || len(q.n) != 0 {
		t.Errorf("peak %d open (max 3), %d clients left", peak, len(q.n))
	}
}
