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

// TestQuotaLive: a lower bound leaves what a client has open counted and gives
// it no place until it is under the bound; 0 counts without a bound, and a
// bound set later finds the places counted.
func TestQuotaLive(t *testing.T) {
	q := NewQuota(4)
	for range 4 {
		q.Take("a")
	}
	q.SetMax(2)
	if q.Take("a") {
		t.Fatal("a place granted with 4 open under a bound of 2")
	}
	q.Give("a")
	q.Give("a")
	if q.Take("a") {
		t.Fatal("a place granted with 2 open under a bound of 2")
	}
	q.Give("a")
	if !q.Take("a") {
		t.Fatal("no place with 1 open under a bound of 2")
	}
	q.SetMax(0)
	for range 10 {
		if !q.Take("a") {
			t.Fatal("refused without a bound")
		}
	}
	q.SetMax(3)
	if q.Take("a") {
		t.Fatal("the places taken without a bound were not counted")
	}
}

// TestQuotaTakeUpTo: clients with bounds of their own, counted by name in one
// Quota.
func TestQuotaTakeUpTo(t *testing.T) {
	q := NewQuota(0)
	for range 4 {
		if !q.TakeUpTo("key bot", 4) {
			t.Fatal("refused under the key's bound")
		}
	}
	if q.TakeUpTo("key bot", 2) {
		t.Error("the key's 5th request granted under its new bound of 2")
	}
	if !q.TakeUpTo("key staff", 1) {
		t.Error("another key refused")
	}
}
