package sim

import (
	"container/list"
	"sync"
)

// tailCacheBytes bounds the rendered detailed statistics a sim keeps: a few
// players' worth on a modded server (Alex_MC's is about 3 MB with
// modded_items 20000), so that a load test that asks for one large answer
// again and again renders it once, and one that asks for every player, as
// often as it likes, keeps no more than this.
const tailCacheBytes = 16 << 20

// tailCache keeps the most recently used players' rendered detailed
// statistics (renderDetailedTail), up to max bytes, the least recently used
// going first; the one just rendered is kept even if it alone is larger.
// Rendering one takes a tenth of a second with 20000 modded items, so
// callers that ask for the same player at once wait for one rendering.
// Its methods are safe for concurrent use.
type tailCache struct {
	max int

	mu    sync.Mutex
	bytes int                   // of the rendered tails in lru
	lru   *list.List            // of *tailEntry, most recently used first
	by    map[int]*list.Element // by player index
}

// tailEntry is one player's tail: rendered once, by whoever asked first.
type tailEntry struct {
	player int
	once   sync.Once
	tail   []byte
	size   int // counted in bytes; 0 until rendered
}

func newTailCache(max int) *tailCache {
	return &tailCache{max: max, lru: list.New(), by: map[int]*list.Element{}}
}

// get returns the tail of the player with index p, rendered by render if it
// is not kept.
func (c *tailCache) get(p int, render func() []byte) []byte {
	c.mu.Lock()
	el, ok := c.by[p]
	if ok {
		c.lru.MoveToFront(el)
	} else {
		el = c.lru.PushFront(&tailEntry{player: p})
		c.by[p] = el
	}
	c.mu.Unlock()
	e := el.Value.(*tailEntry)
	e.once.Do(func() {
		e.tail = render()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.by[p] != el {
			return // evicted while it rendered: used once, not kept
		}
		e.size = cap(e.tail)
		c.bytes += e.size
		for back := c.lru.Back(); c.bytes > c.max && back != nil && back != el; back = c.lru.Back() {
			c.evict(back)
		}
	})
	return e.tail
}

// evict drops el, under mu.
func (c *tailCache) evict(el *list.Element) {
	e := el.Value.(*tailEntry)
	c.lru.Remove(el)
	delete(c.by, e.player)
	c.bytes -= e.size
}

// kept is how many tails, and bytes of them, the cache keeps.
func (c *tailCache) kept() (tails, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
