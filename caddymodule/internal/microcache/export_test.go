package microcache

// Get is a lookup that takes only fresh entries, which most tests want: the
// gateway's own lookup is GetStale.
func (c *Cache) Get(key string) (Entry, bool) {
	e, fresh, ok := c.GetStale(key)
	return e, ok && fresh
}
