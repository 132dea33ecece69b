// Package microcache keeps complete successful backend responses for a short
// time, so that a flood of identical requests reaches the backend about once
// per time to live instead of once per request.
//
// The ServerAPI plugin serves most stations from snapshots it refreshes on
// its own schedule (every second or so for status, every ten minutes for the
// slow stations), so a response cached for less than its snapshot interval
// adds little staleness; the caller picks the time to live per entry, per
// endpoint. Memory is bounded by Config.MaxBytes: the least recently used
// entries make room for new ones.
//
// Keys are the caller's, and must name everything a response depends on: for
// the gateway, the field lists in force (the policy), the class (filtered by
// the field layer, for a caller without a key while auth is on, or whole, the
// backend's bytes, for everyone else), the Host, and the canonical upstream
// path and query, so that filtered and whole responses never mix. Never the
// caller's key itself.
//
// Entries are immutable: Put stores its own copy of the body, and GetStale
// returns the stored slices and header, which no one may modify.
package microcache

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxBytes bounds a Cache's memory when Config.MaxBytes is 0: 16 MiB,
// some thousands of typical responses (a player's stats are a few KiB). An
// entry may take an eighth of it, 2 MiB; the gateway holds answers whole up
// to max_response (4 MiB by default), and one between the two is served but
// not cached.
const DefaultMaxBytes = 16 << 20

// entryOverhead is what an entry costs beyond its key, header and body: the
// entry struct, its map slot and the header map, roughly. Counting it keeps
// a flood of tiny responses from growing the cache far beyond MaxBytes.
const entryOverhead = 256

// Config sets a Cache's bounds.
type Config struct {
	// MaxBytes bounds the memory the entries take, counting keys, headers
	// and bodies plus a fixed overhead per entry. An entry larger than an
	// eighth of it is not stored, so that one response cannot flush the
	// cache. Default: DefaultMaxBytes.
	MaxBytes int64
	// Grace is how long an entry stays after its time to live, for
	// GetStale: a caller may serve it while one request refreshes it, so
	// that the refresh is the only caller that waits for the backend.
	// Default: 0, an entry is gone when it expires.
	Grace time.Duration
	// Now is the clock; tests set it. Default: time.Now.
	Now func() time.Time
}

// Entry is a cached response.
type Entry struct {
	// Status is the HTTP status code, 2xx.
	Status int
	// Header is the subset of the response's header the caller stored; it is
	// shared by every lookup and must not be modified.
	Header http.Header
	// Body is the whole body; it is shared by every lookup and must not be
	// modified (its capacity is its length, so an append copies).
	Body []byte
}

// Cache is a TTL cache of responses with LRU eviction. The nil *Cache is a
// disabled one: every lookup misses and Put stores nothing. Its methods are safe
// for concurrent use.
type Cache struct {
	maxBytes atomic.Int64 // changed by SetMaxBytes at any time
	grace    time.Duration
	now      func() time.Time

	mu    sync.Mutex
	items map[string]*item
	lru   item // sentinel of a ring: lru.next is the most recently used
	bytes int64

	hits, stale, misses, evictions atomic.Uint64
}

// item is one entry in the map and the LRU ring.
type item struct {
	key        string
	entry      Entry
	expires    time.Time // end of the time to live
	gone       time.Time // expires plus the grace: removed from then on
	size       int64
	prev, next *item
}

// New returns an empty Cache with the bounds of c. It panics if MaxBytes is
// negative: configuration is validated before it gets here.
func New(c Config) *Cache {
	if c.MaxBytes < 0 || c.Grace < 0 {
		panic("microcache: negative MaxBytes or Grace")
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	ca := &Cache{grace: c.Grace, now: c.Now, items: make(map[string]*item)}
	ca.maxBytes.Store(c.MaxBytes)
	ca.lru.next, ca.lru.prev = &ca.lru, &ca.lru
	return ca
}

// Now is the time on the clock the cache's entries expire by (Config.Now),
// for a caller that works out a time to live from a time of its own; the nil
// Cache's clock is time.Now.
func (c *Cache) Now() time.Time {
	if c == nil {
		return time.Now()
	}
	return c.now()
}

// SetMaxBytes changes the bound on the cache's memory: past a lower one the
// least recently used entries go at once. It panics unless n is positive.
func (c *Cache) SetMaxBytes(n int64) {
	if n <= 0 {
		panic("microcache: MaxBytes must be positive")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxBytes.Store(n)
	for c.bytes > n {
		c.remove(c.lru.prev)
		c.evictions.Add(1)
	}
}

// Clear removes every entry, for a config that turns the cache off: what it
// held must not be served should a later one turn it on again.
func (c *Cache) Clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.lru.next != &c.lru {
		c.remove(c.lru.next)
	}
}

// GetStale returns the entry stored under key, fresh or past its time to live
// but within the grace (Config.Grace), and whether it is fresh. A caller that
// gets a stale entry serves it and refreshes it.
func (c *Cache) GetStale(key string) (e Entry, fresh, ok bool) {
	if c == nil {
		return Entry{}, false, false
	}
	now := c.now()
	c.mu.Lock()
	it := c.items[key]
	if it == nil || !now.Before(it.gone) {
		if it != nil {
			c.remove(it)
		}
		c.mu.Unlock()
		c.misses.Add(1)
		return Entry{}, false, false
	}
	c.unlink(it)
	c.pushFront(it)
	e, fresh = it.entry, now.Before(it.expires)
	c.mu.Unlock()
	if fresh {
		c.hits.Add(1)
	} else {
		c.stale.Add(1)
	}
	return e, fresh, true
}

// Fresh reports whether an entry within its time to live is stored under
// key, without counting a lookup: for a caller about to refresh a stale
// entry that someone else may have refreshed meanwhile.
func (c *Cache) Fresh(key string) bool {
	if c == nil {
		return false
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	it := c.items[key]
	return it != nil && now.Before(it.expires)
}

// Put stores a copy of e under key for ttl, replacing what was there, and
// evicts the least recently used entries as far as the byte limit needs. It
// stores nothing, and returns false, when the cache is disabled, ttl is not
// positive, e.Status is not 2xx (only successful responses are reused), or
// the entry is larger than an eighth of MaxBytes; an older entry under key
// is then left as it was.
func (c *Cache) Put(key string, e Entry, ttl time.Duration) bool {
	if c == nil || ttl <= 0 || e.Status < 200 || e.Status > 299 {
		return false
	}
	size := int64(entryOverhead + len(key) + len(e.Body))
	for k, vs := range e.Header {
		size += int64(len(k))
		for _, v := range vs {
			size += int64(len(v))
		}
	}
	if size > c.maxBytes.Load()/8 {
		return false
	}
	body := make([]byte, len(e.Body))
	copy(body, e.Body)
	now := c.now() // once: a second reading could put gone past expires without a grace
	it := &item{
		key:     key,
		entry:   Entry{Status: e.Status, Header: e.Header.Clone(), Body: body},
		expires: now.Add(ttl),
		gone:    now.Add(ttl + c.grace),
		size:    size,
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.items[key]; old != nil {
		c.remove(old)
	}
	for c.bytes+size > c.maxBytes.Load() && c.lru.prev != &c.lru {
		c.remove(c.lru.prev)
		c.evictions.Add(1)
	}
	c.items[key] = it
	c.pushFront(it)
	c.bytes += size
	return true
}

// remove takes it out of the map and the ring. Under c.mu.
func (c *Cache) remove(it *item) {
	delete(c.items, it.key)
	c.unlink(it)
	c.bytes -= it.size
}

func (c *Cache) unlink(it *item) {
	it.prev.next = it.next
	it.next.prev = it.prev
	it.prev, it.next = nil, nil
}

func (c *Cache) pushFront(it *item) {
	it.prev, it.next = &c.lru, c.lru.next
	c.lru.next.prev = it
	c.lru.next = it
}

// Stats is a snapshot of a Cache's gauges and counters, for metrics.
type Stats struct {
	// Entries and Bytes are what the cache holds now, Bytes as counted
	// against MaxBytes. Entries past their grace count until a lookup finds
	// them or eviction takes them.
	Entries int
	Bytes   int64
	// Counters of lookups (GetStale) since New, by what they found: a fresh
	// entry (Hits), one past its time to live but within the grace (Stale),
	// none (Misses).
	Hits, Stale, Misses uint64
	// Evictions counts entries removed, least recently used first, to make
	// room for new ones.
	Evictions uint64
}

// Stats returns the cache's gauges and counters. A nil Cache reports zeros.
func (c *Cache) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.Lock()
	n, b := len(c.items), c.bytes
	c.mu.Unlock()
	return Stats{
		Entries:   n,
		Bytes:     b,
		Hits:      c.hits.Load(),
		Stale:     c.stale.Load(),
		Misses:    c.misses.Load(),
		Evictions: c.evictions.Load(),
	}
}
