package caddymodule

import (
	"bytes"
	"net/http/httptest"
	"testing"

	"github.com/statusgate/statusgate/caddymodule/internal/hold"
)

// TestSpoolChargesItsBuffers: what a spool holds is charged to the held
// bytes as the memory it takes, its buffers' capacity, not the lengths it
// asked for, and all of it is given back by done.
func TestSpoolChargesItsBuffers(t *testing.T) {
	budget := hold.New(64<<20, 4<<20)
	sp := newSpool(httptest.NewRecorder(), 1<<20, budget)
	sp.expect(5000)
	for _, n := range []int{5000, 20000, 100000} {
		if _, err := sp.Write(bytes.Repeat([]byte{'x'}, n)); err != nil {
			t.Fatal(err)
		}
		if sp.spilled {
			t.Fatal("spilled within max")
		}
		if held, c := budget.Held(), int64(cap(sp.body)); held != c {
			t.Errorf("after %d more bytes: %d held for a buffer of %d", n, held, c)
		}
	}
	sp.done()
	if held := budget.Held(); held != 0 {
		t.Errorf("after done: %d held", held)
	}
}

// TestSpoolGrowsToMaxExactly: with a max_response that is no class of the
// buffer pool, the last growth takes max bytes, not the class above it, so
// that an answer of max bytes fits a budget of max bytes.
func TestSpoolGrowsToMaxExactly(t *testing.T) {
	const max = 3 << 20
	budget := hold.New(max, max)
	sp := newSpool(httptest.NewRecorder(), max, budget)
	if _, err := sp.Write(bytes.Repeat([]byte{'x'}, max)); err != nil || sp.spilled {
		t.Fatalf("an answer of max bytes: err %v, spilled %v", err, sp.spilled)
	}
	if held := budget.Held(); held != max || cap(sp.body) != max {
		t.Errorf("%d held for a buffer of %d, want %d", held, cap(sp.body), max)
	}
	sp.recycle()
}
