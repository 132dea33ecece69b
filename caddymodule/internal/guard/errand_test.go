package guard

import (
	"testing"
	"time"
)

// TestAnswerTimesFloor: the floor is the quickest of the last eight
// answers of the last minute; older ones and those pushed out count for
// nothing, and with none the floor is 0 (every request is sent).
func TestAnswerTimesFloor(t *testing.T) {
	var a answerTimes
	now := time.Unix(1_800_000_000, 0)
	if f := a.floor(now); f != 0 {
		t.Fatalf("no answers: floor %v, want 0", f)
	}
	a.add(300*time.Millisecond, now.Add(-2*answerMemory)) // forgotten
	a.add(900*time.Millisecond, now.Add(-time.Second))
	a.add(1400*time.Millisecond, now)
	if f := a.floor(now); f != 900*time.Millisecond {
		t.Errorf("floor %v, want the quickest recent answer, 900ms", f)
	}
	a.add(0, now) // an instant answer counts too
	if f := a.floor(now); f != 0 {
		t.Errorf("floor %v after an instant answer, want 0", f)
	}
	for range len(a.last) {
		a.add(2*time.Second, now)
	}
	if f := a.floor(now); f != 2*time.Second {
		t.Errorf("floor %v after eight answers of 2s, want 2s", f)
	}
	if f := a.floor(now.Add(answerMemory + time.Second)); f != 0 {
		t.Errorf("floor %v once every answer is older than %v, want 0", f, answerMemory)
	}
}
