package sim

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestTailCache checks the bound: the least recently used tails go first,
// what is kept stays within the bytes (the newest alone excepted), a tail
// asked for again after it went is rendered again, and callers of one tail
// at once wait for one rendering.
func TestTailCache(t *testing.T) {
	c := newTailCache(10 << 10)
	renders := map[int]int{}
	var mu sync.Mutex
	render := func(p, size int) func() []byte {
		return func() []byte {
			mu.Lock()
			renders[p]++
			mu.Unlock()
			return bytes.Repeat([]byte{byte(p)}, size)
		}
	}
	for p := range 4 {
		if got := c.get(p, render(p, 3<<10)); len(got) != 3<<10 || got[0] != byte(p) {
			t.Fatalf("player %d: %d bytes of %d", p, len(got), got[0])
		}
	}
	if n, b := c.kept(); n != 3 || b != 9<<10 {
		t.Fatalf("kept %d tails, %d bytes; want the 3 newest, 9 KiB", n, b)
	}
	c.get(1, render(1, 3<<10)) // 1 is now the most recently used
	c.get(4, render(4, 3<<10)) // and 2 the least
	c.get(1, render(1, 3<<10))
	c.get(2, render(2, 3<<10))
	if renders[1] != 1 || renders[2] != 2 || renders[0] != 1 {
		t.Errorf("renders %v: want 1 kept while used, 2 rendered again after it went", renders)
	}
	c.get(9, render(9, 64<<10)) // larger than the bound: kept alone
	if n, b := c.kept(); n != 1 || b != 64<<10 {
		t.Errorf("after a tail larger than the bound: kept %d tails, %d bytes; want it alone", n, b)
	}

	var wg sync.WaitGroup
	var slow atomic.Int32
	for range 8 {
		wg.Go(func() {
			c.get(7, func() []byte { slow.Add(1); return make([]byte, 1<<10) })
		})
	}
	wg.Wait()
	if slow.Load() != 1 {
		t.Errorf("8 callers of one tail at once rendered it %d times", slow.Load())
	}
}

// TestDetailedMemoryFlat asks for every player's detailed statistics of a
// modded server, round after round: what the sim keeps stays within
// tailCacheBytes, its heap does not grow with the rounds, and a player's
// answer is the same bytes after its tail was rendered again.
func TestDetailedMemoryFlat(t *testing.T) {
	seed := int64(3)
	s := newSim(t, &Sim{Seed: &seed, ModdedItems: 20000})
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	first := do(s, "GET", "/api/v1/player/"+alexUUID+"?detailed=true").Body.Bytes()
	all := 0
	var after []uint64
	for round := range 4 {
		for _, p := range s.w.players {
			n := do(s, "GET", "/api/v1/player/"+p.uuid+"?detailed=true").Body.Len()
			if round == 0 {
				all += n
			}
		}
		if _, b := s.w.tails.kept(); b > tailCacheBytes+4<<20 {
			t.Fatalf("round %d: the sim keeps %d bytes of tails, over %d and one answer", round, b, tailCacheBytes)
		}
		after = append(after, heap())
	}
	t.Logf("every player's detailed answer once: %d MB; heap %d MB before, after each round %v MB", all>>20, before>>20,
		[]uint64{after[0] >> 20, after[1] >> 20, after[2] >> 20, after[3] >> 20})
	if all < 3*tailCacheBytes {
		t.Fatalf("every player's detailed answer together is %d bytes: too few to show a bound of %d", all, tailCacheBytes)
	}
	for i, h := range after {
		if grown := int64(h) - int64(before); grown > tailCacheBytes+16<<20 {
			t.Errorf("round %d: the heap grew by %d MB, more than the tails' bound (%d MB) and 16 MB", i, grown>>20, tailCacheBytes>>20)
		}
	}
	if again := do(s, "GET", "/api/v1/player/"+alexUUID+"?detailed=true").Body.Bytes(); !bytes.Equal(again, first) {
		t.Error("Alex_MC's detailed answer changed after its tail was rendered again")
	}
}
