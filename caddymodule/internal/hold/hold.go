// Package hold bounds the response bytes the gateway holds for its clients.
//
// The gateway reads a backend's answer into memory before it writes it to the
// client, so that the backend's slot is free as soon as the backend is done
// and a client that reads slowly, or not at all, holds nothing the backend or
// other callers need. What it holds instead is memory: the answer, until the
// client has taken it. A Budget bounds that memory for everyone together and
// for each client on its own, so that clients that stop reading cannot grow
// the process without bound, and one client cannot take what everyone else
// needs: past its share, a client is refused while others go on.
//
// Answers of up to small bytes are not charged: they fit in any connection's
// buffers, so a client that stops reading does not keep them in the process,
// and counting them would cost every request a lock.
//
// What a client's request keeps for as long as it lasts (a live stream's
// target and headers, which the server holds until the stream ends) is
// charged with Pin, whatever its size: a stream lasts minutes, and the
// client decides how large its headers are.
//
// Bytes are charged per client and answer: an answer that several clients
// share counts once for each of them, however often each writes it (a client
// with many stalled streams of one cached answer holds one copy). That
// overstates what answers shared between clients cost, and never understates
// what the process holds.
//
// The nil *Budget holds without bound. Its methods are safe for concurrent
// use; memory is one map entry per client holding something.
package hold

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

var (
	// ErrFull refuses a charge that would take the Budget past its maximum.
	ErrFull = errors.New("hold: the gateway holds as much as it may for its clients")
	// ErrClientFull refuses a charge that would take a client past its share.
	ErrClientFull = errors.New("hold: the client holds its share of answers it has not read")
)

// small is the largest answer Hold and Release do not count.
const small = 16 << 10

// Budget is a bound on held bytes, in total and per client.
type Budget struct {
	max, share atomic.Int64 // changed by SetSizes at any time
	used       atomic.Int64

	mu sync.Mutex
	by map[string]*holding
}

// holding is what one client holds: its bytes, and how often it holds each
// answer, by the answer's first byte (nil until it holds one).
type holding struct {
	bytes   int64
	answers map[*byte]int
}

// New returns a Budget of max bytes in all, of which one client holds at most
// share. It panics unless 0 < share <= max: configuration is validated before
// it gets here.
func New(max, share int64) *Budget {
	b := &Budget{by: make(map[string]*holding)}
	b.SetSizes(max, share)
	return b
}

// SetSizes changes the bounds for the charges to come: what is held stays
// held and counted, and past a lower bound nothing more is charged until
// enough is released. It panics unless 0 < share <= max.
func (b *Budget) SetSizes(max, share int64) {
	if share <= 0 || share > max {
		panic(fmt.Sprintf("hold: share %d of %d", share, max))
	}
	b.max.Store(max)
	b.share.Store(share)
}

// Held is how many bytes are held now.
func (b *Budget) Held() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Check reports whether client may start a request now, without charging
// anything: ErrClientFull when it holds half its share or more (its next
// answer might not fit, and a client that reads holds nothing for long),
// ErrFull when the Budget is spent. It lets a request be refused before it
// costs the backend anything.
func (b *Budget) Check(client string) error {
	if b == nil {
		return nil
	}
	if b.used.Load() >= b.max.Load() {
		return ErrFull
	}
	if client == "" {
		return nil
	}
	b.mu.Lock()
	var held int64
	if h := b.by[client]; h != nil {
		held = h.bytes
	}
	b.mu.Unlock()
	if 2*held >= b.share.Load() {
		return ErrClientFull
	}
	return nil
}

// Take charges n bytes to the Budget, for a buffer that no client holds yet
// (an answer being read from the backend), or nothing and ErrFull past the
// total. Every successful Take is followed by a Give of the same n.
func (b *Budget) Take(n int64) error {
	if b == nil || n == 0 {
		return nil
	}
	if b.used.Add(n) > b.max.Load() {
		b.used.Add(-n)
		return ErrFull
	}
	return nil
}

// Give returns what a Take charged.
func (b *Budget) Give(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// Hold charges answer to client and the Budget, unless the client holds that
// very answer already (the same bytes, not equal ones), or charges nothing
// and returns an error: ErrClientFull past the client's share, ErrFull past
// the total. Every successful Hold is followed by a Release of the same
// client and answer.
func (b *Budget) Hold(client string, answer []byte) error {
	if b == nil || len(answer) <= small {
		return nil
	}
	id, n := &answer[0], int64(len(answer))
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.by[client]; h != nil && h.answers[id] > 0 {
		h.answers[id]++
		return nil
	}
	h, err := b.charge(client, n)
	if err != nil {
		return err
	}
	if h.answers == nil {
		h.answers = make(map[*byte]int, 1)
	}
	h.answers[id] = 1
	return nil
}

// Pin charges n bytes that client's request keeps while it lasts to the
// client and the Budget, or charges nothing and returns an error:
// ErrClientFull past the client's share, ErrFull past the total. Every
// successful Pin is followed by an Unpin of the same client and n.
func (b *Budget) Pin(client string, n int64) error {
	if b == nil || n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, err := b.charge(client, n)
	return err
}

// Unpin gives back what Pin charged.
func (b *Budget) Unpin(client string, n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.by[client]
	if h == nil || h.bytes < n {
		panic("hold: Unpin without Pin")
	}
	b.discharge(client, h, n)
}

// charge charges n bytes to client and the Budget and returns what the
// client holds, or charges nothing: ErrClientFull past the client's share,
// ErrFull past the total. Under b.mu.
func (b *Budget) charge(client string, n int64) (*holding, error) {
	h := b.by[client]
	var held int64
	if h != nil {
		held = h.bytes
	}
	if held+n > b.share.Load() {
		return nil, ErrClientFull
	}
	if err := b.Take(n); err != nil {
		return nil, err
	}
	if h == nil {
		h = &holding{}
		b.by[client] = h
	}
	h.bytes += n
	return h, nil
}

// discharge gives back n bytes charged to client, which holds h. Under b.mu.
func (b *Budget) discharge(client string, h *holding, n int64) {
	b.Give(n)
	if h.bytes -= n; h.bytes <= 0 {
		delete(b.by, client)
	}
}

// Release gives back what Hold charged for the client's last hold of answer.
func (b *Budget) Release(client string, answer []byte) {
	if b == nil || len(answer) <= small {
		return
	}
	id, n := &answer[0], int64(len(answer))
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.by[client]
	if h == nil || h.answers[id] == 0 {
		panic("hold: Release without Hold")
	}
	if h.answers[id]--; h.answers[id] > 0 {
		return
	}
	delete(h.answers, id)
	b.discharge(client, h, n)
}
