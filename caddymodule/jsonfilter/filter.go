// Package jsonfilter removes protected members from a JSON response while it
// streams from a backend to a client: the gateway's "field layer".
//
// A Filter validates the document against RFC 8259 (what encoding/json.Valid
// accepts) in one pass, copies every kept byte verbatim (numbers, escapes and
// whitespace are never re-encoded), and drops every object member whose
// unescaped name is in a Names set, at any depth, except inside the top-level
// "meta" object. That meta object is held back (it may come before the data
// whose removals it must report) and written as the last member, with
// "hiddenFields" and "authenticated" set.
//
// It fails closed: no byte of a removed member is ever written, and the first
// syntax, depth or meta problem is reported as soon as it is seen. Memory grows
// only with nesting depth, the key being decided (bounded by the longest name)
// and the held meta value, never with the body. The parser keeps an explicit
// stack and never recurses, so hostile nesting cannot overflow the goroutine
// stack.
package jsonfilter

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

const (
	// DefaultMaxDepth is the nesting limit when Options.MaxDepth is 0; it is
	// the limit encoding/json uses.
	DefaultMaxDepth = 10000
	// DefaultMaxMeta bounds the held-back top-level meta value when
	// Options.MaxMeta is 0.
	DefaultMaxMeta = 64 << 10
)

// Error kinds, for errors.Is. Every error the Filter produces itself is an
// *Error whose Kind is one of these; ErrTruncated also matches ErrSyntax.
var (
	ErrSyntax    = errors.New("jsonfilter: invalid JSON")
	ErrTruncated = errors.New("jsonfilter: unexpected end of JSON input")
	ErrDepth     = errors.New("jsonfilter: nesting too deep")
	ErrMeta      = errors.New("jsonfilter: unusable top-level meta")
	ErrNotObject = errors.New("jsonfilter: top-level value is not an object")
	errNotReady  = errors.New("jsonfilter: Filter used without New or Reset")
	errClosed    = errors.New("jsonfilter: Write after Close")
)

// Error describes why a document was rejected and where.
type Error struct {
	Kind   error  // ErrSyntax, ErrTruncated, ErrDepth, ErrMeta or ErrNotObject
	Offset int64  // input byte offset at which the problem was seen
	Msg    string // detail, in the style of encoding/json
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v: %s (offset %d)", e.Kind, e.Msg, e.Offset)
}

// Unwrap lets errors.Is match the kind; a truncation is a syntax error too.
func (e *Error) Unwrap() []error {
	if e.Kind == ErrTruncated {
		return []error{ErrTruncated, ErrSyntax}
	}
	return []error{e.Kind}
}

// Options for one document.
type Options struct {
	Authenticated bool // value written to meta.authenticated
	MaxDepth      int  // nesting limit; 0 means DefaultMaxDepth
	MaxMeta       int  // max bytes of the held-back top-level meta value; 0 means DefaultMaxMeta
}

// state is where the scanner stopped when a chunk ran out.
type state uint8

const (
	stStart      state = iota // before the top-level value
	stValue                   // a value is expected
	stValueOrEnd              // after '['
	stKeyOrEnd                // after '{'
	stKey                     // after ',' in an object
	stColon                   // after a key
	stAfter                   // after a value
	stDone                    // after the top-level value
	stStr                     // in a string that is not being decoded
	stStrEsc                  // after '\' in any string
	stStrU                    // in a \uXXXX, uN digits read
	stKeyStr                  // in a key being decoded for matching
	stNumMinus                // after '-'
	stNumZero                 // after a leading 0
	stNumInt                  // in integer digits
	stNumDigit                // a fraction or exponent digit must follow
	stNumMore                 // in fraction or exponent digits (inExp says which)
	stNumExp0                 // after 'e'
	stLit                     // inside true, false or null
)

// Key contexts: which names a key in the current object is compared with.
type keyCtx uint8

const (
	ctxNone       keyCtx = iota // nothing can match: stream the key
	ctxNames                    // the configured names
	ctxTop                      // top level: "meta" and the configured names
	ctxMetaDirect               // direct members of the top-level meta: hiddenFields, authenticated
)

// What a decided key means.
const (
	keyKeep     = -1
	keyMeta     = -2 // the top-level meta
	keyMetaDrop = -3 // hiddenFields or authenticated inside meta, replaced at Close
)

// maxHeldSpace bounds the whitespace held between a comma (or '{') and the
// key whose fate is not decided yet. Longer runs are dropped, whatever the
// chunking, so that the output never depends on how the input was split.
const maxHeldSpace = 64

// Filter streams one JSON document; see the package comment. Write takes the
// body in whatever chunks arrive and writes the filtered output to dst as soon
// as it is decided; Close ends the input, reports truncation, and writes the
// held-back meta and the closing brace. A Filter is not safe for concurrent
// use. The zero value is not usable; New or Reset prepare it, and Reset reuses
// every buffer so that a pooled Filter does not allocate in steady state.
type Filter struct {
	dst      io.Writer
	names    *Names
	auth     bool
	maxDepth int
	maxMeta  int64
	ready    bool
	closed   bool
	err      error
	off      int64 // input offset of the current chunk's first byte

	// Parser.
	st       state
	strNext  state  // stColon after a key, stAfter after a value
	inExp    bool   // in a number's exponent rather than its fraction
	uN       uint8  // hex digits read in a \u escape
	uVal     rune   // their value, for keys being decoded
	decoding bool   // the string is a key being decoded into key
	lit      string // literal being matched
	litN     int
	stack    []byte // '{' or '[' per open container: the explicit stack

	// Member removal. wrote says whether the innermost open object has
	// written a member yet, which decides whether the comma before the next
	// kept member must be dropped.
	wrote      bool
	holding    bool   // a key (and the comma/space before it) is held back
	holdStart  int    // where the held bytes begin in the current chunk
	commaHeld  bool   // the held bytes begin with ','
	spaceOver  bool   // held whitespace exceeded maxHeldSpace
	held       []byte // held bytes carried over from earlier chunks
	keyCtx     keyCtx
	keyMax     int    // a decoded key longer than this matches nothing
	key        []byte // decoded key, for keys with escapes or split by chunks
	norm       []byte // key with invalid UTF-8 replaced, when a name has U+FFFD
	pendHigh   rune   // high surrogate waiting for its low half
	skipping   bool   // inside a removed member (or after the document)
	skipDepth  int    // stack depth of the object holding the removed member
	found      []bool // per name: removed at least once
	hidden     []string
	namesCtx   keyCtx // ctxNames, or ctxNone when no name can match
	topWrote   bool   // the top-level object wrote a member
	metaSeen   bool
	metaNext   bool // the next value is the top-level meta
	inMeta     bool // output goes to meta, not dst
	metaStart  int64
	metaWrote  bool   // meta kept a member
	savedWrote bool   // top-level wrote, while inside meta
	meta       []byte // `,"meta":` followed by the held meta value
}

// New returns a Filter for one document written to dst.
func New(dst io.Writer, names *Names, opts Options) *Filter {
	f := new(Filter)
	f.Reset(dst, names, opts)
	return f
}

// Reset prepares f for a new document, keeping its buffers.
func (f *Filter) Reset(dst io.Writer, names *Names, opts Options) {
	if names == nil {
		names = emptyNames
	}
	maxDepth := opts.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	maxMeta := opts.MaxMeta
	if maxMeta <= 0 {
		maxMeta = DefaultMaxMeta
	}
	found := f.found[:0]
	for range names.list {
		found = append(found, false)
	}
	namesCtx := ctxNone
	if names.maxLen >= 0 {
		namesCtx = ctxNames
	}
	*f = Filter{
		dst:      dst,
		names:    names,
		auth:     opts.Authenticated,
		maxDepth: maxDepth,
		maxMeta:  int64(maxMeta),
		ready:    true,
		namesCtx: namesCtx,
		found:    found,
		stack:    f.stack[:0],
		held:     f.held[:0],
		key:      f.key[:0],
		norm:     f.norm[:0],
		hidden:   f.hidden[:0],
		meta:     f.meta[:0],
	}
}

// Write filters the next chunk of the document. The first syntax, depth or
// meta error is returned, and every later call returns the same error; so is
// an error from dst.
func (f *Filter) Write(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	if !f.ready {
		return 0, errNotReady
	}
	if f.closed {
		return 0, errClosed
	}
	if err := f.scan(p); err != nil {
		f.err = err
		return 0, err
	}
	f.off += int64(len(p))
	return len(p), nil
}

// Close ends the document. It reports truncation, then writes the held-back
// meta (with hiddenFields and authenticated) and the top-level closing brace.
func (f *Filter) Close() error {
	if f.err != nil {
		return f.err
	}
	if !f.ready {
		return errNotReady
	}
	if f.closed {
		return nil // a second Close after success changes nothing
	}
	f.closed = true
	if f.st != stDone {
		f.err = &Error{Kind: ErrTruncated, Offset: f.off, Msg: "unexpected end of JSON input"}
		return f.err
	}
	f.hidden = f.hidden[:0]
	for j, ok := range f.found {
		if ok {
			f.hidden = append(f.hidden, f.names.list[j])
		}
	}
	// f.meta is `,"meta":{...}` when the document had a meta; reopen it by
	// dropping its '}', or start one.
	m := f.meta
	if f.metaSeen {
		m = m[:len(m)-1]
	} else {
		m = append(m[:0], `,"meta":{`...)
		f.metaWrote = false
	}
	// The backend's order: authenticated, then hiddenFields.
	if f.metaWrote {
		m = append(m, ',')
	}
	if f.auth {
		m = append(m, `"authenticated":true`...)
	} else {
		m = append(m, `"authenticated":false`...)
	}
	if len(f.hidden) > 0 {
		m = append(m, `,"hiddenFields":[`...)
		sep := false
		for j, ok := range f.found {
			if ok {
				if sep {
					m = append(m, ',')
				}
				m = append(m, f.names.quoted[j]...)
				sep = true
			}
		}
		m = append(m, ']')
	}
	m = append(m, "}}"...)

	f.meta = m
	if !f.topWrote {
		m = m[1:] // no member before meta: no comma
	}
	if err := f.emit(m); err != nil {
		f.err = err
		return err
	}
	return nil
}

// Hidden returns the distinct removed names in the Names' configuration
// order. It is valid after a successful Close, and its storage is reused by
// Reset.
func (f *Filter) Hidden() []string { return f.hidden }

// emit writes kept bytes to the current sink: the held meta or dst.
func (f *Filter) emit(b []byte) error {
	if f.inMeta {
		f.meta = append(f.meta, b...)
		return nil
	}
	if len(b) == 0 {
		return nil
	}
	n, err := f.dst.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// sliceWriter appends to a byte slice; Apply's destination.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

type applyState struct {
	f Filter
	w sliceWriter
}

var applyPool = sync.Pool{New: func() any { return new(applyState) }}

// Apply filters a whole document held in memory, appending the output to
// dst. On error out holds whatever was written before the error was seen and
// must not be sent.
func Apply(dst, src []byte, names *Names, opts Options) (out []byte, hidden []string, err error) {
	a := applyPool.Get().(*applyState)
	a.w.b = dst
	a.f.Reset(&a.w, names, opts)
	if _, err = a.f.Write(src); err == nil {
		err = a.f.Close()
	}
	out = a.w.b
	if err == nil && len(a.f.hidden) > 0 {
		hidden = append([]string(nil), a.f.hidden...)
	}
	a.w.b = nil
	a.f.dst = nil
	applyPool.Put(a)
	return out, hidden, err
}
