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
	max int
	mu  sync.Mutex
	n   map[string]int
}

// DefaultQuota is four requests per client: a web page polls a few endpoints
// at once, and several users behind one address (a school, a carrier's NAT)
// still get through; a fifth request while the four are open is refused at
// once (the gateway answers 429), it does not wait for one of them to end.
const DefaultQuota = 4

// NewQuota returns a Quota of max open requests per client. It panics if max
// is not positive: configuration is validated before it gets here.
func NewQuota(max int) *Quota {
	if max < 1 {
		panic("admission: quota must be positive")
	}
	return &Quota{max: max, n: make(map[string]int)}
}

// Take reserves one of client's places and reports whether there was one.
// Each successful Take must be followed by exactly one Give.
func (q *Quota) Take(client string) bool {
	if q == nil {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n[client] >= q.max {
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
