package microcache

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
)

func entry(body string) Entry {
	return Entry{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
}

// sizeOf is what an entry of entry(body) under key counts against MaxBytes.
func sizeOf(key, body string) int64 {
	return int64(entryOverhead + len(key) + len(body) + len("Content-Type") + len("application/json"))
}

// checkConsistent walks the LRU ring and compares it with the map and the
// byte count.
func checkConsistent(t *testing.T, c *Cache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	n, bytes := 0, int64(0)
	for it := c.lru.next; it != &c.lru; it = it.next {
		if c.items[it.key] != it {
			t.Fatalf("ring item %q is not the map's", it.key)
		}
		if it.next.prev != it {
			t.Fatalf("ring broken after %q", it.key)
		}
		n++
		bytes += it.size
	}
	if n != len(c.items) || bytes != c.bytes {
		t.Fatalf("ring holds %d items, %d bytes; map %d, counted %d bytes", n, bytes, len(c.items), c.bytes)
	}
	if c.bytes > c.maxBytes.Load() {
		t.Fatalf("%d bytes held, limit %d", c.bytes, c.maxBytes.Load())
	}
}

// order is the keys from most to least recently used.
func order(c *Cache) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	for it := c.lru.next; it != &c.lru; it = it.next {
		keys = append(keys, it.key)
	}
	return strings.Join(keys, " ")
}

func TestPut(t *testing.T) {
	const max = 8 << 10 // entries up to 1 KiB
	fits := strings.Repeat("x", max/8-int(sizeOf("k", "")))
	for _, tc := range []struct {
		name  string
		e     Entry
		ttl   time.Duration
		store bool
	}{
		{"200", entry("{}"), time.Second, true},
		{"204", Entry{Status: 204}, time.Second, true},
		{"299", Entry{Status: 299}, time.Second, true},
		{"entry at an eighth of MaxBytes", entry(fits), time.Second, true},
		{"entry over an eighth of MaxBytes", entry(fits + "x"), time.Second, false},
		{"199", Entry{Status: 199}, time.Second, false},
		{"304", Entry{Status: 304}, time.Second, false},
		{"404", Entry{Status: 404, Body: []byte("{}")}, time.Second, false},
		{"429", Entry{Status: 429}, time.Second, false},
		{"500", Entry{Status: 500}, time.Second, false},
		{"ttl 0: caching off", entry("{}"), 0, false},
		{"negative ttl", entry("{}"), -time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{MaxBytes: max})
			if got := c.Put("k", tc.e, tc.ttl); got != tc.store {
				t.Fatalf("Put = %v, want %v", got, tc.store)
			}
			e, ok := c.Get("k")
			if ok != tc.store {
				t.Fatalf("Get found %v, want %v", ok, tc.store)
			}
			if ok && (e.Status != tc.e.Status || string(e.Body) != string(tc.e.Body) || e.Header.Get("Content-Type") != tc.e.Header.Get("Content-Type")) {
				t.Errorf("Get = %+v, want %+v", e, tc.e)
			}
			checkConsistent(t, c)
		})
	}
	// A refused Put leaves the older entry alone.
	c := New(Config{MaxBytes: max})
	c.Put("k", entry("old"), time.Second)
	if c.Put("k", Entry{Status: 500}, time.Second) {
		t.Fatal("stored a 500")
	}
	if e, ok := c.Get("k"); !ok || string(e.Body) != "old" {
		t.Errorf("a refused Put disturbed the older entry: %v %q", ok, e.Body)
	}
}

func TestTTL(t *testing.T) {
	clk := fixture.NewClock()
	c := New(Config{Now: clk.Now})
	if !c.Now().Equal(clk.Now()) {
		t.Fatalf("Now = %v, want the clock's %v", c.Now(), clk.Now())
	}
	c.Put("status", entry("s"), time.Second)
	c.Put("worlds", entry("w"), 10*time.Minute)
	clk.Advance(999 * time.Millisecond)
	if _, ok := c.Get("status"); !ok {
		t.Fatal("entry gone before its ttl")
	}
	clk.Advance(time.Millisecond)
	if _, ok := c.Get("status"); ok {
		t.Fatal("entry served at its ttl")
	}
	if e, ok := c.Get("worlds"); !ok || string(e.Body) != "w" {
		t.Fatal("a longer ttl is per entry")
	}
	if st := c.Stats(); st != (Stats{Entries: 1, Bytes: sizeOf("worlds", "w"), Hits: 2, Misses: 1}) {
		t.Errorf("Stats = %+v", st)
	}
	// A new Put restarts the ttl.
	c.Put("status", entry("s2"), time.Second)
	clk.Advance(500 * time.Millisecond)
	if e, ok := c.Get("status"); !ok || string(e.Body) != "s2" {
		t.Error("the replacement was not served")
	}
	clk.Advance(10 * time.Minute)
	if _, ok := c.Get("worlds"); ok {
		t.Error("served after 10 minutes and a half second")
	}
	checkConsistent(t, c)
}

func TestLRU(t *testing.T) {
	// Room for exactly sixteen entries of this size; an entry may take up to
	// two of their places.
	body := strings.Repeat("x", 1000)
	one := sizeOf("k00", body)
	c := New(Config{MaxBytes: 16 * one})
	var want []string // most recently used first
	for i := range 16 {
		k := fmt.Sprintf("k%02d", i)
		c.Put(k, entry(body), time.Hour)
		want = append([]string{k}, want...)
	}
	if got := order(c); got != strings.Join(want, " ") {
		t.Fatalf("order %q", got)
	}
	c.Get("k00") // k00 is now the most recently used; k01 the least
	want = append([]string{"k00"}, want[:15]...)
	if got := order(c); got != strings.Join(want, " ") {
		t.Fatalf("after Get: order %q", got)
	}
	c.Put("k16", entry(body), time.Hour)
	if _, ok := c.Get("k01"); ok {
		t.Error("k01, the least recently used, was not evicted")
	}
	for _, k := range []string{"k00", "k02", "k15", "k16"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s evicted", k)
		}
	}
	// order now: k16 k15 k02 k00, then k14 down to k03
	// One double-size entry pushes out the two least recently used.
	c.Put("big", entry(strings.Repeat("y", 1000+int(one))), time.Hour)
	for k, kept := range map[string]bool{"k03": false, "k04": false, "k05": true, "big": true} {
		if _, ok := c.Get(k); ok != kept {
			t.Errorf("after a double-size Put: %s kept %v, want %v", k, ok, kept)
		}
	}
	if st := c.Stats(); st.Evictions != 3 || st.Entries != 15 || st.Bytes > 16*one {
		t.Errorf("Stats = %+v", st)
	}
	// Replacing an entry frees its old size first: no eviction.
	c.Put("k05", entry(body), time.Hour)
	if st := c.Stats(); st.Evictions != 3 || st.Entries != 15 {
		t.Errorf("replacing evicted: %+v", st)
	}
	checkConsistent(t, c)
}

// TestImmutable: what Put was given may be reused by the caller, and what Get
// returns cannot be grown into another reader's bytes.
func TestImmutable(t *testing.T) {
	c := New(Config{})
	in := entry(`{"name":"Steve"}`)
	c.Put("k", in, time.Minute)
	copy(in.Body, `{"name":"Alex!"}`) // a pooled buffer, reused
	in.Header.Set("Content-Type", "text/html")
	a, _ := c.Get("k")
	if string(a.Body) != `{"name":"Steve"}` || a.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("the cache kept the caller's buffer: %q %v", a.Body, a.Header)
	}
	if cap(a.Body) != len(a.Body) {
		t.Errorf("body has spare capacity %d: an append would write into shared memory", cap(a.Body)-len(a.Body))
	}
	_ = append(a.Body, "garbage"...)
	if b, _ := c.Get("k"); string(b.Body) != `{"name":"Steve"}` {
		t.Errorf("an append changed the stored body: %q", b.Body)
	}
}

// TestFresh: Fresh tells an entry within its time to live from a stale one
// and from none, and counts no lookup.
func TestFresh(t *testing.T) {
	clk := fixture.NewClock()
	c := New(Config{Now: clk.Now, Grace: time.Minute})
	c.Put("status", entry("s"), time.Second)
	if !c.Fresh("status") || c.Fresh("worlds") {
		t.Error("a fresh entry is not fresh, or a missing one is")
	}
	clk.Advance(time.Second)
	if c.Fresh("status") {
		t.Error("an entry at its time to live is fresh")
	}
	if _, fresh, ok := c.GetStale("status"); !ok || fresh {
		t.Error("the stale entry is gone")
	}
	if st := c.Stats(); st.Hits != 0 || st.Misses != 0 || st.Stale != 1 {
		t.Errorf("Fresh counted lookups: %+v", st)
	}
	var none *Cache
	if none.Fresh("status") {
		t.Error("the nil cache holds a fresh entry")
	}
}

func TestNilCache(t *testing.T) {
	var c *Cache
	if c.Put("k", entry("{}"), time.Minute) {
		t.Error("nil cache stored")
	}
	if _, ok := c.Get("k"); ok || c.Stats() != (Stats{}) {
		t.Error("nil cache hit")
	}
	if before, now := time.Now(), c.Now(); now.Before(before) {
		t.Errorf("the nil cache's Now %v is before time.Now %v", now, before)
	}
}

func TestNewDefaults(t *testing.T) {
	c := New(Config{})
	if c.maxBytes.Load() != DefaultMaxBytes || c.now == nil {
		t.Errorf("defaults: %d", c.maxBytes.Load())
	}
	defer func() {
		if recover() == nil {
			t.Error("New accepted a negative MaxBytes")
		}
	}()
	New(Config{MaxBytes: -1})
}

// TestRace: Gets, Puts and expiries from many goroutines. Every hit is the
// body stored under its own key, the byte limit always holds, and the ring,
// the map and the byte count agree at the end.
func TestRace(t *testing.T) {
	clk := fixture.NewClock()
	one := sizeOf("key00", "body-key00")
	c := New(Config{MaxBytes: 16 * one, Now: clk.Now})
	var wg sync.WaitGroup
	var hits atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				key := fmt.Sprintf("key%02d", (g*7+i)%40)
				if e, ok := c.Get(key); ok {
					hits.Add(1)
					if string(e.Body) != "body-"+key {
						t.Errorf("Get(%s) = %q", key, e.Body)
						return
					}
				} else {
					c.Put(key, entry("body-"+key), time.Duration(1+i%3)*time.Millisecond)
				}
				if i%100 == 0 {
					clk.Advance(time.Millisecond)
				}
				if b := c.Stats().Bytes; b > 16*one {
					t.Errorf("%d bytes held, limit %d", b, 16*one)
					return
				}
			}
		})
	}
	wg.Wait()
	st := c.Stats()
	if st.Hits == 0 || st.Evictions == 0 || int64(st.Hits) != hits.Load() {
		t.Errorf("the test did not exercise hits and evictions: %+v", st)
	}
	if st.Hits+st.Misses != 8*2000 {
		t.Errorf("hits+misses = %d, want every Get", st.Hits+st.Misses)
	}
	checkConsistent(t, c)
}

func BenchmarkGetHit(b *testing.B) {
	c := New(Config{})
	c.Put("anon|/api/v1/status", entry(strings.Repeat("x", 2000)), time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Get("anon|/api/v1/status"); !ok {
			b.Fatal("miss")
		}
	}
}

func BenchmarkGetHitParallel(b *testing.B) {
	c := New(Config{})
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprint("anon|/api/v1/player/", i)
		c.Put(keys[i], entry(strings.Repeat("x", 2000)), time.Hour)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := c.Get(keys[i&63]); !ok {
				b.Error("miss")
				return
			}
			i++
		}
	})
}

func BenchmarkPut(b *testing.B) {
	c := New(Config{})
	e := entry(strings.Repeat("x", 2000))
	b.ReportAllocs()
	for b.Loop() {
		c.Put("anon|/api/v1/status", e, time.Hour)
	}
}

// TestGrace checks that an entry past its time to live is served by GetStale
// as stale until the grace ends, and is gone after it; and what the counters
// make of each lookup.
func TestGrace(t *testing.T) {
	clk := fixture.NewClock()
	c := New(Config{Grace: 5 * time.Second, Now: clk.Now})
	c.Put("k", entry("v1"), time.Second)
	if e, fresh, ok := c.GetStale("k"); !ok || !fresh || string(e.Body) != "v1" {
		t.Fatalf("fresh entry: %q fresh %v ok %v", e.Body, fresh, ok)
	}
	clk.Advance(time.Second)
	if e, fresh, ok := c.GetStale("k"); !ok || fresh || string(e.Body) != "v1" {
		t.Errorf("within the grace: %q fresh %v ok %v", e.Body, fresh, ok)
	}
	c.Put("k", entry("v2"), time.Second) // the refresh
	if e, ok := c.Get("k"); !ok || string(e.Body) != "v2" {
		t.Errorf("after the refresh: %q %v", e.Body, ok)
	}
	clk.Advance(6 * time.Second)
	if _, _, ok := c.GetStale("k"); ok {
		t.Error("GetStale returned an entry past its grace")
	}
	if st := c.Stats(); st != (Stats{Hits: 2, Stale: 1, Misses: 1}) {
		t.Errorf("stats %+v, want no entries, two hits, one stale and one miss", st)
	}
	checkConsistent(t, c)

	// Without a grace an expired entry is gone for GetStale too.
	c = New(Config{Now: clk.Now})
	c.Put("k", entry("v"), time.Second)
	clk.Advance(time.Second)
	if _, _, ok := c.GetStale("k"); ok {
		t.Error("GetStale served an expired entry without a grace")
	}
}

// TestSetMaxBytes: a lower bound evicts the least recently used entries at
// once; Clear empties the cache.
func TestSetMaxBytes(t *testing.T) {
	body := strings.Repeat("x", 1000)
	one := sizeOf("k00", body)
	c := New(Config{MaxBytes: 16 * one})
	for i := range 8 {
		c.Put(fmt.Sprintf("k%02d", i), entry(body), time.Hour)
	}
	c.SetMaxBytes(3 * one)
	if got := order(c); got != "k07 k06 k05" {
		t.Errorf("after SetMaxBytes: order %q, want the three most recently used", got)
	}
	if st := c.Stats(); st.Evictions != 5 || st.Bytes > 3*one {
		t.Errorf("Stats = %+v", st)
	}
	checkConsistent(t, c)
	c.Clear()
	if _, ok := c.Get("k07"); ok || c.Stats().Entries != 0 || c.Stats().Bytes != 0 {
		t.Errorf("after Clear: %+v", c.Stats())
	}
	checkConsistent(t, c)
}
