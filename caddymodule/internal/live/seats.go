package live

import (
	"errors"
	"sync"
)

var (
	// ErrFull refuses a stream past the most open at once.
	ErrFull = errors.New("live: as many streams are open as may be")
	// ErrClientFull refuses a stream past the most one client has open.
	ErrClientFull = errors.New("live: the client has as many streams open as it may")
)

// Seats counts open streams, in all and per client (an address or prefix,
// or a key's name), against their bounds: a stream costs little, but a
// client that opens them without end must not take every seat. Memory is
// one map entry per client with a stream open. Safe for concurrent use.
type Seats struct {
	mu             sync.Mutex
	max, perClient int // 0: no bound
	total          int
	by             map[string]int
}

// NewSeats returns Seats for at most max streams, perClient per client; 0
// is no bound.
func NewSeats(max, perClient int) *Seats {
	return &Seats{max: max, perClient: perClient, by: map[string]int{}}
}

// SetBounds changes the bounds for the seats taken from now on: the streams
// open stay counted, and past a lower bound nobody gets a seat until enough
// are given back.
func (s *Seats) SetBounds(max, perClient int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max, s.perClient = max, perClient
}

// Take gives client a seat, or says why not: ErrClientFull when the client
// has its share, ErrFull when every seat is taken. Give it back with Give.
func (s *Seats) Take(client string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perClient > 0 && s.by[client] >= s.perClient {
		return ErrClientFull
	}
	if s.max > 0 && s.total >= s.max {
		return ErrFull
	}
	s.total++
	s.by[client]++
	return nil
}

// Give gives back a seat client took.
func (s *Seats) Give(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch n := s.by[client]; {
	case n <= 0:
		panic("live: a seat given back that was not taken")
	case n == 1:
		delete(s.by, client)
	default:
		s.by[client] = n - 1
	}
	s.total--
}

// Open is how many seats are taken.
func (s *Seats) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}
