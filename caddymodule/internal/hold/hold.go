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
// Answers of up to Small bytes are not charged: they fit in any connection's
// buffers, so a client that stops reading does not keep them in the process,
// and counting them would cost every request a lock. The size judged is the
// answer's own, not that of the buffer it is read into nor of an event that
// frames it (LendEvent).
//
// Keyed clients (the operator's own) come first, as they do in the queue and
// the stream seats: what anonymous clients hold together, pinned, held or
// being read for them, comes out of an anonymous pool, a part of the total
// (SetSizes), and keyed clients may take all of it. So however many addresses
// an attacker has, and whatever they hold, the rest of the Budget stays for
// keyed clients: a full anonymous pool refuses anonymous charges only.
//
// An answer another part of the gateway keeps as well (Lend: a micro-cache
// entry, a live topic's latest answer) is charged to the client's share and
// to the Budget once, however many clients hold it, for as long as any
// client does (and to the anonymous pool once while any anonymous client
// does): the cache or the topic may let it go while a client that stops
// reading still holds it, and then those bytes are the Budget's alone. So
// everything held, charged or lent, adds up within the maximum, and Held
// never exceeds it. Check judges the client alone: a request is not refused
// because the Budget is spent, since it may be an answer too small to
// charge, which costs the Budget nothing; what it would cost is refused when
// it is charged.
//
// What the gateway keeps on a client's behalf rather than for it to read (a
// keyed live topic's latest answer, charged to the key that opened the
// topic: Keep) is lent like a cached answer, in the client's share, but is
// not what Check judges the client by: it is no answer left unread.
//
// What a client's request keeps for as long as it lasts (a live stream's
// target and headers, which the server holds until the stream ends) is
// charged with Pin, whatever its size: a stream lasts minutes, and the
// client decides how large its headers are.
//
// Bytes are charged per client and answer: an answer that several clients
// share counts once in each one's share, however often each writes it (a
// client with many stalled streams of one cached answer holds one copy), and
// in the total once for each of them, but a lent answer once for all. That
// overstates what answers shared between clients cost (and what the cache
// keeps as well), and never understates what the process holds.
//
// A client that holds half its share starts no request (Check): its next
// answer might not fit, and a client that does not read would only make the
// backend work for answers it cannot be given. A client whose answers are
// being taken is not that client: it holds them for the moment writing them
// takes, and by the time its next answer comes back they are gone. A Share
// with a patience (a key's, which is the operator's own client) is refused
// for its bytes only when the client has also taken nothing of them for that
// long; what it holds at once stays within its share either way.
//
// The nil *Budget holds without bound. Its methods are safe for concurrent
// use; memory is one map entry per client holding something, one per answer
// lent, and a Claim per hold of an answer that is counted.
package hold

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrFull refuses a charge that would take the Budget past its maximum.
	ErrFull = errors.New("hold: the gateway holds as much as it may for its clients")
	// ErrClientFull refuses a charge that would take a client past its share.
	ErrClientFull = errors.New("hold: the client holds its share of answers it has not read")
)

// Small is the largest answer Hold does not count, and the largest buffer a
// Take need not charge.
const Small = 16 << 10

// Share is what one client may hold of a Budget, and how it is judged when
// it holds half of it.
type Share struct {
	// Bytes is the most the client holds at once; 0: the Budget's share
	// for every client (New, SetSizes).
	Bytes int64
	// Patience judges the client by its progress: holding half its share,
	// it may still start requests while it is taking what it holds, that is
	// while it took a piece within Patience. 0: its bytes alone decide.
	//
	// A writer sees a client take its answer in bursts: the kernel wakes a
	// writer blocked on a full send buffer once a third of the buffer has
	// drained, which for a client that reads slowly over a fast network can
	// be seconds apart. Patience must be longer than that.
	Patience time.Duration
	// Keyed says the client is keyed (its key opens what it asked for):
	// its bytes may take the whole Budget. Those of any other client come
	// out of the anonymous pool as well.
	Keyed bool
}

// Budget is a bound on held bytes, in total and per client.
type Budget struct {
	max, share, anonMax atomic.Int64 // changed by SetSizes at any time
	used, anonUsed      atomic.Int64 // charged: in all, and of that anonymously; lent answers once each

	mu     sync.Mutex
	by     map[string]*holding
	lentBy map[*byte]lending // the clients holding each answer lent

	// now is the time on a monotonic clock; a test's own clock replaces it.
	now func() time.Duration
}

// holding is what one client holds: its bytes (of which kept, what the
// gateway keeps on its behalf: Keep), how often it holds each answer, by the
// answer's first byte (nil until it holds one), and when it last took a
// piece of any.
type holding struct {
	bytes, kept int64
	answers     map[*byte]holds
	taken       atomic.Int64 // a time.Duration of Budget.now
}

// lending is how many clients hold one answer lent, in all and of them
// anonymous ones: the answer is charged to the total while any client
// holds it, and to the anonymous pool while an anonymous one does.
type lending struct{ all, anon int }

// holds is how often a client holds one answer, and whether its first hold
// lent it (Lend), which decides how the last Release gives it back.
type holds struct {
	n    int
	lent bool
	// kept says the first hold was a Keep: its bytes are not judged by
	// Check.
	kept bool
	// charged is the share the answer was charged in when it was first
	// held: its last Release gives the bytes back there, whichever Claim
	// it is (one client may hold one answer in two classes, as a network's
	// builds for keyed and anonymous callers hold a member's answer).
	charged Share
}

// New returns a Budget of max bytes in all, of which anonymous clients hold
// at most anonymous together and one client at most share unless its Share
// says otherwise. It panics unless 0 < share <= max and 0 < anonymous <=
// max: configuration is validated before it gets here.
func New(max, share, anonymous int64) *Budget {
	start := time.Now()
	b := &Budget{by: make(map[string]*holding), lentBy: make(map[*byte]lending), now: func() time.Duration { return time.Since(start) }}
	b.SetSizes(max, share, anonymous)
	return b
}

// SetClock makes the Budget judge progress by now instead of the monotonic
// clock: a test moves its own clock (fixture.Clock.Now) past a patience
// rather than sleeping through it, which a busy machine could stretch. It is
// called before the Budget is used.
func (b *Budget) SetClock(now func() time.Time) {
	start := now()
	b.now = func() time.Duration { return now().Sub(start) }
}

// SetSizes changes the bounds for the charges to come: what is held stays
// held and counted, and past a lower bound nothing more is charged until
// enough is released. It panics unless 0 < share <= max and 0 < anonymous
// <= max.
func (b *Budget) SetSizes(max, share, anonymous int64) {
	if share <= 0 || share > max || anonymous <= 0 || anonymous > max {
		panic(fmt.Sprintf("hold: share %d and anonymous pool %d of %d", share, anonymous, max))
	}
	b.max.Store(max)
	b.share.Store(share)
	b.anonMax.Store(anonymous)
}

// Held is how many bytes are held now: charged, lent answers included once
// each. It never exceeds the maximum, but after SetSizes lowered it.
func (b *Budget) Held() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Anonymous is how many bytes are charged now out of the anonymous pool.
func (b *Budget) Anonymous() int64 {
	if b == nil {
		return 0
	}
	return b.anonUsed.Load()
}

// bytesOf is the most a client with Share s holds.
func (b *Budget) bytesOf(s Share) int64 {
	if s.Bytes > 0 {
		return s.Bytes
	}
	return b.share.Load()
}

// Check reports whether client, of Share s, may start a request now,
// without charging anything: ErrClientFull when it holds half its share or
// more and, if s has a patience, has taken nothing of it for that long (its
// next answer might not fit, and a client that reads holds nothing for
// long). It lets a request be refused before it costs the backend anything.
// A Budget that is spent refuses nothing here: the request may cost it
// nothing (a cache hit, a small answer), and what it costs is refused when
// it is charged.
func (b *Budget) Check(client string, s Share) error {
	if b == nil || client == "" {
		return nil
	}
	b.mu.Lock()
	var held int64
	var taken time.Duration
	if h := b.by[client]; h != nil {
		held, taken = h.bytes-h.kept, time.Duration(h.taken.Load())
	}
	b.mu.Unlock()
	if 2*held < b.bytesOf(s) {
		return nil
	}
	if s.Patience > 0 && b.now()-taken < s.Patience {
		return nil
	}
	return ErrClientFull
}

// Take charges n bytes to the Budget, for a buffer that no client holds yet
// (an answer being read from the backend for a client of Share s, a live
// topic's latest answer for its viewers), or nothing and ErrFull past the
// total, or past the anonymous pool unless s is keyed. Every successful Take
// is followed by a Give of the same s and n.
func (b *Budget) Take(s Share, n int64) error {
	if b == nil || n == 0 {
		return nil
	}
	if !s.Keyed && b.anonUsed.Add(n) > b.anonMax.Load() {
		b.anonUsed.Add(-n)
		return ErrFull
	}
	if b.used.Add(n) > b.max.Load() {
		b.used.Add(-n)
		if !s.Keyed {
			b.anonUsed.Add(-n)
		}
		return ErrFull
	}
	return nil
}

// Give returns what a Take charged.
func (b *Budget) Give(s Share, n int64) {
	if b == nil {
		return
	}
	b.used.Add(-n)
	if !s.Keyed {
		b.anonUsed.Add(-n)
	}
}

// Claim is one Hold of an answer for a client: Took says the client took a
// piece of it, Release gives it back. The nil *Claim, of an answer that is
// not counted, does nothing.
type Claim struct {
	b        *Budget
	client   string
	share    Share
	answer   []byte
	h        *holding
	released bool // under b.mu
}

// Hold charges answer to client, of Share s, and the Budget, unless the
// client holds that very answer already (the same bytes, not equal ones),
// or charges nothing and returns an error: ErrClientFull past the client's
// share, ErrFull past the total or, for an anonymous client, the anonymous
// pool. Holding an answer counts as progress: the client has not had the
// chance to take it yet. Every successful Hold is followed by a Release of
// its Claim.
func (b *Budget) Hold(client string, s Share, answer []byte) (*Claim, error) {
	return b.hold(client, s, answer, len(answer), false, false)
}

// Lend is Hold for an answer whose bytes another part of the gateway keeps
// as well (a micro-cache entry; a live topic's latest answer): it is
// charged to the client's share, and to the Budget (the total, and for an
// anonymous client the anonymous pool) once however many clients hold it,
// for as long as any does; ErrClientFull past the share, ErrFull past the
// total or the pool. The cache or the topic may let the answer go while a
// client that stops reading still holds it: the bytes are then the Budget's
// alone, so they are counted in it from the first hold, and what clients
// hold stays within the maximum however many answers the cache lets go.
func (b *Budget) Lend(client string, s Share, answer []byte) (*Claim, error) {
	return b.hold(client, s, answer, len(answer), true, false)
}

// LendEvent is Lend for p, a live stream's event: an answer of size bytes
// with its framing, whose bytes its topic keeps (Keep). It is not counted
// when the answer is small, whatever the framing adds.
func (b *Budget) LendEvent(client string, s Share, p []byte, size int) (*Claim, error) {
	return b.hold(client, s, p, size, true, false)
}

// Keep is LendEvent for what the gateway keeps on client's behalf rather
// than for it to read: a live topic's latest event, charged to the key that
// opened the topic (or, for an anonymous topic, to a holder of the topic's
// own), as long as the topic keeps it; or an answer of the gateway's own
// it keeps for its callers (a network's document), under a holder of its
// own. It is charged as Lend charges, and its clients' holds of the same
// bytes add nothing; but Check does not judge the client by it, since
// nothing of it is left unread.
func (b *Budget) Keep(client string, s Share, p []byte, size int) (*Claim, error) {
	return b.hold(client, s, p, size, true, true)
}

func (b *Budget) hold(client string, s Share, answer []byte, size int, lent, kept bool) (*Claim, error) {
	if b == nil || size <= Small || len(answer) == 0 {
		return nil, nil
	}
	id, n := &answer[0], int64(len(answer))
	b.mu.Lock()
	defer b.mu.Unlock()
	c := &Claim{b: b, client: client, share: s, answer: answer}
	if h := b.by[client]; h != nil && h.answers[id].n > 0 {
		a := h.answers[id]
		a.n++
		h.answers[id] = a
		h.taken.Store(int64(b.now()))
		c.h = h
		return c, nil
	}
	var err error
	if lent {
		c.h, err = b.lend(client, s, id, n)
	} else {
		c.h, err = b.charge(client, s, n)
	}
	if err != nil {
		return nil, err
	}
	if c.h.answers == nil {
		c.h.answers = make(map[*byte]holds, 1)
	}
	c.h.answers[id] = holds{n: 1, lent: lent, kept: kept, charged: s}
	if kept {
		c.h.kept += n
	}
	c.h.taken.Store(int64(b.now()))
	return c, nil
}

// Pin charges n bytes that client's request keeps while it lasts to the
// client, of Share s, and the Budget, or charges nothing and returns an
// error: ErrClientFull past the client's share, ErrFull past the total or,
// for an anonymous client, the anonymous pool. Every successful Pin is
// followed by an Unpin of the same client, s and n.
func (b *Budget) Pin(client string, s Share, n int64) error {
	if b == nil || n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, err := b.charge(client, s, n)
	return err
}

// Unpin gives back what Pin charged.
func (b *Budget) Unpin(client string, s Share, n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.by[client]
	if h == nil || h.bytes < n {
		panic("hold: Unpin without Pin")
	}
	b.Give(s, n)
	b.discharge(client, h, n)
}

// charge charges n bytes to client, of Share s, and the Budget and returns
// what the client holds, or charges nothing: ErrClientFull past the
// client's share, ErrFull past the total or the anonymous pool. Under b.mu.
func (b *Budget) charge(client string, s Share, n int64) (*holding, error) {
	if err := b.fits(client, s, n); err != nil {
		return nil, err
	}
	if err := b.Take(s, n); err != nil {
		return nil, err
	}
	return b.add(client, n), nil
}

// lend charges the answer id of n bytes to client, of Share s, and to the
// total unless another client holds it already, and to the anonymous pool
// for an anonymous client unless another anonymous client holds it already:
// ErrClientFull past the client's share, ErrFull past the total or the
// pool. Under b.mu.
func (b *Budget) lend(client string, s Share, id *byte, n int64) (*holding, error) {
	if err := b.fits(client, s, n); err != nil {
		return nil, err
	}
	l := b.lentBy[id]
	total, anon := l.all == 0, !s.Keyed && l.anon == 0
	if anon && b.anonUsed.Add(n) > b.anonMax.Load() {
		b.anonUsed.Add(-n)
		return nil, ErrFull
	}
	if total && b.used.Add(n) > b.max.Load() {
		b.used.Add(-n)
		if anon {
			b.anonUsed.Add(-n)
		}
		return nil, ErrFull
	}
	l.all++
	if !s.Keyed {
		l.anon++
	}
	b.lentBy[id] = l
	return b.add(client, n), nil
}

// fits reports whether n more bytes fit client's share. Under b.mu.
func (b *Budget) fits(client string, s Share, n int64) error {
	var held int64
	if h := b.by[client]; h != nil {
		held = h.bytes
	}
	if held+n > b.bytesOf(s) {
		return ErrClientFull
	}
	return nil
}

// add counts n bytes more for client and returns what it holds. Under b.mu.
func (b *Budget) add(client string, n int64) *holding {
	h := b.by[client]
	if h == nil {
		h = &holding{}
		b.by[client] = h
	}
	h.bytes += n
	return h
}

// discharge takes n bytes off what client, which holds h, holds: the
// Budget's own count is the caller's to give back. Under b.mu.
func (b *Budget) discharge(client string, h *holding, n int64) {
	if h.bytes -= n; h.bytes <= 0 {
		delete(b.by, client)
	}
}

// Took records that the client took a piece of the answer: it is reading.
// It takes no lock: a writer calls it for every piece it writes.
func (c *Claim) Took() {
	if c != nil {
		c.h.taken.Store(int64(c.b.now()))
	}
}

// Release gives back what Hold or Lend charged for this hold of the answer.
// It panics when called twice.
func (c *Claim) Release() {
	if c == nil {
		return
	}
	b, id, n := c.b, &c.answer[0], int64(len(c.answer))
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.by[c.client]
	var a holds
	if h != nil {
		a = h.answers[id]
	}
	if c.released || h == nil || h != c.h || a.n == 0 {
		panic("hold: Release without Hold")
	}
	c.released = true
	if a.n--; a.n > 0 {
		h.answers[id] = a
		return
	}
	delete(h.answers, id)
	if a.kept {
		h.kept -= n
	}
	if a.lent {
		l := b.lentBy[id]
		if l.all--; !a.charged.Keyed {
			if l.anon--; l.anon == 0 {
				b.anonUsed.Add(-n)
			}
		}
		if l.all == 0 {
			delete(b.lentBy, id)
			b.used.Add(-n)
		} else {
			b.lentBy[id] = l
		}
	} else {
		b.Give(a.charged, n)
	}
	b.discharge(c.client, h, n)
}
