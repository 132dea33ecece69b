package guard

import (
	"bytes"
	"net/http/httptest"
	"testing"

	"github.com/statusgate/statusgate/caddymodule/internal/hold"
)

// TestSpoolChargesItsBuffers: what a spool holds is charged to the held
// bytes as the memory it takes, its buffers' capacity, not the lengths it
// asked for, once it is past hold.Small, and all of it is given back by
// done.
func TestSpoolChargesItsBuffers(t *testing.T) {
	budget := hold.New(64<<20, 4<<20, 32<<20)
	sp := newSpool(httptest.NewRecorder(), 1<<20, budget)
	sp.expect(5000)
	for _, n := range []int{5000, 20000, 100000} {
		if _, err := sp.Write(bytes.Repeat([]byte{'x'}, n)); err != nil {
			t.Fatal(err)
		}
		if sp.spilled {
			t.Fatal("spilled within max")
		}
		want := int64(cap(sp.body))
		if want <= hold.Small {
			want = 0
		}
		if held := budget.Held(); held != want {
			t.Errorf("after %d more bytes: %d held for a buffer of %d, want %d", n, held, cap(sp.body), want)
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
	budget := hold.New(max, max, max)
	sp := newSpool(httptest.NewRecorder(), max, budget)
	if _, err := sp.Write(bytes.Repeat([]byte{'x'}, max)); err != nil || sp.spilled {
		t.Fatalf("an answer of max bytes: err %v, spilled %v", err, sp.spilled)
	}
	if held := budget.Held(); held != max || cap(sp.body) != max {
		t.Errorf("%d held for a buffer of %d, want %d", held, cap(sp.body), max)
	}
	sp.recycle()
}

// TestSpoolSmallAnswerWithThePoolFull: with the anonymous pool spent, an
// anonymous caller's answer of up to hold.Small is read whole, charged
// nothing, and one larger spills to its client; a keyed caller's is held
// from the rest of the Budget.
func TestSpoolSmallAnswerWithThePoolFull(t *testing.T) {
	budget := hold.New(1<<20, 64<<10, 512<<10)
	if err := budget.Pin("flood", hold.Share{Bytes: 512 << 10}, 512<<10); err != nil {
		t.Fatal(err)
	}
	read := func(share hold.Share, n int) (*spool, *httptest.ResponseRecorder) {
		client := httptest.NewRecorder()
		sp := newSpool(client, 256<<10, budget)
		sp.begin(share, false, func() error { return nil })
		if _, err := sp.Write(bytes.Repeat([]byte{'x'}, n)); err != nil {
			t.Fatal(err)
		}
		return sp, client
	}
	sp, client := read(hold.Share{}, hold.Small)
	if sp.spilled || client.Body.Len() != 0 || len(sp.body) != hold.Small {
		t.Errorf("a small anonymous answer: spilled %v, %d bytes kept", sp.spilled, len(sp.body))
	}
	sp.recycle()
	// Judged on the answer, not the buffer its expected length (with the
	// field layer's margin) rounds it into: 16,200 bytes announced as
	// 16,456 take a buffer of 32 KiB, and are still charged nothing.
	hinted := newSpool(httptest.NewRecorder(), 256<<10, budget)
	hinted.begin(hold.Share{}, false, func() error { return nil })
	hinted.expect(16_200 + 256)
	if _, err := hinted.Write(bytes.Repeat([]byte{'x'}, 16_200)); err != nil || hinted.spilled || cap(hinted.body) <= hold.Small {
		t.Errorf("a small anonymous answer announced with a margin: err %v, spilled %v, a buffer of %d", err, hinted.spilled, cap(hinted.body))
	}
	// Grown past hold.Small within the buffer it has, it is charged the
	// buffer: no room, so it spills.
	if _, err := hinted.Write(bytes.Repeat([]byte{'x'}, 500)); err != nil || !hinted.spilled {
		t.Errorf("the same answer grown past hold.Small with the pool full: err %v, spilled %v", err, hinted.spilled)
	}
	hinted.recycle()
	sp, client = read(hold.Share{}, hold.Small+1)
	if !sp.spilled || client.Body.Len() != hold.Small+1 {
		t.Errorf("a larger anonymous answer: spilled %v, %d bytes to the client", sp.spilled, client.Body.Len())
	}
	sp.recycle()
	sp, _ = read(hold.Share{Keyed: true}, 200<<10)
	if sp.spilled || len(sp.body) != 200<<10 {
		t.Errorf("a keyed answer with the anonymous pool full: spilled %v", sp.spilled)
	}
	sp.recycle()
	budget.Unpin("flood", hold.Share{Bytes: 512 << 10}, 512<<10)
	if budget.Held() != 0 {
		t.Errorf("after everything is given back: %d held", budget.Held())
	}
}
