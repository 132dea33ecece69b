package hold

import (
	"errors"
	"sync"
	"testing"
)

// k is the unit of these tests' sizes: answers above small.
const k = small + 1

// answer is a distinct answer of n units.
func answer(n int) []byte { return make([]byte, n*k) }

func TestBudget(t *testing.T) {
	b := New(100*k, 40*k)
	a40 := answer(40)
	if err := b.Hold("a", a40); err != nil {
		t.Fatal(err)
	}
	if err := b.Hold("a", answer(1)); !errors.Is(err, ErrClientFull) {
		t.Fatalf("past the share: %v, want ErrClientFull", err)
	}
	if err := b.Check("a"); !errors.Is(err, ErrClientFull) {
		t.Fatalf("Check at the share: %v", err)
	}
	if err := b.Check("b"); err != nil {
		t.Fatalf("another client: %v", err)
	}
	a19, a20 := answer(19), answer(20)
	if err := b.Hold("b", a19); err != nil || b.Check("b") != nil {
		t.Fatalf("a client holding less than half its share may start a request: %v", b.Check("b"))
	}
	b.Release("b", a19)
	if err := b.Hold("b", a20); err != nil || !errors.Is(b.Check("b"), ErrClientFull) {
		t.Fatalf("a client holding half its share may start none: %v", b.Check("b"))
	}
	b.Release("b", a20)
	b40 := answer(40)
	if err := b.Hold("b", b40); err != nil {
		t.Fatal(err)
	}
	if err := b.Hold("c", answer(21)); !errors.Is(err, ErrFull) {
		t.Fatalf("past the total: %v, want ErrFull", err)
	}
	if err := b.Take(20 * k); err != nil {
		t.Fatalf("a buffer of no client within the total: %v", err)
	}
	if err := b.Check("c"); !errors.Is(err, ErrFull) {
		t.Fatalf("Check with the total spent: %v", err)
	}
	if b.Held() != 100*k {
		t.Fatalf("held %d, want 100", b.Held())
	}
	b.Release("a", a40)
	b.Release("b", b40)
	b.Give(20 * k)
	if b.Held() != 0 || len(b.by) != 0 {
		t.Fatalf("after giving everything back: held %d, %d clients", b.Held(), len(b.by))
	}
	if err := b.Hold("a", a40); err != nil {
		t.Fatalf("a client's share is whole again: %v", err)
	}
}

// TestSameAnswerOnce checks that a client holding one answer many times (many
// stalled streams of one cached answer) is charged once, and that another
// client holding it is charged too.
func TestSameAnswerOnce(t *testing.T) {
	b := New(100*k, 40*k)
	shared := answer(30)
	for range 1000 {
		if err := b.Hold("a", shared); err != nil {
			t.Fatalf("the same answer again: %v", err)
		}
	}
	if b.Held() != 30*k {
		t.Fatalf("one answer held 1000 times by one client: %d bytes charged, want 30", b.Held())
	}
	if err := b.Hold("a", answer(30)); !errors.Is(err, ErrClientFull) {
		t.Fatalf("an equal but other answer: %v, want ErrClientFull", err)
	}
	if err := b.Hold("b", shared); err != nil || b.Held() != 60*k {
		t.Fatalf("another client holding it: %v, %d charged", err, b.Held())
	}
	for range 999 {
		b.Release("a", shared)
	}
	if b.Held() != 60*k {
		t.Fatalf("released 999 of 1000: %d charged, want 60", b.Held())
	}
	b.Release("a", shared)
	b.Release("b", shared)
	if b.Held() != 0 || len(b.by) != 0 {
		t.Fatalf("held %d, %d clients", b.Held(), len(b.by))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Release without Hold did not panic")
		}
	}()
	b.Release("a", shared)
}

func TestNilBudget(t *testing.T) {
	var b *Budget
	big := answer(1 << 10) // 1 MiB: answer counts KiB
	if b.Hold("a", big) != nil || b.Take(1<<40) != nil || b.Check("a") != nil || b.Held() != 0 {
		t.Fatal("the nil Budget refused or counted")
	}
	b.Release("a", big)
	b.Give(1 << 40)
}

func TestNewPanics(t *testing.T) {
	for _, c := range [][2]int64{{100, 0}, {100, 101}, {0, 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d, %d) did not panic", c[0], c[1])
				}
			}()
			New(c[0], c[1])
		}()
	}
}

// TestConcurrentHolds checks under -race that concurrent charges never let
// the total or a client's share be exceeded.
func TestConcurrentHolds(t *testing.T) {
	b := New(1000*k, 300*k)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for i := range 16 {
		client := string(rune('a' + i%4))
		wg.Go(func() {
			a := answer(7) // held and released in turn: one buffer, not 7 KiB of garbage a turn
			for j := range 2000 {
				if j%2 == 0 {
					if b.Take(7*k) == nil {
						b.Give(7 * k)
					}
					continue
				}
				if b.Hold(client, a) == nil {
					mu.Lock()
					peak = max(peak, b.Held())
					mu.Unlock()
					b.Release(client, a)
				}
			}
		})
	}
	wg.Wait()
	if peak > 1000*k || b.Held() != 0 {
		t.Fatalf("peak %d (max 1000), held at the end %d", peak, b.Held())
	}
}

// TestSmallNotCounted: answers up to small bytes cost no lock and no charge.
func TestSmallNotCounted(t *testing.T) {
	b := New(100*k, 40*k)
	small := make([]byte, small)
	if err := b.Hold("a", small); err != nil || b.Held() != 0 {
		t.Fatalf("a small answer: %v, %d charged", err, b.Held())
	}
	b.Release("a", small)
}

// TestSetSizes: a lower bound keeps what is held counted and charges nothing
// more until enough is released.
func TestSetSizes(t *testing.T) {
	b := New(1<<20, 1<<20)
	big := make([]byte, 600<<10)
	if err := b.Hold("a", big); err != nil {
		t.Fatal(err)
	}
	b.SetSizes(512<<10, 256<<10)
	if b.Held() != int64(len(big)) {
		t.Fatalf("Held %d after SetSizes, want the %d still held", b.Held(), len(big))
	}
	if err := b.Check("b"); err != ErrFull {
		t.Errorf("Check past the lower total: %v, want ErrFull", err)
	}
	if err := b.Take(1); err != ErrFull {
		t.Errorf("Take past the lower total: %v, want ErrFull", err)
	}
	b.Release("a", big)
	if err := b.Hold("b", make([]byte, 300<<10)); err != ErrClientFull {
		t.Errorf("Hold past the lower share: %v, want ErrClientFull", err)
	}
	if err := b.Hold("b", make([]byte, 200<<10)); err != nil {
		t.Errorf("Hold within the new bounds: %v", err)
	}
}

// TestPin checks that bytes a request keeps are charged whatever their size,
// beside the answers a client holds, against its share and the total, and
// given back.
func TestPin(t *testing.T) {
	b := New(100*k, 40*k)
	if err := b.Pin("a", 100); err != nil || b.Held() != 100 {
		t.Fatalf("a small pin: %v, %d charged; want it charged", err, b.Held())
	}
	if err := b.Hold("a", answer(30)); err != nil {
		t.Fatalf("an answer beside the pin: %v", err)
	}
	if err := b.Pin("a", 10*k); !errors.Is(err, ErrClientFull) {
		t.Fatalf("past the share: %v, want ErrClientFull", err)
	}
	if err := b.Check("a"); !errors.Is(err, ErrClientFull) {
		t.Fatalf("more than half the share held: Check %v, want ErrClientFull", err)
	}
	for _, c := range []string{"b", "c"} {
		if err := b.Pin(c, 30*k); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	if err := b.Pin("d", 10*k); !errors.Is(err, ErrFull) {
		t.Fatalf("past the total: %v, want ErrFull", err)
	}
	b.Unpin("a", 100)
	b.Unpin("b", 30*k)
	b.Unpin("c", 30*k)
	if b.Held() != 30*k || len(b.by) != 1 {
		t.Fatalf("after the unpins: %d held by %d clients, want the answer's 30 KiB by one", b.Held(), len(b.by))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Unpin without Pin did not panic")
		}
	}()
	b.Unpin("b", 1)
}
