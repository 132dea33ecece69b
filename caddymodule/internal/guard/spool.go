package guard

import (
	"errors"
	"math/bits"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
)

// writeHeld sends an answer the gateway holds whole: from the backend, the
// micro-cache, or an identical request's trip. Headers it has replace the
// writer's; a shareable answer (other callers may get the same bytes) tells
// clients not to store it, because it is as fresh as the backend's and no
// fresher.
func writeHeld(w http.ResponseWriter, status int, header http.Header, body []byte, shareable bool) {
	hdr := w.Header()
	for k, vs := range header {
		if shareable {
			// A copy each: a later handler may append to a caller's
			// header values.
			vs = slices.Clone(vs)
		}
		hdr[k] = vs
	}
	if shareable {
		hdr.Set("Cache-Control", "no-store")
	}
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// errTooLargeToHold refuses an answer that must be held whole and does not fit.
var errTooLargeToHold = errors.New("backend response too large to hold whole for an HTTP/1.0 client")

// spoolStart is a spool's first buffer when the backend did not say how long
// its answer is.
const spoolStart = 4 << 10

// spool is what the proxy step writes the backend's answer to (after the
// field layer, where it applies). It keeps the whole answer, up to max bytes
// of body, charged to the held bytes, so that the backend's slot can be given
// back before the client has read a byte. An answer that grows past max, or
// past what the held bytes allow, spills: onSpill runs (it releases the
// followers of a shared trip), what was kept goes to the client, the rest
// streams through, and nothing is shared.
//
// Its life follows a Fetch, or a stale entry's refresh: made there
// (newSpool), filled by one trip (begin, then done when the backend is
// done: the held-bytes charge goes back), and recycled there once the
// answer is written: the buffer goes back to the pool then, unless keep
// said that the followers of a shared trip have it.
type spool struct {
	client  http.ResponseWriter
	max     int
	held    *hold.Budget
	share   hold.Share // of the caller the answer is read for: its class's pool
	charged int64      // of held, for body's capacity
	// onSpill runs before the answer spills; an error refuses the spill,
	// and the answer fails.
	onSpill func() error
	// mustHold refuses to spill: an answer that does not fit fails.
	mustHold bool
	err      error // why the answer failed in the spool, if it did
	kept     bool  // body is no longer the spool's to give back

	hint int // the answer's expected length; 0: unknown
	hdr  http.Header
	// gate is what the handlers after a declared statusgate set on the
	// answer (gate): the caller's alone, written by the trip's goroutine
	// and given to the caller's writer only while the caller is the
	// trip's (spill, or the caller taking the trip's answer: handOn); nil
	// while they set nothing.
	gate    http.Header
	status  int
	body    []byte
	spilled bool

	// Who the spool is for, while a trip runs in a goroutine of its own
	// (an errand): the caller who waits for it, until the caller abandons
	// it (its budget ended, or its client left) or the trip claims the
	// caller's writer to stream to it; whichever comes first stands.
	owner    sync.Mutex
	claimed  bool // the answer streams to the client: the caller waits for the trip
	orphaned bool // nobody waits: the trip ends on its own, and recycles the spool
	ended    bool // the trip is done
	dropped  bool // orphaned and too large to hold: the rest is read and dropped
}

func newSpool(client http.ResponseWriter, max int, held *hold.Budget) *spool {
	return &spool{client: client, max: max, held: held, hdr: http.Header{}}
}

// begin readies the spool for a trip of a caller of Share share (its class
// decides the pool the buffer is charged to): mustHold and onSpill as in
// spool.
func (s *spool) begin(share hold.Share, mustHold bool, onSpill func() error) {
	s.share, s.mustHold, s.onSpill = share, mustHold, onSpill
}

func (s *spool) Header() http.Header {
	if s.spilled {
		return s.client.Header()
	}
	return s.hdr
}

// expect says how long the answer is going to be, so that the buffer is
// made once, the right size.
func (s *spool) expect(n int) {
	if n <= s.max {
		s.hint = n
	}
}

func (s *spool) WriteHeader(status int) {
	if status < 200 || s.status != 0 {
		return // informational responses are not kept; the first final status wins
	}
	s.status = status
}

func (s *spool) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.WriteHeader(http.StatusOK)
	}
	if s.dropped {
		return len(p), nil
	}
	if !s.spilled && !s.grow(len(s.body)+len(p)) {
		if !s.claim() {
			// Nobody waits to be streamed to: the backend's work is read
			// and dropped, its slot kept until it is done.
			s.dropped = true
			return len(p), nil
		}
		if s.mustHold {
			s.err = errTooLargeToHold
			return 0, s.err
		}
		if err := s.onSpill(); err != nil {
			s.err = err
			return 0, err
		}
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	if s.spilled {
		return s.client.Write(p)
	}
	s.body = append(s.body, p...)
	return len(p), nil
}

// grow makes room for need bytes of body within max and the held bytes.
func (s *spool) grow(need int) bool {
	if need > s.max {
		return false
	}
	size, pooled := cap(s.body), false
	if need > size {
		size = min(max(need, 2*cap(s.body), spoolStart), s.max)
		if cap(s.body) == 0 && s.hint >= need {
			size = min(s.hint, s.max)
		}
		// Charged as the memory it takes: the pool rounds up to its
		// class, and past max the last growth is to max exactly, outside
		// the pool.
		if pooled = buffers.capacity(size) <= s.max; pooled {
			size = buffers.capacity(size)
		} else {
			size = s.max
		}
	}
	// Nothing is charged while the answer read so far is of up to
	// hold.Small, as an answer that small is not (hold.Budget.Hold),
	// whatever buffer its expected length (with the field layer's margin)
	// rounded it into: so a small answer is read whole whatever is held,
	// and a full Budget refuses nobody whose answer costs it nothing. Once
	// it is larger, the whole buffer is.
	if want := int64(size); need > hold.Small && want > s.charged {
		if s.held.Take(s.share, want-s.charged) != nil {
			return false
		}
		s.charged = want
	}
	if size == cap(s.body) {
		return true
	}
	var grown []byte
	if pooled {
		grown = buffers.get(size)
	} else {
		grown = make([]byte, 0, size)
	}
	grown = append(grown, s.body...)
	buffers.put(s.body)
	s.body = grown
	return true
}

// spill hands what was kept to the client's writer; from then on writes go
// straight through.
func (s *spool) spill() error {
	s.spilled = true
	s.handOn()
	dst := s.client.Header()
	for k, vs := range s.hdr {
		dst[k] = vs
	}
	s.client.WriteHeader(s.status)
	body := s.body
	s.done()
	s.body = nil
	defer buffers.put(body) // written: nobody else has it
	if len(body) == 0 {
		return nil
	}
	_, err := s.client.Write(body)
	return err
}

// handOn puts what the handlers after statusgate set (gate) on the
// caller's writer, by the goroutine the writer is then the trip's or the
// caller's: never while a caller that left uses it.
func (s *spool) handOn() {
	dst := s.client.Header()
	for k, vs := range s.gate {
		dst[k] = vs
	}
	s.gate = nil
}

// done gives back the held bytes the buffer took, when the backend is done:
// from then on whoever writes the answer holds it (deliver).
func (s *spool) done() {
	s.held.Give(s.share, s.charged)
	s.charged = 0
}

// keep says the body lives on past the Fetch, with the followers of a shared
// trip: recycle leaves it to the garbage collector.
func (s *spool) keep() { s.kept = true }

// recycle gives the buffer back to the pool once the answer is written,
// unless it was kept; a spool its caller abandoned is the trip's, which
// frees it when it is done.
func (s *spool) recycle() {
	if !s.isOrphaned() {
		s.free()
	}
}

// free is recycle for whoever owns the spool.
func (s *spool) free() {
	s.done()
	if !s.kept {
		buffers.put(s.body)
	}
	s.body = nil
}

// bufferPool recycles the spools' buffers in classes of powers of two, from
// spoolStart up: an answer held whole is read into one, and most are given
// back once written, so that holding answers costs no allocation in steady
// state.
type bufferPool struct {
	classes [24]sync.Pool // by log2 of the capacity
}

// buffers is shared by every spool: a buffer holds no config.
var buffers bufferPool

// class is the class of the buffers get(n) returns; len(classes): none, a
// buffer of n bytes' capacity made for the occasion.
func (bp *bufferPool) class(n int) int {
	return min(bits.Len(uint(max(n, spoolStart)-1)), len(bp.classes))
}

// capacity is the capacity of the buffer get(n) returns.
func (bp *bufferPool) capacity(n int) int {
	if c := bp.class(n); c < len(bp.classes) {
		return 1 << c
	}
	return n
}

// get returns an empty buffer of capacity(n).
func (bp *bufferPool) get(n int) []byte {
	c := bp.class(n)
	if c == len(bp.classes) {
		return make([]byte, 0, n)
	}
	if b, ok := bp.classes[c].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 1<<c)
}

// put gives b's memory back; nobody may use b any more.
func (bp *bufferPool) put(b []byte) {
	c := bits.Len(uint(cap(b))) - 1
	if c < 0 || c >= len(bp.classes) || 1<<c != cap(b) {
		return // not one of ours
	}
	b = b[:0]
	bp.classes[c].Put(&b)
}

// FlushError keeps flushes from committing an answer that is still held.
func (s *spool) FlushError() error {
	if !s.spilled {
		return nil
	}
	return http.NewResponseController(s.client).Flush()
}

// Unwrap lets http.ResponseController reach deadlines and the like.
func (s *spool) Unwrap() http.ResponseWriter { return s.client }

// claim takes the caller's writer for the trip, to stream the answer to
// it: false if the caller has abandoned the trip.
func (s *spool) claim() bool {
	s.owner.Lock()
	defer s.owner.Unlock()
	if s.orphaned {
		return false
	}
	s.claimed = true
	return true
}

// abandon leaves the trip to itself, for a caller that stops waiting, and
// runs leave before the trip can see it: false if the trip streams to the
// caller's client (claimed) or is done, and the caller must then wait for
// it.
func (s *spool) abandon(leave func()) bool {
	s.owner.Lock()
	defer s.owner.Unlock()
	if s.claimed || s.ended {
		return false
	}
	s.orphaned = true
	leave()
	return true
}

// end marks the trip done, and reports whether it was abandoned: then the
// spool is the trip's to recycle.
func (s *spool) end() (orphaned bool) {
	s.owner.Lock()
	defer s.owner.Unlock()
	s.ended = true
	return s.orphaned
}

// isOrphaned reports whether a caller abandoned the trip.
func (s *spool) isOrphaned() bool {
	s.owner.Lock()
	defer s.owner.Unlock()
	return s.orphaned
}

// result is the answer held whole: nil if it spilled, was dropped or
// nothing was written.
func (s *spool) result() *coalesce.Result {
	if s.spilled || s.dropped || s.status == 0 {
		return nil
	}
	return &coalesce.Result{Status: s.status, Header: s.hdr, Body: s.body}
}
