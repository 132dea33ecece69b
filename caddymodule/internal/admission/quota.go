package admission

import "sync"

// Quota caps how many requests each client has at the backend or waiting for
// it at once, so that one client cannot fill the Limiter's queue: an abusive
// client on many connections otherwise takes every queue place, and every
// other caller of its class waits behind it and is refused. The gateway keys
// it by the anonymous caller's address; a rate limit spreads a client's
// requests over time, a Quota bounds how many it has open at any moment.
//
// The nil *Quota admits everyone. Its methods are safe for concurrent use;
// memory is one map entry per client with requests open, removed when its last
// one ends.
type Quota struct {
	mu  sync.Mutex
	max int // 0: no bound, but the places are counted
	n   map[string]int
}

// DefaultQuota is four requests per client: a web page polls a few endpoints
// at once, and several users behind one address (a school, a carrier's NAT)
// still get through; a fifth request while the four are open is refused at
// once (the gateway answers 429), it does not wait for one of them to end.
const DefaultQuota = 4

// NewQuota returns a Quota of max open requests per client; 0 counts them
// without a bound, so that a bound set later (SetMax) finds them counted. It
// panics if max is negative: configuration is validated before it gets here.
func NewQuota(max int) *Quota {
	q := &Quota{n: make(map[string]int)}
	q.SetMax(max)
	return q
}

// SetMax changes the bound for the requests to come: a client over a lower
// bound keeps what it has open and gets no more places until it is under it.
func (q *Quota) SetMax(max int) {
	if max < 0 {
		panic("admission: quota must not be negative")
	}
	q.mu.Lock()
	q.max = max
	q.mu.Unlock()
}

// Take reserves one of client's places and reports whether there was one.
// Each successful Take must be followed by exactly one Give.
func (q *Quota) Take(client string) bool {
	if q == nil {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.take(client, q.max)
}

// TakeUpTo is Take with a bound of client's own instead of the Quota's, for
// clients that each have their own (the keys' max_in_flight): one Quota counts
// them all by name, whatever their bounds are now.
func (q *Quota) TakeUpTo(client string, max int) bool {
	if q == nil {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.take(client, max)
}

// take reserves a place under max (0: no bound). Under q.mu.
func (q *Quota) take(client string, max int) bool {
	if max > 0 && q.n[client] >= max {
		return false
	}
	q.n[client]++
	return true
}

// Give returns a place that Take reserved.
func (q *Quota) Give(client string) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n[client] <= 1 {
		delete(q.n, client)
		return
	}
	q.n[client]--
}
