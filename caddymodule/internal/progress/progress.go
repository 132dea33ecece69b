// Package progress ends a write to a client that makes no progress.
//
// A client that stops reading fills its connection's buffers, and from then
// on every write to it blocks: for ever, unless something sets a deadline.
// Caddy's server has a write timeout for the whole response, off by default,
// and one for the whole response is the wrong measure anyway: a large answer
// to a slow but honest client needs long, a stalled client needs none. A
// Writer instead gives every piece of the body its own deadline, so that a
// client is cut off only when it has taken nothing for the whole timeout, and
// whatever the gateway holds for it is given back then.
//
// The deadline is the connection's (HTTP/1) or the stream's (HTTP/2), set
// on the first writer underneath that takes one, found by unwrapping as
// http.ResponseController does; a writer that cannot take one (a test's
// recorder) is written without.
//
// A Writer also tells whoever holds what it writes (a Watcher) each time the
// client has taken a piece: a client that is reading is told apart from one
// that is not long before the timeout cuts the latter off.
package progress

import (
	"net/http"
	"time"
)

// pieceSize is the most a Writer writes under one deadline: the timeout must
// pass without the client taking this much before it is cut off, so a
// client is held to at least pieceSize bytes per timeout (32 KiB per 10 s is a
// rate no honest client on any network falls below).
const pieceSize = 32 << 10

// Watcher is told each time the client has taken a piece of what a Writer
// writes.
type Watcher interface{ Took() }

// Writer is an http.ResponseWriter whose writes each complete within the
// timeout, piece by piece, or fail. Call Done when the response is written.
type Writer struct {
	http.ResponseWriter
	timeout time.Duration
	watcher Watcher // told of each piece taken; nil: nobody
	// The layers underneath that set deadlines and flush, found once, as
	// http.ResponseController finds them on every call; nil: none.
	deadline interface{ SetWriteDeadline(time.Time) error }
	flusher  http.ResponseWriter // the first layer with FlushError or Flush
	armedAt  time.Time           // when the deadline was last set; zero: never
}

// New returns a Writer for w; a timeout of 0 writes without deadlines.
func New(w http.ResponseWriter, timeout time.Duration) *Writer {
	pw := &Writer{ResponseWriter: w, timeout: timeout}
	for rw := w; rw != nil; {
		if d, ok := rw.(interface{ SetWriteDeadline(time.Time) error }); ok && pw.deadline == nil {
			pw.deadline = d
		}
		switch rw.(type) {
		case interface{ FlushError() error }, http.Flusher:
			if pw.flusher == nil {
				pw.flusher = rw
			}
		}
		u, ok := rw.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		rw = u.Unwrap()
	}
	return pw
}

// Watch tells v of every piece the client takes from now on, until the
// next Watch; nil tells nobody.
func (w *Writer) Watch(v Watcher) { w.watcher = v }

// Write writes p in pieces of at most pieceSize bytes, each within the
// timeout, and tells the Watcher of each piece taken.
func (w *Writer) Write(p []byte) (int, error) {
	if w.timeout == 0 && w.watcher == nil {
		return w.ResponseWriter.Write(p)
	}
	written := 0
	for len(p) > 0 {
		piece := p[:min(pieceSize, len(p))]
		w.arm()
		n, err := w.ResponseWriter.Write(piece)
		written += n
		if err != nil {
			return written, err
		}
		if w.watcher != nil {
			w.watcher.Took()
		}
		p = p[n:]
	}
	return written, nil
}

// FlushError flushes within the timeout.
func (w *Writer) FlushError() error {
	w.arm()
	return w.flush()
}

// Done flushes what the server still buffers within the timeout, so that
// the client's last bytes are no exception and the body is no longer needed
// when Done returns. The deadline stays for what the server writes after the
// handler (a chunked body's end, a compressor's last bytes); net/http lifts it
// before the connection's next request.
func (w *Writer) Done() error {
	if w.armedAt.IsZero() {
		return nil
	}
	if time.Since(w.armedAt) > w.timeout/2 {
		w.arm() // the last deadline is mostly spent
	}
	return w.flush()
}

// Disarm lifts the deadline while nothing is to be written, as between a
// stream's events: on HTTP/2 a deadline that passes resets the stream even
// with no write under way. The next Write or FlushError arms it again.
func (w *Writer) Disarm() {
	if w.armedAt.IsZero() {
		return
	}
	if w.deadline.SetWriteDeadline(time.Time{}) == nil {
		w.armedAt = time.Time{}
	}
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *Writer) arm() {
	if w.timeout == 0 || w.deadline == nil {
		return
	}
	now := time.Now()
	if w.deadline.SetWriteDeadline(now.Add(w.timeout)) == nil {
		w.armedAt = now
	}
}

func (w *Writer) flush() error {
	switch f := w.flusher.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
	}
	return nil
}
